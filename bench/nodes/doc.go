// Package nodes is `bench nodes`: data-parallel training over N "nodes" on
// this machine, each with its own dsmount daemon, cache directory and
// mount, every cache a 1/N share of the dataset's bytes, reading one
// dataset in S3 (MinIO behind toxiproxy, +20 ms). Per layout (nodes ×
// ranks per node) and sampler it runs the ranks as processes in one
// torch.distributed gloo group on 127.0.0.1 (python/tests/bench_nodes.py:
// DistributedOrderedSampler over a PyTorch DataLoader, a barrier after
// every batch as the gradient all-reduce would put one), each reading
// through its node's mount, and reports per epoch the hit rate, 1 - the
// store's GETs in the epoch / the samples read, and the GETs as a
// fraction of the files.
//
//	go run ./bench nodes [--files 10000] [--mean-size 40000] [--layouts 4x1,4x2,8x1]
//	    [--batch 64] [--epochs 3] [--locality on,off] [--isolate-backend]
//
// "off" is today's DistributedOrderedSampler: each rank reads a fresh
// random 1/W of every epoch. "on" is locality=True: the same global
// batches, each sample read by a rank whose node caches it.
//
// The ranks run in one memory cgroup (--rank-memory for each rank and its
// loader workers, plus --page-cache) whose page cache is emptied between
// epochs, so that no epoch reads what an earlier one left in the kernel's
// page cache; the daemons run outside it. GETs made between two epochs
// (the daemons' prefetch of the next epoch's declared head) count for the
// next one.
//
// Needs root (FUSE, cgroups), Debian's python3-torch and the MinIO and
// toxiproxy binaries test/run.sh installs.
package nodes
