// Package gpu is `bench gpu`: a real training step (torchvision ResNet-50,
// bf16 autocast, channels_last, SGD, batch 256) fed by a PyTorch DataLoader
// wrapped in dsmount.StagingLoader, over an ImageNet-like folder of
// generated JPEGs, read from the local directory and through dsmount. It
// answers the question a user with a GPU asks: is my GPU starved, and does
// the mount make it worse than the local disk?
//
//	go run ./bench gpu [--images 16000] [--workers 1,2,4,7,14] [--seconds 5]
//	    [--passes ceiling,local,disk,declared,pagecache,minio] [--json FILE]
//	    [--model resnet50 --batch 256 --crop 224 --device auto]
//
// The images are made by python/tests/bench_gpu.py gen (300-500 px,
// 60-150 KB, one process per CPU). The training loop is one long
// python/tests/bench_gpu.py serve process, so that torch's import, CUDA's
// start and cuDNN's autotuning are paid once; this program drives it one
// pass at a time over its stdin and stdout, and drops caches, mounts and
// warms between the passes. The passes (passes.go), each reporting images/s
// and the GPU wait share (the share of the step loop's time spent waiting
// for the next batch), each bounded by --seconds after a warm-up of as many
// batches as workers:
//
//   - ceiling: the step alone, on a synthetic uint8 batch already on the
//     device;
//   - local: the local directory, page cache dropped;
//   - disk, declared: one dsmount mount of the local directory, its cache
//     filled by `dsmount warm`, page cache dropped before each pass, the
//     order not declared and declared (dsmount.OrderedSampler);
//   - pagecache: the same mount, every image read through it first;
//   - minio: a cold declared pass on a fresh mount of the images in MinIO
//     behind toxiproxy (+--latency ms), at each of --minio-workers.
//
// Every dsmount figure is reported against the local directory's at the
// same worker count in the same run. Page caches are dropped with
// drop_caches where this process may write it, else with
// posix_fadvise(DONTNEED) on every file of the trees (the local images,
// the cache directory and the mount): probe.go tries which works.
//
// Without /dev/fuse it still runs the ceiling and local passes and says
// why the others did not run; without MinIO's and toxiproxy's binaries
// (DSMOUNT_MINIO, DSMOUNT_TOXIPROXY) it skips the minio pass. --deadline
// skips what would not end in time, and the JSON is rewritten after every
// pass, so a run cut short keeps what it measured. bench/gpu/device.sh
// builds what a machine without Go needs and runs the whole sweep there in
// one command (docs/gpu.md).
//
// Work files go under $TMPDIR (the images, the cache directory, MinIO's
// data): point it at the disk to measure, not at a tmpfs.
package gpu
