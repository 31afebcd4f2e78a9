package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/internal/units"
	"github.com/dsmount/dsmount/readahead"
	"github.com/dsmount/dsmount/readahead/stream"
)

// PolicyOrder is the cache policy that evicts by the declared orders
// (readahead's); the others are cache.PolicyByName's.
const PolicyOrder = "order"

// Settings are the settings of the cache a daemon serves: one daemon, one
// cache, one set of settings (a joining mount that asks for others is
// refused).
type Settings struct {
	Dir       string
	Capacity  int64 // 0: cached bytes plus most of the free space at start
	ChunkSize int64
	Policy    string // PolicyOrder or a cache.PolicyByName name

	JobTimeout       time.Duration
	PrefetchParallel int
	PrefetchLead     time.Duration
}

// Config configures a daemon.
type Config struct {
	Settings Settings
	// MetricsAddr, if set, is where Prometheus metrics are served
	// (HOST:PORT; ":PORT" means 127.0.0.1:PORT).
	MetricsAddr string
	// ExitWhenEmpty ends the daemon with its last mount (a daemon that
	// `dsmount mount` started); otherwise it runs until stopped.
	ExitWhenEmpty bool
	// EmptyGrace, with ExitWhenEmpty, also ends a daemon that has had no
	// mount and no request in progress for this long: one started
	// without a mount (for a systemd unit's process to join) whose
	// starter died or whose first request failed. Zero: only the last
	// unmount ends it.
	EmptyGrace time.Duration
	Logger     *slog.Logger
	// OpenBackend opens a request's source; default OpenBackend. Tests
	// give an in-memory one.
	OpenBackend func(ctx context.Context, req control.MountRequest, log *slog.Logger) (backend.Backend, error)
	// Serve serves a built mount at its mountpoint; default FUSEServer.
	// Tests serve without FUSE.
	Serve ServeFunc
}

// Daemon is the one dsmount process of a cache dir: it owns the cache, the
// readahead registry, the streams budget every mount shares, the socket
// through which more mounts join, every mount, and the metrics endpoint.
//
// Invariants: mounts holds exactly the mounts being served; a mountpoint
// is in at most one of mounts and pending; after closing is set nothing
// is added to mounts.
type Daemon struct {
	cache    *cache.Cache
	ra       *readahead.Registry
	streams  *stream.Budget // every mount's large-file readahead: they share the cache's staging area
	settings Settings
	log      *slog.Logger
	open     func(ctx context.Context, req control.MountRequest, log *slog.Logger) (backend.Backend, error)
	serve    ServeFunc
	ln       net.Listener
	metrics  *http.Server

	exitWhenEmpty bool
	emptyGrace    time.Duration
	idle          *time.Timer   // with emptyGrace: fires checkIdle; guarded by mu
	done          chan struct{} // closed when the daemon should stop
	doneOnce      sync.Once
	closeOnce     sync.Once

	mu      sync.Mutex
	mounts  map[string]mount // by mountpoint
	pending map[string]bool  // mountpoints being mounted (see AddMount)
	// gone holds, by mountpoint, a channel closed once the mount is
	// forgotten (watch). The kernel unmounts before the daemon hears of
	// it, so a request to mount the same place right after `dsmount
	// unmount` waits for that rather than being refused.
	gone map[string]chan struct{}
	// takenByClose holds the gone channels of mounts that went after
	// Close had begun: they ended because the daemon exits, not because
	// someone unmounted them (a holder mounts again only for the former).
	takenByClose map[chan struct{}]bool
	closing      bool           // Close has begun: no new mounts
	wg           sync.WaitGroup // socket server, its connections, mount watchers, metrics server
}

