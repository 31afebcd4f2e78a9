package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dsmount/dsmount/cache"
	dsfs "github.com/dsmount/dsmount/fs"
	"github.com/dsmount/dsmount/readahead"
)

// socketName is the daemon's control socket inside the cache dir. Holding
// the cache lock makes a process the only one that may listen on it.
const socketName = "dsmount.sock"

// daemon is the one dsmount process of a cache dir: it owns the cache, the
// control socket through which more mounts join, every mount, and the
// metrics endpoint. Invariant: mounts holds exactly the mounts being served.
type daemon struct {
	cache   *cache.Cache
	ra      *readahead.Registry
	streams *readahead.Streams // every mount's large-file readahead: they share the cache's staging area
	opts    cacheFlags
	log     *slog.Logger
	ln      net.Listener
	metrics *http.Server

	// exitWhenEmpty: a daemon started by `mount` ends with its last mount.
	exitWhenEmpty bool
	done          chan struct{} // closed when the daemon should stop
	doneOnce      sync.Once

	mu      sync.Mutex
	mounts  map[string]*dsfs.Mount // by mountpoint
	pending map[string]bool        // mountpoints being mounted (see addMount)
	// gone holds, by mountpoint, a channel closed once the mount is
	// forgotten (watch). The kernel unmounts before the daemon hears of
	// it, so a request to mount the same place right after `dsmount
	// unmount` waits for that rather than being refused.
	gone    map[string]chan struct{}
	closing bool           // close has begun: no new mounts
	wg      sync.WaitGroup // socket server and mount watchers
}

// cacheFlags are the settings of the cache a daemon serves.
type cacheFlags struct {
	dir       string
	capacity  int64 // 0: default
	chunkSize int64
	policy    string

	jobTimeout       time.Duration
	prefetchParallel int
	prefetchLead     time.Duration
}

