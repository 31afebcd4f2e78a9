// Package cold is `bench cold`: it measures dsmount's read path side by
// side with its references in one run, as ratios (these machines are
// shared and noisy):
//
//   - direct: the same files read from a local directory (page cache dropped,
//     then warm);
//   - raw GETs: plain parallel GetObject calls to MinIO, no filesystem (the
//     backend's own ceiling);
//   - mount cold: through a fresh dsmount mount of the MinIO bucket;
//   - mount hot: the same mount again (kernel page cache), and a remount on
//     the same cache dir (chunks served from the cache files).
//
// Each small-file pass reads every file once in a shuffled order with
// --readers parallel readers; the large file is read once sequentially in
// 1 MiB reads. Usage: go run ./bench cold [flags]; needs root (FUSE, and
// drop_caches) and the MinIO binary that test/run.sh installs.
package cold
