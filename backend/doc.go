// Package backend is the edge between dsmount and the storage that holds a
// dataset: an S3 bucket prefix (package backend/s3) or a local directory on
// slow storage (package backend/posix).
//
// A Backend does three things: list the objects under its root, stat one
// object, and read a byte range of one precise version of an object. It keeps
// no cache and no state beyond its client; caching belongs to package cache,
// which is the only caller on the read path (fs → cache → backend).
//
// # Versions
//
// Every Object carries an opaque Version string (the S3 ETag; size, mtime and
// inode for a local file). Two reads that name the same Key and Version return
// the same bytes or fail: ReadAt fails with ErrChanged when the object is no
// longer that version, so a caller can never splice old and new bytes of one
// object together.
//
// # Progress
//
// A caller that wants to hear of a read's bytes as they arrive, before
// ReadAt returns, installs a callback with WithProgress; backend/s3 reports
// each read of a response body. Reporting is optional, so callers settle
// their accounts when ReadAt returns.
//
// # Errors
//
// Every error a Backend returns for a failed operation is an *Error whose Kind
// is one of the sentinel errors below (ErrNotFound, ErrChanged, ...), so
// callers classify with errors.Is and never by message text. The original
// cause stays reachable through errors.Unwrap / errors.As.
//
// # Concurrency
//
// Backends are safe for concurrent use by many goroutines; callers bound the
// concurrency themselves.
//
// This package and its implementations (backend/s3, backend/posix,
// backend/memory for tests) are libraries: a Go program may use them
// without the rest of dsmount.
package backend
