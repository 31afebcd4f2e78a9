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
// and forgets it; a daemon with ExitWhenEmpty then stops. With EmptyGrace
// too, such a daemon also stops when it has had no mount and no request
// in progress for that long: one started with no mount for a systemd
// unit's process to join, whose joiner died or whose mount failed. A
// request for a
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
// A request with Hold (a systemd service's main process joining) keeps
// its connection: the connection's goroutine waits for the mount to go
// or the client to hang up (which unmounts it), then writes one
// control.MountEnded line: "daemon exiting" only for a mount that went
// after Close began (takenByClose), so that a last mount unmounted from
// outside is reported as unmounted although the daemon's exit follows.
// The client side is Held; a dsmount@ unit's process mounts again on
// "daemon exiting", and exits on "unmounted".
//
// # Unmounting a busy mount
//
// A mount with a file open in it can't be unmounted. FUSEServer's
// Unmount detaches it lazily (it leaves the namespace at once), gives the
// holder a second to let go, then aborts its FUSE connection through
// fusectl (fs.Mount.Abort), so the holder's reads fail and the server
// ends: a stop never waits on a reader. Where the connection can't be
// ended (no CAP_SYS_ADMIN to mount fusectl), Close does not wait for that
// mount's server and leaves the cache for the next start to reopen:
// exiting ends the connection.
//
// # Goroutines
//
// Every goroutine the daemon starts is counted in Daemon.wg and ended by
// Close: the socket's accept loop, one per connection (a held one also
// owns the reader that sees its client hang up, and ends it by closing
// the connection), one watcher per mount, and the metrics server. Close stops the accept loop, unmounts
// every mount, waits for them all, then closes the registry (its
// scheduler and prefetches) and last the cache.
//
// # Locking
//
// Daemon.mu guards mounts, pending, gone and closing, and is never held
// while calling out (mounting, unmounting, listing, the cache).
package daemon
