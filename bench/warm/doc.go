// Package warm is `bench warm`: it measures `dsmount warm` against the
// backend's own ceiling, side by side in one run (these machines are shared
// and noisy):
//
//   - raw GETs (the reference): plain parallel ranged GetObject calls
//     (Range bytes=0-(size-1), as the daemon makes them), --parallel in
//     flight, through the same proxy, no filesystem, from a process started
//     for the pass and timed from its start to its exit;
//   - raw GETs from this long-lived process (context): the same, with
//     connections and a heap kept from round to round, which no fresh
//     daemon has (rawchild.go says what that is worth here);
//   - warm: `dsmount warm MOUNTPOINT --parallel N` on a fresh mount and a
//     fresh cache dir, timed from the command's start to its exit (the walk
//     of the tree through the mount included; the mount's own start and
//     listing are not).
//
// The dataset (--files small files of --file-size bytes) lives in MinIO
// behind a toxiproxy adding --latency ms (± --jitter) to every answer, like
// a remote S3. Each round runs the three passes in that order; --rounds > 1
// repeats them and reports every round and the median ratio. Usage:
// go run ./bench warm [flags]; needs root (FUSE) and the MinIO and
// toxiproxy binaries that test/run.sh installs.
package warm
