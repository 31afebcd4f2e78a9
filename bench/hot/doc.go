// Package hot is `bench hot`: it measures dsmount's hot read path
// (everything already in the chunk cache, the dataset fits in RAM) side by
// side with the same reads of the local source directory, in one run, each
// figure the best of --rounds (these machines are shared and noisy; rounds
// alternate which side goes first). The mount is `dsmount mount SRC MNT
// --cache-dir ... --cache-size ... --fast-path=MODE` of a local directory;
// after `dsmount warm MNT` and one untimed pass through the mount that
// checks every file's size and CRC-32C against the source (and warms the
// kernel page cache), it measures:
//
//  1. hot epoch: --files files of --file-size bytes, --readers goroutines
//     taking the next path of one shuffled order from a shared index, each
//     doing open / read-all / close (testenv.ReadAllInOrder); files/s,
//     mount vs direct (source page cache warm). Target >= 0.9x.
//     1c. the same epoch from the cache disk (issue 37): for each of
//     --disk-readers (8,32), the page cache dropped (drop_caches 1) before
//     each side, so the local side reads the source from disk and the
//     daemon serves every file from its cache files on the same disk.
//     Target >= 0.9x. Per file on the mount's side: the FUSE requests by
//     opcode (the kernel's fuse_request_send tracepoint, in a tracing
//     instance of its own: testenv.FuseTrace), the daemon's context
//     switches and its CPU, and how much the page cache grew on each
//     side (one copy of the files, or two).
//     1d. the same with each round's order declared (`dsmount order`)
//     just before the mount's epoch. Target >= 1.0x.
//  2. `dd if=FILE of=/dev/null bs=1M` of one --large-mib file, MB/s by dd's
//     own clock, mount vs direct, both page caches warm. Target >= 0.95x.
//     Also, for context, the mount with the file's page cache dropped first
//     (posix_fadvise DONTNEED on a fd of the file through the mount, which
//     leaves the source's and the daemon's cache file's pages alone), vs
//     direct warm.
//     2c. dd of the file with the whole page cache dropped (sync,
//     drop_caches 1) before each read: the local file, the large file's
//     own mount, and a mixed mount (the small files' dataset holds the
//     same file, hard-linked, so its mount runs no-open and the daemon
//     serves it). Target >= 0.9x for both mounts. The share of the file's pages resident as a fresh
//     opener sees them (open, mmap, mincore) is reported before each.
//  3. a real torch DataLoader (python/tests/bench_loader.py, --python):
//     a Dataset of torch.frombuffer(file bytes), num_workers 4, batch 32,
//     shuffle; one warm-up epoch then one timed epoch per invocation;
//     samples/s, mount vs direct. Target >= 0.8x.
//     3b. context for 3, without torch: one Python process reading every
//     file whole with open(buffering=-1), open(buffering=0) and
//     dsmount.read_bytes (python/tests/bench_open.py), files/s, mount vs
//     direct, and the
//     daemon's CPU per file (the isatty() ioctl of a buffered open() is a
//     round trip to it).
//  4. `ls -lR` of the tree (LC_ALL=C, to /dev/null), wall time, mount vs
//     direct, after one untimed warm-up each (whose outputs are compared:
//     names, types, file sizes). Target: mount <= 2x direct.
//  5. the daemon's CPU seconds (/proc/PID/stat) during the timed mount
//     epochs of pass 1, per 1,000 files, and its RSS after the passes.
//
// After the passes every file is checked through the mount again (CRC-32C).
// The program exits 0 when a target is missed (it is a measurement) and
// non-zero on errors (a wrong byte included). --client-cpu N pins this
// program (its readers) and the daemon to CPU N, as a node's client side.
// Usage: go run ./bench hot
// [flags]; needs root (FUSE). An empty --fast-path (--fast-path=) leaves
// the flag off the mount command (for a binary without it); --bin runs a
// prebuilt binary instead of building this checkout's.
package hot