// Start opens the cache of cfg.Settings.Dir and serves its socket. The
// start-up goes in phases, each using only what the ones before made:
//
//  1. the readahead registry is prepared (not started): its order policy
//     must go into the cache;
//  2. the cache opens with that policy (or the one named);
//  3. the registry starts, with the open cache's capacity and use;
//  4. without a given capacity, the free space is measured and the
//     capacity set from it, before any mount starts the cache's count;
//  5. the socket listens, then the metrics endpoint.
//
// A failure undoes the phases before it. ErrInUse (from cache.Open) means
// another process holds the cache dir: join its daemon instead.
func Start(cfg Config) (*Daemon, error) {
	s := cfg.Settings
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ra := readahead.Prepare(readahead.Config{
		Logger: log, JobTimeout: s.JobTimeout, Parallel: s.PrefetchParallel, Lead: s.PrefetchLead, PolicyInstalled: s.Policy == PolicyOrder,
	})
	policy := ra.Policy()
	if s.Policy != PolicyOrder {
		var ok bool
		if policy, ok = cache.PolicyByName(s.Policy); !ok {
			ra.Close()
			return nil, fmt.Errorf("unknown cache policy %q", s.Policy)
		}
	}
	copts := cache.Options{Capacity: s.Capacity, ChunkSize: s.ChunkSize, Policy: policy, Logger: log}
	// Without a capacity it is what is cached plus most of the free
	// space, set once the cache has counted what it holds; the count
	// starts with the first mount, after phase 4 set room.
	var room int64
	if s.Capacity == 0 {
		copts.CapacityFromUsed = func(used int64) int64 { return used + room }
	}
	c, err := cache.Open(s.Dir, copts)
	if err != nil {
		ra.Close()
		return nil, err
	}
	ra.Start(func() (int64, int64) {
		used := c.Used() // first: the capacity may wait for it
		return c.Capacity(), used
	})
	fail := func(err error) (*Daemon, error) {
		ra.Close()
		c.Close()
		return nil, err
	}
	if s.Capacity == 0 {
		free, err := freeSpace(s.Dir)
		if err != nil {
			return fail(fmt.Errorf("--cache-size not given and the free space of %s is unknown: %w", s.Dir, err))
		}
		room = max(free-cache.KeepFree, 0) * 4 / 5
		// 0 would mean unlimited: a full disk must not. (Counting what
		// is cached only when the free space alone is too little.)
		if room < s.ChunkSize && c.Used()+room < s.ChunkSize {
			return fail(fmt.Errorf("--cache-size not given and %s has %s free: free some space, pick another --cache-dir or give --cache-size: %w",
				s.Dir, units.Bytes(free), cache.ErrNoSpace))
		}
	}
	d := &Daemon{
		cache: c, ra: ra, streams: stream.NewBudget(0, 0), settings: s, log: log,
		open: cfg.OpenBackend, serve: cfg.Serve, exitWhenEmpty: cfg.ExitWhenEmpty, emptyGrace: cfg.EmptyGrace, done: make(chan struct{}),
		mounts: map[string]mount{}, pending: map[string]bool{}, gone: map[string]chan struct{}{},
		takenByClose: map[chan struct{}]bool{},
	}
	if d.open == nil {
		d.open = OpenBackend
	}
	if d.serve == nil {
		d.serve = FUSEServer(cfg.Settings.Dir)
	}
	sock := filepath.Join(s.Dir, control.SocketName)
	os.Remove(sock) // stale: whoever made it no longer holds the cache lock
	ln, err := listenPrivate(sock)
	if err != nil {
		return fail(fmt.Errorf("control socket: %w", err))
	}
	d.ln = ln
	d.armIdle()
	d.wg.Add(1)
	go d.serveSocket()
	if cfg.MetricsAddr != "" {
		if err := d.serveMetrics(cfg.MetricsAddr); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

// SocketPath is where the daemon listens for mount requests.
func (d *Daemon) SocketPath() string { return filepath.Join(d.settings.Dir, control.SocketName) }

// CacheSize is the cache's used bytes and capacity for a log line, or
// "counting" for both while the cache still counts what it holds.
func (d *Daemon) CacheSize() (used, capacity any) {
	n, ok := d.cache.UsedIfCounted()
	if !ok {
		return "counting", "counting"
	}
	return n, d.cache.Capacity()
}

// Run serves until ctx is done or, for a daemon that exits when empty,
// until its last mount is gone; then it closes the daemon.
func (d *Daemon) Run(ctx context.Context) {
	d.Wait(ctx)
	d.Close()
}

// Wait returns when ctx is done or, for a daemon that exits when empty,
// when its last mount is gone: the daemon should then be closed.
func (d *Daemon) Wait(ctx context.Context) {
	select {
	case <-ctx.Done():
		d.log.Info("signal received; unmounting everything")
	case <-d.done:
		d.log.Info("no mounts left; exiting")
	}
}

func (d *Daemon) stop() { d.doneOnce.Do(func() { close(d.done) }) }

// armIdle (re)starts the empty-grace timer of a daemon that exits when
// empty; its firing stops the daemon only if it is still empty then.
func (d *Daemon) armIdle() {
	if !d.exitWhenEmpty || d.emptyGrace <= 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return
	}
	if d.idle == nil {
		d.idle = time.AfterFunc(d.emptyGrace, d.checkIdle)
		return
	}
	d.idle.Reset(d.emptyGrace)
}

// checkIdle stops a daemon that has no mount and no request in progress.
func (d *Daemon) checkIdle() {
	d.mu.Lock()
	empty := len(d.mounts) == 0 && len(d.pending) == 0 && !d.closing
	d.mu.Unlock()
	if empty {
		d.log.Info("no mount within the grace period; exiting", "grace", d.emptyGrace)
		d.stop()
	}
}

// Close unmounts everything, waits for every goroutine the daemon owns,
// and releases the readahead registry and then the cache. It is safe to
// call more than once.
func (d *Daemon) Close() { d.closeOnce.Do(d.close) }

func (d *Daemon) close() {
	d.stop()
	d.ln.Close()
	if d.metrics != nil {
		d.metrics.Close()
	}
	d.mu.Lock()
	d.closing = true
	if d.idle != nil {
		d.idle.Stop()
	}
	mounts := make([]mount, 0, len(d.mounts))
	for _, m := range d.mounts {
		mounts = append(mounts, m)
	}
	d.mu.Unlock()
	stranded := 0
	for _, m := range mounts {
		d.log.Info("unmounting", "mountpoint", m.served.Mountpoint())
		if err := m.served.Unmount(); err != nil {
			d.log.Warn("unmount failed", "mountpoint", m.served.Mountpoint(), "err", err)
			if errors.Is(err, errStranded) {
				stranded++
			}
		}
	}
	if stranded > 0 {
		// Their servers, and so their watchers, run until the files open
		// in them are closed; the cache stays open under them. Exiting
		// ends their connections, and the cache, written crash-safely,
		// opens again from what is on disk.
		d.log.Warn("not waiting for detached mounts that files are still open in; the cache is left for the next start to reopen", "mounts", stranded)
		return
	}
	d.wg.Wait()
	d.ra.Close()
	if err := d.cache.Close(); err != nil {
		d.log.Warn("closing cache", "err", err)
	}
}

func freeSpace(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}
