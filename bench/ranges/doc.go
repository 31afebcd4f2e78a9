// Package ranges is `bench ranges` (issue 46): training samples that are
// byte ranges of one big file, as an LLM's token bin read by nanoGPT's
// get_batch through np.memmap.
//
// The store: one file of --file-size bytes of uint16 tokens (default 2G)
// in MinIO behind toxiproxy adding --latency ms (20) to every answer. Each
// token is a function of its index (tokens.go), so every window read is
// checked without a copy of the file. With --isolate-backend MinIO and
// toxiproxy run on CPU 0 and this program, the daemons and the readers on
// the others.
//
// The readers: --readers (8) processes of reader.py (embedded, written to
// the work directory), each looping as get_batch does: a new
// np.memmap(path, dtype=np.uint16, mode='r') per batch, --batch (12)
// random starts from a numpy generator seeded per reader, a copy of a
// window of --block+1 tokens (2,050 bytes) at each, every token checked.
// They run --seconds (30) per pass, all started together once numpy is
// imported; a pass's figure is the windows finished in that time per
// second. They run in a memory cgroup of their own: bounded, its limit is
// what they hold when ready, 16 MiB and --page-cache (default a quarter of
// the file), so the kernel can't keep the file in their page cache.
// Every pass reads the same windows in the same order (--rng-seed).
//
// The passes (--passes), each against a reference of the same run:
//
//   - raw: GetObject with a Range of one window at a random token, --readers
//     in flight, from this program, no filesystem: the store's own rate,
//     the reference of the passes that read from the store;
//   - quarter: a fresh mount whose cache holds a quarter of the file
//     (--cache-size), reads undeclared, page cache bounded: windows/s
//     against raw, the store's bytes over the bytes the readers used, its
//     GETs, and the daemon's CPU per window;
//   - full: a fresh mount with the daemon's default cache size (which
//     holds the file), undeclared: cold against raw, with the store's bytes
//     against the file's; then `dsmount warm` (untimed) so that the file is
//     cached whole, drop_caches, and the same mount from the cache disk
//     (page cache bounded) against the local file read the same way
//     (drop_caches, bounded); then each read whole into the page cache
//     (untimed), the readers unbounded, mount against local file.
//
// The LMDB passes (lmdb.go, not in the default --passes; issue 46's
// target 3) read an image dataset as one LMDB instead: --lmdb-records
// (10,000) records of 60-150 KB, keys b"%08d" % k, each record's bytes a
// function of its key, built by lmdb_build.py (Debian's python3-lmdb),
// which also finds each record's byte range in data.mdb (from the address
// of its value in LMDB's map, every range checked against the file, and
// again by this program); data.mdb is uploaded under lmdb/images.lmdb/.
//
//   - lmdb-raw: GetObject with a Range of one record's bytes, --readers in
//     flight, each goroutine walking its reader's key order;
//   - lmdb-quarter, lmdb-quarter-ra: a fresh mount whose cache holds a
//     quarter of data.mdb; --readers processes of lmdb_reader.py open the
//     LMDB once (readonly, lock=False; readahead=False, which madvises the
//     map MADV_RANDOM, or LMDB's default readahead=True) and read records
//     in a random key order (a permutation per reader, the raw GETs'),
//     a read transaction and txn.get each, every byte checked; their page
//     cache bounded to a quarter of data.mdb.
//
// Store bytes and GETs are MinIO's own counts (its metrics' bytes sent
// for all S3 answers, and its GetObject requests) over the timed span. The
// bytes count bodies, not headers (the raw pass's equal its windows'); the
// only other S3 calls in the span are the metrics' own small ListBuckets.
// The mount passes also show dsmount's counts (dsmount stats: bytes
// fetched, GETs sent, FUSE READs). Daemon CPU is /proc/PID/stat's utime +
// stime over the same span.
//
// A pass is an entry of allPasses (passes.go) and a function returning its
// rows, each naming the row its ratio is against: declared passes, when
// they come, are more entries.
//
// Usage: go run ./bench ranges [flags]; needs root (FUSE, cgroups,
// drop_caches), Debian's python3-numpy and the MinIO and toxiproxy
// binaries that test/run.sh installs. DSMOUNT_BIN runs a prebuilt dsmount
// instead of building this checkout's.
package ranges
