package fs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/readahead"
	"github.com/dsmount/dsmount/readahead/stream"
)

// kernelTimeout is how long the kernel may trust entries and attributes.
// Objects don't change under a mount (a changed object is a new version that
// only a remount with a fresh listing shows), so an hour is safe.
const kernelTimeout = time.Hour

// Config describes one mount.
type Config struct {
	// Cache is the cache Source belongs to (chunk size, capacity for
	// warm plans); the daemon's is a *cache.Cache.
	Cache Cache
	// Source serves the objects' bytes; the daemon's is a *cache.Source.
	Source Source
	// Listing is what the tree is built from.
	Listing *backend.Listing
	// AllowOther lets users other than the mounter read the mount.
	AllowOther bool
	// Logger receives skipped keys and read errors. Default: discard.
	Logger *slog.Logger
	// Stats, if set, answers the control entry's "stats" request of a
	// caller: whatever it returns is sent as JSON. The daemon sets it to
	// report every mount (to a privileged caller; see Caller).
	Stats func(*Mount, Caller) any
	// Readahead, if set, receives the mount's declared orders and reads,
	// and prefetches for them; the daemon's is a *readahead.Mount (a nil
	// one counts as unset).
	Readahead Readahead
	// FastPath is how hot reads are served; "" means FastPathAuto.
	FastPath FastPath
	// Streams bounds the sequential readahead of large files; every mount
	// on one cache should share one, as they share its staging area. Nil:
	// the mount gets its own, with the default budgets. (A concrete type,
	// not an interface: fs only hands it to stream.NewDetector; it
	// is a budget, with no store or disk behind it.)
	Streams *stream.Budget
	// ReadLatency, if set, is told how long each read the mount serves
	// takes (node.Read); the daemon's is its per-mount histogram.
	ReadLatency ReadObserver
	// FsName is the source recorded in the mount table (mountinfo's
	// source field): the source as the user named it, so that mount(8)
	// finds an fstab line already mounted. "": the backend's ID.
	FsName string
}

// Mount is one mounted dsmount filesystem.
type Mount struct {
	dir        string
	cache      Cache
	src        Source
	statsHook  func(*Mount, Caller) any
	ra         Readahead // nil: none (see present)
	streams    *stream.Budget
	log        *slog.Logger
	tree       *tree
	server     *fuse.Server
	uid, gid   uint32
	allowOther bool
	fsName     string
	// dev is the mount's device number (st_dev of its root), which names
	// its FUSE connection under /sys/fs/fuse/connections; set by Serve.
	dev uint64
	// readaheadBound is the mount's kernel readahead in KiB once random
	// reads or declared ranges of a file bigger than the cache have
	// lowered it (random.go); 0 until then.
	readaheadBound atomic.Int32
	// ranges are the jobs' declared ranges of files, by file (ranges.go).
	ranges declaredRanges
	// fastPath holds the FastPath in force: decided in New (auto), demoted
	// to off in Serve if passthrough fails its probe, while the kernel may
	// already be opening files.
	fastPath atomic.Value
	sessions atomic.Uint64 // control sessions created, for their inode numbers

	tables tables // path tables of declarations by index (table.go)
	// known holds the files whose inodes the kernel holds (push.go);
	// pushed counts the files pushed into its page cache.
	known   known
	pushed  atomic.Int64
	push    pusher
	batched batchedReads
	// readsActive counts the READs being served: a batched READ pays
	// off only beside others (readbatch.go).
	readsActive atomic.Int64
	// requests are the control requests running (control.go).
	requests controlRequests // batched READs of small cached files (readbatch.go)

	sessMu     sync.Mutex
	sessionsOf map[uint32]int // control sessions open, by user
	refusals   atomic.Int64   // sessions refused, for rate-limiting their warnings

	reads, bytesRead, readErrors, lookups, getattrs, batchedReads atomic.Int64
	// readLatency is Config.ReadLatency; nil: reads are not timed.
	readLatency ReadObserver
	// opens counts the OPENs of files that reached the daemon: on a
	// no-open mount, the first alone (answered ENOSYS, after which the
	// kernel sends none). Not in MountStats; tests read it.
	opens atomic.Int64
}

// New builds the mount's tree from cfg without mounting it, so callers can
// report on the tree (Files, Skipped) before serving.
func New(cfg Config) *Mount {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := buildTree(cfg.Listing, time.Now(), ControlName)
	reqCtx, reqCancel := context.WithCancel(context.Background())
	m := &Mount{
		requests:   controlRequests{ctx: reqCtx, cancel: reqCancel},
		cache:      cfg.Cache,
		src:        cfg.Source,
		statsHook:  cfg.Stats,
		streams:    cfg.Streams,
		log:        log,
		tree:       t,
		allowOther: cfg.AllowOther,
		fsName:     cfg.FsName,
		sessionsOf: make(map[uint32]int),
		uid:        uint32(os.Getuid()),
		gid:        uint32(os.Getgid()),
	}
	m.readLatency = cfg.ReadLatency
	m.ra = readaheadOf(cfg.Readahead)
	if m.streams == nil {
		m.streams = stream.NewBudget(0, 0)
	}
	m.fastPath.Store(resolveFastPath(cfg.FastPath, cfg.Listing))
	return m
}

// FastPathMode is the fast path in force (after Serve, the probed one).
func (m *Mount) FastPathMode() FastPath { return m.fastPath.Load().(FastPath) }

func resolveFastPath(p FastPath, l *backend.Listing) FastPath {
	if p == "" || p == FastPathAuto {
		return chooseFastPath(l)
	}
	return p
}