func startDaemon(cf cacheFlags, metricsAddr string, exitWhenEmpty bool, log *slog.Logger) (*daemon, error) {
	// The registry's policy goes into the cache, and the registry asks the
	// cache's fill: set once the cache is open (its goroutine runs before).
	var opened atomic.Pointer[cache.Cache]
	ra := readahead.New(readahead.Config{
		Logger: log, JobTimeout: cf.jobTimeout, Parallel: cf.prefetchParallel, Lead: cf.prefetchLead, PolicyInstalled: cf.policy == policyOrder,
		Capacity: func() (int64, int64) {
			if c := opened.Load(); c != nil {
				used := c.Used() // first: the capacity may wait for it
				return c.Capacity(), used
			}
			return 0, 0
		},
	})
	policy := ra.Policy()
	if cf.policy != policyOrder {
		policy, _ = cache.PolicyByName(cf.policy)
	}
	copts := cache.Options{Capacity: cf.capacity, ChunkSize: cf.chunkSize, Policy: policy, Logger: log}
	// Without --cache-size the capacity is what is cached plus most of
	// the free space, set once the cache has counted what it holds: room
	// is set below, before anything can start the count.
	var room int64
	if cf.capacity == 0 {
		copts.CapacityFromUsed = func(used int64) int64 { return used + room }
	}
	c, err := cache.Open(cf.dir, copts)
	if err != nil {
		ra.Close()
		return nil, err
	}
	opened.Store(c)
	if cf.capacity == 0 {
		free, err := freeSpace(cf.dir)
		if err != nil {
			ra.Close()
			c.Close()
			return nil, fmt.Errorf("--cache-size not given and the free space of %s is unknown: %w", cf.dir, err)
		}
		room = max(free-cache.KeepFree, 0) * 4 / 5
		// 0 would mean unlimited: a full disk must not. (Counting what
		// is cached only when the free space alone is too little.)
		if room < cf.chunkSize && c.Used()+room < cf.chunkSize {
			ra.Close()
			c.Close()
			return nil, fmt.Errorf("--cache-size not given and %s has %s free: free some space, pick another --cache-dir or give --cache-size: %w",
				cf.dir, humanBytes(free), cache.ErrNoSpace)
		}
	}
	d := &daemon{cache: c, ra: ra, streams: readahead.NewStreams(0, 0), opts: cf, log: log, exitWhenEmpty: exitWhenEmpty, done: make(chan struct{}), mounts: map[string]*dsfs.Mount{}, pending: map[string]bool{}, gone: map[string]chan struct{}{}}
	sock := filepath.Join(cf.dir, socketName)
	os.Remove(sock) // stale: whoever made it no longer holds the cache lock
	ln, err := listenPrivate(sock)
	if err != nil {
		ra.Close()
		c.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	d.ln = ln
	d.wg.Add(1)
	go d.serveSocket()
	if metricsAddr != "" {
		if err := d.serveMetrics(metricsAddr); err != nil {
			d.close()
			return nil, err
		}
	}
	return d, nil
}

// addMount lists the source, builds the tree and mounts it.
func (d *daemon) addMount(ctx context.Context, req mountRequest) (*dsfs.Mount, error) {
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
	b, err := openBackend(ctx, req.Source, req.backendFlags(), d.log)
	if err != nil {
		return nil, err
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
	m := dsfs.New(dsfs.Config{Cache: d.cache, Source: src, Listing: objs, AllowOther: req.AllowOther, Logger: d.log, Stats: d.stats, Readahead: ra, FastPath: fastPath, Streams: d.streams})
	reportSkipped(d.log, m.Skipped())
	// Listing a million keys leaves as much garbage as the tree holds
	// (the store's answers, decoded); give it back to the system now
	// rather than when the scavenger gets to it.
	debug.FreeOSMemory()
	if err := m.Serve(req.Mountpoint); err != nil {
		release()
		return nil, err
	}
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		if err := unmountWithRetry(m, d.log); err != nil {
			d.log.Warn("unmount failed", "mountpoint", req.Mountpoint, "err", err)
		}
		release()
		return nil, errors.New("the dsmount daemon is shutting down")
	}
	d.mounts[req.Mountpoint] = m
	d.gone[req.Mountpoint] = make(chan struct{})
	d.wg.Add(1)
	d.mu.Unlock()
	go d.watch(m, release)
	// The cache counts what it holds once a mount is up, not before.
	d.cache.StartIndexScan()
	used, capacity := d.cacheSize()
	d.log.Info("mounted", "source", b.ID(), "mountpoint", req.Mountpoint, "files", m.Files(), "dirs", m.Dirs(),
		"fast_path", m.FastPathMode(), "cache_dir", d.opts.dir, "cache_used", used, "cache_capacity", capacity, "chunk_size", d.cache.ChunkSize(), "daemon_pid", os.Getpid())
	return m, nil
}

// cacheSize is the cache's used bytes and capacity for a log line, or
// "counting" for both while the cache still counts what it holds.
func (d *daemon) cacheSize() (used, capacity any) {
	n, ok := d.cache.UsedIfCounted()
	if !ok {
		return "counting", "counting"
	}
	return n, d.cache.Capacity()
}

// watch forgets a mount once its server stops (unmounted from outside or
// by close), and ends the daemon with its last mount if asked to.
func (d *daemon) watch(m *dsfs.Mount, release func()) {
	defer d.wg.Done()
	m.Server().Wait()
	release()
	d.mu.Lock()
	delete(d.mounts, m.Mountpoint())
	gone := d.gone[m.Mountpoint()]
	delete(d.gone, m.Mountpoint())
	empty := len(d.mounts) == 0
	d.mu.Unlock()
	close(gone)
	d.log.Info("unmounted", "mountpoint", m.Mountpoint())
	if empty && d.exitWhenEmpty {
		d.stop()
	}
}

// waitUnmounted waits, up to unmountSettle, for the daemon to forget a
// mount of mountpoint that the kernel no longer has (unmounted from
// outside, its server still ending). A mount still in place is left for
// addMount to refuse.
func (d *daemon) waitUnmounted(ctx context.Context, mountpoint string) error {
	d.mu.Lock()
	gone := d.gone[mountpoint]
	d.mu.Unlock()
	if gone == nil || stillFuse(mountpoint) {
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

func (d *daemon) stop() { d.doneOnce.Do(func() { close(d.done) }) }

// close unmounts everything and releases the cache.
func (d *daemon) close() {
	d.stop()
	d.ln.Close()
	if d.metrics != nil {
		d.metrics.Close()
	}
	d.mu.Lock()
	d.closing = true
	mounts := make([]*dsfs.Mount, 0, len(d.mounts))
	for _, m := range d.mounts {
		mounts = append(mounts, m)
	}
	d.mu.Unlock()
	for _, m := range mounts {
		d.log.Info("unmounting", "mountpoint", m.Mountpoint())
		if err := unmountWithRetry(m, d.log); err != nil {
			d.log.Warn("unmount failed", "mountpoint", m.Mountpoint(), "err", err)
		}
	}
	d.wg.Wait()
	d.ra.Close()
	if err := d.cache.Close(); err != nil {
		d.log.Warn("closing cache", "err", err)
	}
}

// mountRequest is what `dsmount mount` sends a running daemon, one JSON line.
type mountRequest struct {
	Source      string `json:"source"`
	Mountpoint  string `json:"mountpoint"`
	S3Endpoint  string `json:"s3_endpoint,omitempty"`
	S3PathStyle bool   `json:"s3_path_style,omitempty"`
	Anonymous   bool   `json:"anonymous,omitempty"`
	Refresh     bool   `json:"refresh,omitempty"`
	AllowOther  bool   `json:"allow_other,omitempty"`
	FastPath    string `json:"fast_path,omitempty"`
	// Cache settings the user gave explicitly; they must match the daemon's.
	CacheSize int64  `json:"cache_size,omitempty"`
	ChunkSize int64  `json:"chunk_size,omitempty"`
	Policy    string `json:"policy,omitempty"`

	FollowExternalSymlinks bool `json:"follow_external_symlinks,omitempty"`
}

// decodeMountRequest reads one request line from the socket and checks
// what the daemon can check before it mounts: a source, an absolute
// mountpoint, no NUL in either, a known fast path, and sizes that aren't
// negative. Errors are one line.
func decodeMountRequest(line []byte) (mountRequest, error) {
	var r mountRequest
	if err := json.Unmarshal(line, &r); err != nil {
		return mountRequest{}, fmt.Errorf("malformed request: %w", err)
	}
	switch {
	case r.Source == "" || strings.ContainsRune(r.Source, 0):
		return mountRequest{}, fmt.Errorf("malformed request: source %q", r.Source)
	case !strings.Contains(r.Source, "://") && !filepath.IsAbs(r.Source):
		// The CLI sends local sources absolute (normaliseSource); a
		// relative one would resolve against the daemon's directory.
		return mountRequest{}, fmt.Errorf("malformed request: local source %q is not an absolute path", r.Source)
	case !filepath.IsAbs(r.Mountpoint) || strings.ContainsRune(r.Mountpoint, 0):
		return mountRequest{}, fmt.Errorf("malformed request: mountpoint %q is not an absolute path", r.Mountpoint)
	case r.CacheSize < 0 || r.ChunkSize < 0:
		return mountRequest{}, fmt.Errorf("malformed request: cache size %d, chunk size %d", r.CacheSize, r.ChunkSize)
	}
	if r.FastPath != "" {
		if _, err := dsfs.ParseFastPath(r.FastPath); err != nil {
			return mountRequest{}, fmt.Errorf("malformed request: %w", err)
		}
	}
	r.Mountpoint = filepath.Clean(r.Mountpoint)
	return r, nil
}

func (r mountRequest) backendFlags() mountFlags {
	return mountFlags{s3Endpoint: r.S3Endpoint, s3PathStyle: r.S3PathStyle, anonymous: r.Anonymous, followExternalSymlinks: r.FollowExternalSymlinks}
}

type mountReply struct {
	Error string `json:"error,omitempty"`
	Pid   int    `json:"pid"`
	Files int    `json:"files"`
	Dirs  int    `json:"dirs"`
}

func (d *daemon) serveSocket() {
	defer d.wg.Done()
	for {
		conn, err := d.ln.Accept()
		if err != nil {
			return // closed
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			defer conn.Close()
			d.handleConn(conn)
		}()
	}
}

func (d *daemon) handleConn(conn net.Conn) {
	reply := mountReply{Pid: os.Getpid()}
	peerErr := checkPeer(conn)
	var req mountRequest
	// Read even from a peer that is refused, so that it reads the refusal
	// rather than a broken pipe.
	line, err := readRequestLine(conn)
	if err != nil {
		// Nobody to answer: it said nothing in time, or hung up.
		d.log.Debug("daemon socket: no request", "err", err)
		return
	}
	if peerErr != nil {
		d.log.Warn("daemon socket: request refused", "err", peerErr)
		reply.Error = peerErr.Error()
		d.reply(conn, reply)
		return
	}
	if req, err = decodeMountRequest(line); err != nil {
		reply.Error = err.Error()
	} else if err := d.checkSettings(req); err != nil {
		reply.Error = err.Error()
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		m, err := d.addMount(ctx, req)
		cancel()
		if err != nil {
			reply.Error = err.Error()
		} else {
			reply.Files, reply.Dirs = m.Files(), m.Dirs()
		}
	}
	d.reply(conn, reply)
}

func (d *daemon) reply(conn net.Conn, reply mountReply) {
	conn.SetWriteDeadline(time.Now().Add(socketWriteTimeout))
	json.NewEncoder(conn).Encode(reply)
}

// checkSettings refuses a joining mount that asked for other cache settings:
// one daemon, one cache, one set of settings.
func (d *daemon) checkSettings(r mountRequest) error {
	if r.CacheSize != 0 && r.CacheSize != d.cache.Capacity() {
		return fmt.Errorf("the dsmount daemon (pid %d) serving %s has --cache-size %d; drop --cache-size or use another --cache-dir", os.Getpid(), d.opts.dir, d.cache.Capacity())
	}
	if r.ChunkSize != 0 && r.ChunkSize != d.cache.ChunkSize() {
		return fmt.Errorf("the dsmount daemon (pid %d) serving %s has --chunk-size %d; drop --chunk-size or use another --cache-dir", os.Getpid(), d.opts.dir, d.cache.ChunkSize())
	}
	if r.Policy != "" && r.Policy != d.opts.policy {
		return fmt.Errorf("the dsmount daemon (pid %d) serving %s has --cache-policy %s; drop --cache-policy or use another --cache-dir", os.Getpid(), d.opts.dir, d.opts.policy)
	}
	return nil
}

// joinDaemon asks the daemon of cacheDir, if one runs, to add the mount.
// ok is false when no daemon answers on the socket.
func joinDaemon(cacheDir string, req mountRequest) (reply mountReply, ok bool, err error) {
	conn, err := dialSocket(filepath.Join(cacheDir, socketName))
	if err != nil {
		return reply, false, nil
	}
	defer conn.Close()
	// The request goes only to a daemon of this user or root's: another
	// user's daemon on a dir it owns would be handed the mount and its
	// answer believed.
	uid, err := peerUID(conn)
	if err != nil {
		return reply, true, fmt.Errorf("the dsmount daemon of %s: %w", cacheDir, err)
	}
	if uid != 0 && uid != uint32(os.Geteuid()) {
		return reply, true, fmt.Errorf("the dsmount daemon of %s runs as another user (uid %d): not joining it; use a --cache-dir of your own", cacheDir, uid)
	}
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return reply, true, fmt.Errorf("talking to the dsmount daemon of %s: %w", cacheDir, err)
	}
	if err := json.NewDecoder(conn).Decode(&reply); err != nil {
		return reply, true, fmt.Errorf("talking to the dsmount daemon of %s: %w", cacheDir, err)
	}
	if reply.Error != "" {
		return reply, true, errors.New(reply.Error)
	}
	return reply, true, nil
}

// stats is the control entry's "stats" answer: the asking mount, every
// mount of the daemon, and the cache. A caller who is not privileged (a
// user other than the daemon's or root, on a mount with --allow-other)
// sees the mount it asks through alone, with its own jobs alone.
func (d *daemon) stats(asking *dsfs.Mount, c dsfs.Caller) any {
	mine := asking.StatsFor(c)
	all := []dsfs.MountStats{mine}
	if c.Privileged {
		all = d.mountStats()
		sort.Slice(all, func(i, j int) bool { return all[i].Mountpoint < all[j].Mountpoint })
	}
	return statsReport{DaemonPid: os.Getpid(), Mount: mine, Mounts: all, Cache: cacheReport(d.cache.Stats(), d.opts), PageCache: d.ra.PageCache()}
}

// metricsListenAddr is where --metrics-addr says to listen: ":PORT" is
// 127.0.0.1:PORT, never every interface by omission.
func metricsListenAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", usagef("--metrics-addr %q: want HOST:PORT or :PORT", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

func (d *daemon) serveMetrics(addr string) error {
	listen, err := metricsListenAddr(addr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("--metrics-addr: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(d))
	d.metrics = &http.Server{Handler: metricsHandler(reg), ReadHeaderTimeout: 10 * time.Second}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := d.metrics.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Warn("metrics server stopped", "err", err)
		}
	}()
	d.log.Info("serving metrics", "addr", "http://"+ln.Addr().String()+"/metrics")
	return nil
}

func (d *daemon) mountStats() []dsfs.MountStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	all := make([]dsfs.MountStats, 0, len(d.mounts))
	for _, m := range d.mounts {
		all = append(all, m.Stats())
	}
	return all
}
