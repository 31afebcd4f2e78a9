// Package daemon is the one dsmount process of a cache directory: it owns
// the cache, the readahead registry, the streams budget that every mount's
// large-file readahead shares, the mounts, the socket through which more
// mounts join, the stats every mount's control entry answers with, and
// the metrics endpoint. cmd/dsmount parses flags and calls Start, AddMount
// and Run (a daemon that `dsmount mount` started), or Join (a mount that
// joins a running daemon).
//
// # Start-up, in phases
//
// The registry's order policy must go into the cache, and the registry
// asks the open cache for its capacity and use. Start does it in order,
// each phase using only what the ones before made: prepare the registry
// (readahead.Prepare, no goroutine yet), open the cache with its policy,
// start the registry with the cache's capacity, size the cache from the
// free space when no capacity was given, then listen on the socket
// (control.SocketName in the cache dir) and serve metrics. A failure
// undoes the phases before it. A cache dir held by another process fails
// with cache.ErrInUse: the CLI then joins that daemon.
//
// # Mounts
//
// AddMount opens the source (Config.OpenBackend), loads its listing,
// builds the tree (fs.New) and serves it (Config.Serve: FUSE, or a
// stand-in in this package's tests). A mountpoint is reserved in pending
// while it is being mounted, so two requests for one place can't both
// mount, and nothing is mounted once Close has begun. One watcher
// goroutine per mount waits for it to go (unmounted from outside, or by
// Close), releases its readahead view, source and backend in that order,
// and forgets it; a daemon with ExitWhenEmpty then stops. A request for a
// place the kernel has let go of but whose server is still ending waits
// for it (up to 10 s) instead of being refused.
//
// # Socket
//
// One JSON control.MountRequest line in, one control.MountReply line out
// (see internal/control). The socket is bound private (0600 from the
// moment it is reachable), every peer is checked with SO_PEERCRED (the
// daemon's user and root only), and a request must arrive within 10 s
// and fit in 1 MiB. A joining mount that names other cache settings
// (size, chunk size, policy) is refused: one daemon, one cache, one set
// of settings.
//
// # Goroutines
//
// Every goroutine the daemon starts is counted in Daemon.wg and ended by
// Close: the socket's accept loop, one per connection, one watcher per
// mount, and the metrics server. Close stops the accept loop, unmounts
// every mount, waits for them all, then closes the registry (its
// scheduler and prefetches) and last the cache.
//
// # Locking
//
// Daemon.mu guards mounts, pending, gone and closing, and is never held
// while calling out (mounting, unmounting, listing, the cache).
package daemon
