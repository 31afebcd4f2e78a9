// Package pipeline is `bench pipeline`: it runs the experiment dsmount is
// meant to make unnecessary advice for: a real PyTorch image pipeline
// (torchvision ImageFolder, JPEG decode, RandomResizedCrop(224), ToTensor,
// batches of 64) over a Caltech-256-like image folder in S3, read by 1 to 7
// loader workers, cold and hot, on the local copy, through dsmount with and
// without the sampler declaring its orders, through rclone's mount with its
// full VFS cache and through s3fs with its cache; then an epoch series with
// a cache of half the dataset.
//
//	go run ./bench pipeline [--isolate-backend] [--images 6000] [--workers 1,2,4,7]
//	    [--systems local,declared,undeclared,rclone,s3fs] [--series-epochs 4] [--series-workers 4]
//	    [--disk-epochs 2]
//	    [--plot docs/pipeline.png] [--json docs/pipeline.json]
//
// The images are real JPEGs (python/tests/gen_images.py: 256 classes,
// 100-600 px a side, tens to hundreds of KB), uploaded to MinIO behind
// toxiproxy adding --latency ms to every answer; every mount reads the
// bucket through that proxy. Each system runs, per worker count, one
// python/tests/bench_pipeline.py invocation of two epochs: the first cold
// (the page cache dropped; for a mount a fresh cache and mount), the
// second hot. The reference of every ratio is the local copy's rate from
// the same run; the store's ceiling (its own parallel GETs of every image)
// is measured in the same run.
//
// The series (series.go) runs --series-epochs epochs, one invocation each,
// with --series-workers workers on one mount per system whose cache holds
// half the images' bytes, the pipeline in a memory cgroup (what it needs
// and a quarter of the images) whose page cache is emptied between
// epochs; per epoch it reports images/s and the hit rate, 1 - (bytes MinIO
// sent during the epoch / the images' bytes).
//
// The cache-disk pass (disk.go) is what a dataset larger than RAM reads
// once it is cached: per dsmount system one mount warmed with every image,
// every image stat'ed once, then --disk-epochs rounds of one epoch per
// system and one on the local copy, each after drop_caches 1 (pages, not
// inodes) in a memory cgroup limited as the series' is, so that the images come from the cache disk through the daemon (or
// from the local disk) and each ratio is against the local copy's epoch of
// the same round.
//
// The tables go to stdout; the results as JSON to --json, and a plot of
// them (python/tests/plot_pipeline.py) to --plot, both relative to the
// repository root unless absolute ("" skips either).
//
// Needs root (FUSE, drop_caches, cgroups), Debian's python3-torch,
// python3-torchvision, python3-pil, python3-matplotlib, rclone and s3fs
// (installed with apt-get if missing), and the MinIO and toxiproxy
// binaries test/run.sh installs.
package pipeline