// Files and Dirs count the tree's entries; Skipped lists the keys left out.
func (m *Mount) Files() int            { return m.tree.fileCount() }
func (m *Mount) Dirs() int             { return m.tree.dirCount() }
func (m *Mount) Skipped() []SkippedKey { return m.tree.skipped }
func (m *Mount) Server() *fuse.Server  { return m.server }
func (m *Mount) Mountpoint() string    { return m.dir }

// Serve mounts the tree at dir and serves it in the background until
// Unmount.
func (m *Mount) Serve(dir string) error {
	timeout := kernelTimeout
	opts := &gofs.Options{
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &timeout,
		UID:             m.uid,
		GID:             m.gid,
		MountOptions: fuse.MountOptions{
			FsName: cmp.Or(m.fsName, m.src.Backend().ID()),
			Name:   "dsmount",
			// A read-only superblock: the kernel then keeps a file's
			// attributes, access time included, valid across reads, where
			// a writable one marks it stale at each read the daemon
			// serves and so asks for it again at the next fstat. Control
			// sessions run over ioctls (control.go).
			Options:       []string{"ro"},
			AllowOther:    m.allowOther,
			DirectMount:   true, // as root, skip fusermount; falls back to it otherwise
			DisableXAttrs: true,
			MaxWrite:      1 << 20,
			MaxReadAhead:  1 << 20,
			MaxBackground: 64,
			// Replies are built from byte slices; splicing them costs a pipe
			// per reply and made no difference.
			DisableSplice: true,
			// Plain READDIR: a listing makes no inode per entry. With
			// READDIRPLUS the kernel keeps an inode for every entry
			// listed, and go-fuse a node for each, so a find or ls -l
			// over a large tree took more memory and time with it
			// (even READDIRPLUS_AUTO's). What plus saved, a LOOKUP at a
			// listed file's first open, is one round trip per file per
			// mount (the kernel then keeps the entry for kernelTimeout).
			DisableReadDirPlus: true,
			Logger:             slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
		},
	}
	root := m.newNode(m.tree.root())
	server, err := gofs.Mount(dir, root, opts)
	if err != nil {
		return fmt.Errorf("mount %s: %w", dir, err)
	}
	m.dir = dir
	m.server = server
	if m.FastPathMode() == FastPathPassthrough {
		if err := m.probePassthrough(m.cache.Dir()); err != nil {
			m.log.Warn("passthrough is not available here (it needs Linux >= 6.9 and CAP_SYS_ADMIN); serving hot reads through the page cache", "mountpoint", dir, "err", err)
			m.fastPath.Store(FastPathOff)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err == nil {
		m.dev = uint64(st.Dev)
	}
	if err := raiseReadahead(m.dev, readaheadKB); err != nil {
		m.log.Debug("could not raise the mount's kernel readahead", "err", err)
	}
	return nil
}

// readaheadKB is the kernel readahead set on each mount: the kernel's
// default, 128 KiB, splits large sequential reads into 128 KiB FUSE
// requests, each a round trip through the daemon (docs/performance.md).
const readaheadKB = 1024

// raiseReadahead sets (or lowers) the read_ahead_kb of the mount's backing device info
// (FUSE mounts get an anonymous device, named by st_dev).
func raiseReadahead(dev uint64, kb int) error {
	if dev == 0 {
		return errors.New("the mount's device is unknown")
	}
	path := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(dev), unix.Minor(dev))
	return os.WriteFile(path, []byte(strconv.Itoa(kb)), 0o644)
}

// Unmount unmounts the filesystem and, once it is gone, waits for the
// server to stop. A busy mount (a file or directory open in it) is left
// in place, served, and its error (EBUSY) returned at once: waiting for
// the server then would wait for whoever holds the file.
func (m *Mount) Unmount() error {
	if m.server == nil {
		return errors.New("not mounted")
	}
	return m.server.Unmount()
}

// readFailed counts a failed read and logs the first hundred, so a failing
// store doesn't flood the log.
func (m *Mount) readFailed(key string, off int64, err error) {
	if m.readErrors.Add(1) <= 100 {
		m.log.Warn("read failed", "key", key, "offset", off, "err", err)
	}
}

// StatsFor returns the mount's figures as c may see them, as the control
// protocol sends them: a caller who is not privileged sees only its own
// jobs.
func (m *Mount) StatsFor(c Caller) control.MountStats {
	s := m.Stats()
	if !c.Privileged {
		mine := []readahead.JobStats{}
		for _, j := range s.Jobs {
			if j.UID == c.UID {
				mine = append(mine, j)
			}
		}
		s.Jobs = mine
	}
	return s.Wire()
}

// Stats returns the mount's figures.
func (m *Mount) Stats() MountStats {
	s := MountStats{
		Mountpoint: m.dir, Source: m.src.Backend().ID(), Files: m.tree.fileCount(),
		Reads: m.reads.Load(), BytesRead: m.bytesRead.Load(), ReadErrors: m.readErrors.Load(), Lookups: m.lookups.Load(), Getattrs: m.getattrs.Load(), BatchedReads: m.batchedReads.Load(),
		FastPath:    string(m.FastPathMode()),
		SourceStats: m.src.Stats(),
		Jobs:        m.Jobs(),
	}
	if r, ok := m.src.Backend().(backend.StatsReporter); ok {
		s.Backend = r.RequestStats()
	}
	return s
}

// Jobs returns the mount's declared jobs (empty without readahead).
func (m *Mount) Jobs() []readahead.JobStats {
	if m.ra == nil {
		return []readahead.JobStats{}
	}
	return m.ra.Jobs()
}
