// Package order is `bench order`: it measures dsmount's readahead (declared
// epoch orders for many small files; sequential prefetch for one large file)
// against the backend's own ceiling, side by side in one run: these machines
// are shared and noisy, so every figure is reported as a ratio to a
// reference measured in the same run, on the same backend.
//
// Small files (--files of --file-size bytes, in MinIO behind a toxiproxy
// adding --latency ms ± --jitter to every answer, like a remote S3):
//
//   - ceiling: plain parallel ranged GetObject calls, 64 in flight, no
//     filesystem (testenv.ParallelGets), in the epoch's shuffled order: what
//     the store gives through the proxy.
//   - cold, not declared: one epoch through a fresh mount and cache dir,
//     --readers goroutines taking the next path of ONE shuffled order from a
//     shared index (like DataLoader workers), each doing open / read-all /
//     close. The daemon only sees the reads: at best --readers GETs in flight.
//   - cold, declared: the same on another fresh mount, after `dsmount order
//     --job bench --epoch 0` with that order (the declaration is inside the
//     timed span). The daemon prefetches ahead of the readers; the target is
//     >= 0.8x the ceiling's files/s.
//   - stall, declared / not declared: the readers also "train": after each
//     sample each sleeps w = readers / (0.6 x ceiling files/s) (--demand
//     0.6), so their aggregate demand is 0.6x what the store can give.
//     Ideally the epoch then takes only the pure work time N*w/readers;
//     stall = (epoch - work) / epoch is the share of the epoch the readers
//     spent waiting for data. Target <= 5% with the order declared; the undeclared figure is
//     for contrast. (Sleeps are compensated: a reader that overslept sleeps
//     that much less next time, so its total sleep is its samples times w.)
//
// Every file read through a mount is checked: size, and a CRC-32C against
// the source file.
//
// Large file (one --large-mib object, behind its own proxy with
// --large-latency ms and, if one connection through it is faster than
// --large-conn-mbs, a bandwidth toxic limiting each connection to that):
//
//   - one connection: a single GetObject of the whole object, MB/s: what a
//     reader gets from the store without parallelism.
//   - dd through the mount: `dd if=MNT/large/large-0.bin of=/dev/null bs=1M`
//     on a fresh mount and cache dir. The daemon sees sequential reads and
//     fetches chunks ahead in parallel; the target is >= 4x one connection.
//   - dd from local disk: the same file from the local source directory, its
//     page cache dropped (fadvise DONTNEED), for context.
//
// Streams (--streams N files of --stream-mib, through the large file's
// proxy; off by default): the store's own 16 ranged GETs over all N files
// (the reference), and one dd per file, all at once, through one cold
// mount, as loader workers that each stream their own shard would. The
// table reports how many chunks fetched ahead were pushed out of the
// staging area unread (dsmount stats' staged_pushed_out).
//
// GETs per pass are MinIO's own count (per-bucket in-flight + finished
// GetObject). While a mount pass runs, the daemon's dsmount_backend_fetches_in_flight
// is scraped every --sample-every (its --metrics-addr) to show how many
// backend fetches it actually keeps going; the job's prefetched /
// prefetch_hits / stalls come from `dsmount stats --json` after the pass.
//
// Two settings shape the machine rather than the measurement:
//
//   - --recycle-memory (on by default): before every timed pass
//     --recycle-mib of fresh memory is touched and freed, untimed
//     (testenv.RecycleMemory), so each pass starts with recently used
//     memory: this VM's host takes back guest memory left free, and
//     whichever pass first fills the page cache otherwise pays for it.
//   - --isolate-backend: MinIO and toxiproxy on CPU 0, everything else on
//     the others (testenv.IsolateBackend): a remote store's CPU is not the
//     node's. Off by default; on a 2-core machine it leaves the daemon,
//     the readers and dd one core.
//
// Before the first round, --warm-store untimed passes of the store's own
// parallel GETs warm MinIO and toxiproxy (see warmStore).
//
// Each round runs every pass; --rounds > 1 reports every round and the
// median ratios. Usage: go run ./bench order [flags]; needs root (FUSE)
// and the MinIO and toxiproxy binaries that test/run.sh installs. It exits 0
// when a target is missed (it is a measurement) and non-zero on errors (a
// wrong byte included).
package order
