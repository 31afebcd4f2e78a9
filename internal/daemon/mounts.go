package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"syscall"
	"time"

	dsfs "github.com/dsmount/dsmount/fs"
	"github.com/dsmount/dsmount/internal/control"
)

// Served is a mount being served at its mountpoint: by FUSE in
// production (ServeFUSE), by a stand-in in tests.
type Served interface {
	Mountpoint() string
	// Attached says whether the mount is still in place: after an
	// unmount from outside it is not, while its server may still be
	// ending.
	Attached() bool
	// Wait returns once the mount is gone (unmounted from outside, or by
	// Unmount).
	Wait()
	// Unmount takes the mount away and waits for Wait to return.
	Unmount() error
}

// ServeFunc serves a built mount at mountpoint.
type ServeFunc func(m *dsfs.Mount, mountpoint string, log *slog.Logger) (Served, error)

// mount is one mount of the daemon: the filesystem and how it is served.
type mount struct {
	fs     *dsfs.Mount
	served Served
	// metrics are its observed series: read latency, the store's GETs
	// (metrics.go).
	metrics *liveMetrics
}

// AddMount opens the request's source, loads its listing (from the cache
// unless req.Refresh), builds the tree and serves it. It refuses a
// mountpoint this daemon already serves, and any mount once Close has
// begun.
func (d *Daemon) AddMount(ctx context.Context, req control.MountRequest) (*dsfs.Mount, error) {
	fastPath, err := dsfs.ParseFastPath(cmp.Or(req.FastPath, string(dsfs.FastPathAuto)))
	if err != nil {
		return nil, err
	}
	// Reserve the mountpoint: two requests for one mountpoint must not both
	// mount, and a request still listing when the daemon closes must not
	// mount after close has unmounted everything.
	if err := d.waitUnmounted(ctx, req.Mountpoint); err != nil {
		return nil, err
	}
	d.mu.Lock()
	_, taken := d.mounts[req.Mountpoint]
	taken = taken || d.pending[req.Mountpoint]
	closing := d.closing
	if !taken && !closing {
		d.pending[req.Mountpoint] = true
	}
	d.mu.Unlock()
	if closing {
		return nil, errors.New("the dsmount daemon is shutting down")
	}
	if taken {
		return nil, fmt.Errorf("%s is already mounted by this daemon", req.Mountpoint)
	}
	defer func() {
		d.mu.Lock()
		delete(d.pending, req.Mountpoint)
		empty := len(d.mounts) == 0 && len(d.pending) == 0
		d.mu.Unlock()
		if empty {
			// A failed request leaves the daemon as it was before it.
			d.armIdle()
		}
	}()
	b, err := d.open(ctx, req, d.log)
	if err != nil {
		return nil, err
	}
	// A mount's latencies are observed only where they can be scraped:
	// without --metrics-addr a read costs no clock reads for them.
	var metrics *liveMetrics
	var readLatency dsfs.ReadObserver
	if d.metrics != nil {
		metrics = newLiveMetrics(req.Mountpoint, b)
		readLatency = metrics.readObserver()
	}
	objs, err := dsfs.LoadListing(ctx, d.cache, b, req.Refresh, d.log)
	if err != nil {
		b.Close()
		return nil, err
	}
	src := d.cache.Source(b)
	ra := d.ra.Mount(req.Mountpoint, src)
	// release undoes the four in order: the mount's pushes stop,
	// readahead stops asking for prefetches, then the source's fetches
	// in flight end, then the backend they used closes.
	var m *dsfs.Mount
	release := func() {
		m.Close()
		ra.Close()
		src.Close()
		b.Close()
	}
	m = dsfs.New(dsfs.Config{Cache: d.cache, Source: src, Listing: objs, AllowOther: req.AllowOther, Logger: d.log, Stats: d.stats, Readahead: ra, FastPath: fastPath, Streams: d.streams, ReadLatency: readLatency, FsName: req.Source})
	reportSkipped(d.log, m.Skipped())
	// Listing a million keys leaves as much garbage as the tree holds
	// (the store's answers, decoded); give it back to the system now
	// rather than when the scavenger gets to it.
	debug.FreeOSMemory()
	served, err := d.serve(m, req.Mountpoint, d.log)
	if err != nil {
		release()
		return nil, err
	}
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		if err := served.Unmount(); err != nil {
			d.log.Warn("unmount failed", "mountpoint", req.Mountpoint, "err", err)
		}
		release()
		return nil, errors.New("the dsmount daemon is shutting down")
	}
	d.mounts[req.Mountpoint] = mount{fs: m, served: served, metrics: metrics}
	d.gone[req.Mountpoint] = make(chan struct{})
	d.wg.Add(1)
	d.mu.Unlock()
	go d.watch(served, release)
	// The cache counts what it holds once a mount is up, not before.
	d.cache.StartIndexScan()
	used, capacity := d.CacheSize()
	d.log.Info("mounted", "source", b.ID(), "mountpoint", req.Mountpoint, "files", m.Files(), "dirs", m.Dirs(),
		"fast_path", m.FastPathMode(), "cache_dir", d.settings.Dir, "cache_used", used, "cache_capacity", capacity, "chunk_size", d.cache.ChunkSize(), "daemon_pid", os.Getpid())
	return m, nil
}

