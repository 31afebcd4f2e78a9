// Package s3 is the backend for a dataset stored under a prefix of an S3
// bucket, on AWS or on an S3-compatible store (MinIO, Ceph, ...).
//
// It owns one aws-sdk-go-v2 S3 client and that client's connection pool;
// nothing else. Credentials, region and endpoint come from the standard AWS
// configuration chain (environment, shared profiles, AWS_ENDPOINT_URL_S3),
// overridden by Options.
//
// # Invariants
//
//   - Keys are relative to the prefix, which is empty or ends in '/'.
//   - An Object's Version is its ETag without quotes. ReadAt sends it back as
//     If-Match, so a read either returns bytes of exactly that version or
//     fails with backend.ErrChanged; it also checks the ETag of the answer,
//     for stores that ignore conditional requests.
//   - Some S3-compatible stores give no ETag. Such an object's Version is
//     "lm:" and its Last-Modified time in UTC, at the precision the listing
//     (or HEAD) gave, so a same-size overwrite is a new version, and ReadAt
//     fails with backend.ErrChanged when the answer's Last-Modified header
//     (1 s resolution) is later than the listed time rounded up to the
//     second (a store may round it either way). An object rewritten at the
//     same size within that second, or the next, of its listed time can't
//     be told apart: List warns once that the store gives no ETags. Where
//     the store gives no Last-Modified either, the Version is "" and changes
//     can't be detected at all (also said once). Stat's Last-Modified comes
//     from a HEAD header, to the second, so its Version for such an object
//     may differ from List's: a new identity, never a wrong one.
//   - Every failure is a *backend.Error classified from HTTP status codes and
//     S3 error codes, never from message text. The SDK's error and, after a
//     cancellation, the context's error stay reachable through errors.Is/As.
//   - New proves the source is usable (one short listing) before returning.
//
// # Retries
//
// The SDK retries each request up to five times, without its shared retry
// quota (which many concurrent readers would drain). Once response headers
// have arrived the SDK is done, so ReadAt itself retries a range whose body
// is cut off, and a connection that stays silent for 30 s is dropped.
//
// # The tail
//
// A store's slow failures (a connection that stops answering and never
// closes) are bounded well before 30 s (tail.go, hedge.go): each GET waits
// for its answer a multiple of the recent 99th percentile of answer times
// (within floors and ceilings), its body may go quiet for as long, and a
// read a caller waits for (backend.WithUrgency) that has no answer after
// that percentile races a second GET on another connection, within a
// budget of extra requests. These waits, and the answer times they
// follow, are measured in time the process ran (runclock.go): a process
// starved of CPU finds its answers in when it runs again, rather than
// abandoning them all as the store's failure. RequestStats counts GETs,
// hedges, timeouts, retries and throttled answers.
//
// ReadAt's GETs skip the SDK's operation stack (get.go): plain HTTP requests
// signed with the SDK's SigV4 signer, on the SDK's HTTP client. So they
// also do what that stack would: ReadAt's loop retries their transient
// failures, and a refusal that a skewed node clock explains (the store's
// Date over four minutes from the signing time) is signed again at the
// store's time, whose offset later GETs keep (clock.go).
//
// List's pages are fetched the same way (listraw.go) and decoded by hand
// (listxml.go), for the SDK's XML deserializer was most of a large first
// mount's CPU. They ask for URL-encoded keys, so keys with characters XML
// 1.0 can't carry are listed as stored; a failed page is asked for again
// as the SDK would (five attempts), with ReadAt's back-off.
//
// # Client setup
//
// The HTTP client is the SDK's BuildableClient tuned in place, because the
// SDK refuses to apply AWS_CA_BUNDLE to any other; its idle pool is sized to
// Options.MaxConns. Response checksum validation is limited to operations
// that require it, since ranged GETs cannot be validated and would otherwise
// log a warning each.
//
// # Concurrency
//
// A Backend is safe for concurrent use; callers bound the number of requests
// in flight (and should pass that bound as Options.MaxConns).
package s3
