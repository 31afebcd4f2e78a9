// Package scale is `bench scale`: it measures dsmount at ImageNet's scale
// (issue 23): a store of --objects objects (default 1,281,167) of --size
// bytes in ImageNet's layout (train/nXXXXXXXX/nXXXXXXXX_J.JPEG, --dirs class
// directories), each figure beside a reference measured in the same run and
// the target:
//
//	a. the store's own listing rate: a bare aws-sdk-go-v2 client listing
//	   the bucket in sequential pages of 1000, and walking it with
//	   delimiter "/" with --parallel workers (the reference of b);
//	b. first mount (the listing) and the daemon's RSS after it;
//	c. `find MNT -type f | wc -l` after dropping the kernel's caches,
//	   against the same on a local tree of empty files; RSS after;
//	d. `ls -l` of one class directory, first (cold) and the median of 5
//	   repeats, against the local tree;
//	e. declaring a shuffled order of every path: `dsmount order` and the
//	   Python OrderedSampler (time inside Python and of the process); RSS;
//	f. `dsmount warm` of the first --subset of the directories, then a cold
//	   epoch over a different --subset of the files by --readers
//	   goroutines, every byte checked; RSS and the store's GET count;
//	g. `dsmount warm --check` of the whole tree;
//	h. the cache index's size on disk, then a remount on the same cache
//	   (with --warm-all, after warming every object: the start-up with
//	   over a million chunk records).
//
// The store is an in-process S3 server that generates each object's bytes
// from its key (testenv.GenS3), run as a child process of this program
// (`bench scale serve-s3`) behind toxiproxy adding --latency ms to every
// answer. With --isolate-backend, the server and toxiproxy run on CPU 0 and
// everything else (this program, the daemon, the commands) on the others.
//
// Usage (root: FUSE and drop_caches; the toxiproxy binary test/run.sh
// installs):
//
//	go run ./bench scale --isolate-backend --out report.md
//
// It prints progress lines to stderr and the markdown report to stdout
// (and --out). A full run takes about 8 minutes here, and --warm-all about
// 8 more (a million GETs at +20 ms, 64 at a time). DSMOUNT_BIN runs a
// prebuilt dsmount instead of building this checkout's; --skip leaves
// steps out (order-py-next, the second Python declaration, is the slowest
// of e).
package scale