// watch forgets a mount once it is gone (unmounted from outside or by
// Close), and ends the daemon with its last mount if asked to.
func (d *Daemon) watch(s Served, release func()) {
	defer d.wg.Done()
	s.Wait()
	release()
	d.mu.Lock()
	delete(d.mounts, s.Mountpoint())
	gone := d.gone[s.Mountpoint()]
	delete(d.gone, s.Mountpoint())
	if d.closing {
		d.takenByClose[gone] = true
	}
	empty := len(d.mounts) == 0
	d.mu.Unlock()
	close(gone)
	d.log.Info("unmounted", "mountpoint", s.Mountpoint())
	if empty && d.exitWhenEmpty {
		d.stop()
	}
}

// waitUnmounted waits, up to unmountSettle, for the daemon to forget a
// mount of mountpoint that the kernel no longer has (unmounted from
// outside, its server still ending). A mount still in place is left for
// AddMount to refuse.
func (d *Daemon) waitUnmounted(ctx context.Context, mountpoint string) error {
	d.mu.Lock()
	gone := d.gone[mountpoint]
	m, ok := d.mounts[mountpoint]
	d.mu.Unlock()
	if gone == nil || (ok && m.served.Attached()) {
		return nil
	}
	t := time.NewTimer(unmountSettle)
	defer t.Stop()
	select {
	case <-gone:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// unmountSettle bounds how long a mount request waits for an unmounted
// mount of the same place to be forgotten.
const unmountSettle = 10 * time.Second

// stillFuse reports whether a FUSE filesystem is mounted at dir: after an
// unmount, dir is the directory beneath again.
func stillFuse(dir string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(dir, &st) == nil && st.Type == fuseSuperMagic
}

// fuseSuperMagic is FUSE's f_type in statfs (linux/magic.h).
const fuseSuperMagic = 0x65735546

// unmount takes one mount away (a held mount whose owner hung up) and
// waits, bounded, until it is forgotten (gone closed).
func (d *Daemon) unmount(mountpoint string, gone <-chan struct{}) {
	d.mu.Lock()
	m, ok := d.mounts[mountpoint]
	d.mu.Unlock()
	if !ok {
		return
	}
	if err := m.served.Unmount(); err != nil {
		d.log.Warn("unmount failed", "mountpoint", mountpoint, "err", err)
		return
	}
	t := time.NewTimer(unmountSettle)
	defer t.Stop()
	select {
	case <-gone:
	case <-t.C:
	}
}

// errStranded says a busy mount was detached but its FUSE connection
// could not be ended: its server runs until whoever holds a file open in
// it lets go, or this process exits.
var errStranded = errors.New("detached, but its FUSE connection could not be ended while a file is open in it")

// Grace periods of a busy mount's unmount: how long whoever holds a file
// open in a lazily detached mount has to let go before its connection is
// aborted, and how long the server's loops get to end after that.
const (
	holdersGrace = time.Second
	abortGrace   = 5 * time.Second
)

// FUSEServer serves mounts with FUSE. scratch is a private directory
// (the cache dir) where a busy mount's unmount may mount fusectl for a
// moment (see fs.Mount.Abort).
func FUSEServer(scratch string) ServeFunc {
	return func(m *dsfs.Mount, mountpoint string, log *slog.Logger) (Served, error) {
		if err := m.Serve(mountpoint); err != nil {
			return nil, err
		}
		return fuseMount{m: m, log: log, scratch: scratch}, nil
	}
}

// fuseMount is a mount served by FUSE.
type fuseMount struct {
	m       *dsfs.Mount
	log     *slog.Logger
	scratch string
}

func (f fuseMount) Mountpoint() string { return f.m.Mountpoint() }
func (f fuseMount) Attached() bool     { return stillFuse(f.m.Mountpoint()) }
func (f fuseMount) Wait()              { f.m.Server().Wait() }

// Unmount unmounts. A busy mount (a file open in it) is detached lazily
// instead, so that it leaves the namespace at once; whoever holds a file
// open in it gets a moment to let go, and then its FUSE connection is
// aborted, so that its reads fail rather than keep this daemon waiting.
// It returns errStranded if the connection could not be ended.
func (f fuseMount) Unmount() error {
	mp := f.m.Mountpoint()
	// The unmount itself first, to tell busy from other failures (go-fuse
	// reports a busy mount as its fallback's failure: fusermount's).
	err := syscall.Unmount(mp, 0)
	switch {
	case err == nil:
		f.Wait()
		return nil
	case !errors.Is(err, syscall.EBUSY):
		// Not root, say: go-fuse's way (fusermount).
		if err = f.m.Unmount(); err == nil {
			return nil
		}
	}
	if lerr := syscall.Unmount(mp, syscall.MNT_DETACH); lerr != nil {
		return fmt.Errorf("unmount %s: %w (detaching it: %v)", mp, err, lerr)
	}
	f.log.Warn("mount busy (a file open in it): detached it lazily; what still holds it open gets errors", "mountpoint", mp, "err", err)
	if f.waitServer(holdersGrace) {
		return nil
	}
	if aerr := f.m.Abort(f.scratch); aerr != nil {
		f.log.Warn("could not end the detached mount's FUSE connection; it ends when this process exits", "mountpoint", mp, "err", aerr)
		return errStranded
	}
	f.log.Info("ended the detached mount's FUSE connection", "mountpoint", mp)
	if f.waitServer(abortGrace) {
		return nil
	}
	return errStranded
}

// waitServer waits up to d for the mount's server to end.
func (f fuseMount) waitServer(d time.Duration) bool {
	done := make(chan struct{})
	go func() { f.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

func reportSkipped(log *slog.Logger, skipped []dsfs.SkippedKey) {
	for i, s := range skipped {
		if i == 20 {
			log.Warn("more keys skipped", "count", len(skipped)-20)
			break
		}
		log.Warn("key skipped: it can't be a file name", "key", s.Key, "reason", s.Reason)
	}
}
