// Package jobs is `bench jobs`: it measures what several training jobs
// sharing one cache get from it: the hit rate per epoch of each
// --cache-policy, beside an offline oracle (Belady's rule over the reads the
// jobs actually made), in one run.
//
// The store: --files small files (sizes spread around --mean-size) in MinIO
// behind toxiproxy adding --latency ms to every answer, as a remote S3.
// With --isolate-backend, MinIO and toxiproxy run on CPU 0 and everything
// else on the other CPUs.
//
// For each configuration (--jobs × --fractions × --bounded × --policies):
//
//   - a fresh cache dir and mount, --cache-size the fraction of the
//     dataset's bytes;
//   - one process per job (this program, as a reader), each with --workers
//     goroutines taking the next path of its own shuffled order, reading
//     every file whole; with --bounded on, all the readers run in one
//     memory cgroup of --page-cache bytes, so the kernel's page cache can't
//     hold the dataset (as on a node whose dataset is far larger than RAM);
//   - under --cache-policy order, each job declares each epoch's order
//     before it, and the next epoch's (`dsmount order MNT --job J --epoch E
//     --pid READER --next NEXT LIST`, as the Python sampler does; without
//     --pid with --declare anonymous; without --next with --next=false);
//     under the others, nothing is declared;
//   - epoch 0 warms the cache and is not reported; epochs 1..--epochs are:
//     all jobs start together, the page cache dropped first;
//   - the hit rate of an epoch is 1 - GETs / reads (GETs: MinIO's own
//     count, prefetches included, and those made between the epoch before
//     and this one; reads: jobs × files);
//   - the oracle replays the reads all jobs made (by their start times) on
//     a cache of the same size that evicts what is needed farthest in the
//     future and admits nothing needed later than all it holds (Belady),
//     from the first epoch on.
//
// It prints one table with every configuration and the jobs' daemon-side
// figures (dsmount stats). Usage: go run ./bench jobs [flags]; needs
// root (FUSE, cgroups, drop_caches) and the MinIO and toxiproxy binaries
// that test/run.sh installs. DSMOUNT_BIN runs a prebuilt dsmount instead
// of building this checkout's.
package jobs
