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
		d.mu.Unlock()
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
	// release undoes the three in order: readahead stops asking for
	// prefetches, then the source's fetches in flight end, then the
	// backend they used closes.
	release := func() {
		ra.Close()
		src.Close()
		b.Close()
	}
	m := dsfs.New(dsfs.Config{Cache: d.cache, Source: src, Listing: objs, AllowOther: req.AllowOther, Logger: d.log, Stats: d.stats, Readahead: ra, FastPath: fastPath, Streams: d.streams, ReadLatency: readLatency})
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

// ServeFUSE mounts m at mountpoint with FUSE.
func ServeFUSE(m *dsfs.Mount, mountpoint string, log *slog.Logger) (Served, error) {
	if err := m.Serve(mountpoint); err != nil {
		return nil, err
	}
	return fuseMount{m, log}, nil
}

// fuseMount is a mount served by FUSE.
type fuseMount struct {
	m   *dsfs.Mount
	log *slog.Logger
}

func (f fuseMount) Mountpoint() string { return f.m.Mountpoint() }
func (f fuseMount) Attached() bool     { return stillFuse(f.m.Mountpoint()) }
func (f fuseMount) Wait()              { f.m.Server().Wait() }

// Unmount unmounts, falling back to a lazy detach if the mount is busy:
// the daemon is closing either way, and a dead daemon's mount only
// answers ENOTCONN.
func (f fuseMount) Unmount() error {
	err := f.m.Unmount()
	if err == nil {
		return nil
	}
	f.log.Warn("unmount failed; detaching lazily", "err", err)
	if lerr := syscall.Unmount(f.m.Mountpoint(), syscall.MNT_DETACH); lerr != nil {
		return fmt.Errorf("unmount %s: %w", f.m.Mountpoint(), err)
	}
	done := make(chan struct{})
	go func() { f.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	return nil
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
