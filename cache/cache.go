package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"golang.org/x/sys/unix"
)

// ErrInUse is returned by Open when another process holds the cache dir.
var ErrInUse = errors.New("cache directory is in use by another dsmount process")

// DefaultChunkSize is the chunk size used when Options.ChunkSize is zero.
const DefaultChunkSize = 4 << 20

// Options configure a Cache. The zero value of each field picks a default.
type Options struct {
	// Capacity is the most bytes of chunk data kept on disk; 0 means
	// unlimited.
	Capacity int64
	// ChunkSize is the unit of fetching and caching; objects are split into
	// chunks of this size, the last one shorter. Default DefaultChunkSize.
	ChunkSize int64
	// Policy chooses what to keep when the cache is full. Default
	// NewFillAndHold().
	Policy Policy
	// Logger receives warnings and debug events. Default: discard.
	Logger *slog.Logger
	// FetchSlots bounds backend fetches in flight across all sources;
	// default DefaultFetchSlots. A quarter, at most 16, is kept for
	// foreground fetches (reads that missed, warm): background prefetch
	// never takes those.
	FetchSlots int

	// CapacityFromUsed, if set, makes the capacity what it returns for
	// the bytes already cached, once the start-up scan has counted them
	// (StartIndexScan); Capacity waits for that. Capacity is then unused.
	CapacityFromUsed func(used int64) int64

	// spaceCheckEvery paces the free-space check (tests slow it down).
	spaceCheckEvery time.Duration
}

// workerIdle is how long a flight worker waits for the next flight before
// exiting: long enough to span the gaps between a loader's bursts.
const workerIdle = time.Minute

// DefaultFetchSlots is the default of Options.FetchSlots: the S3 backend's
// default connection pool.
const DefaultFetchSlots = 128

// Cache is a persistent chunk cache shared by any number of sources
// (mounts) in one process. See the package doc for layout and invariants.
type Cache struct {
	dir      string
	capacity atomic.Int64
	// capFunc is Options.CapacityFromUsed: the scan sets capacity by it.
	capFunc   func(used int64) int64
	chunkSize int64
	policy    Policy
	log       *slog.Logger
	lockFile  *os.File
	db        *badger.DB
	commits   *committer
	dropper   *dropper // drops chunks whose sync failed
	packs     *packStore
	space     *spaceGuard
	// writeWarn and readWarn keep a failing disk, or a cache file
	// tampered with, from writing a warning per chunk.
	writeWarn, readWarn, syncWarn rateLimitedLog

	// ctx bounds every backend fetch; cancelled by Close.
	ctx     context.Context
	cancel  context.CancelFunc
	fetches sync.WaitGroup
	// maintenance counts background goroutines (value-log GC).
	maintenance sync.WaitGroup
	flights     flightGroup
	bufs        *bufPool
	staged      staging
	gate        *fetchGate

	mu      sync.Mutex // guards objects, forgotten, pruned and closed
	objects map[ObjectID]*object
	// forgotten holds evicted objects whose index records may not be
	// deleted yet, by ID: their records are not to be believed
	// (records.go). pruned counts removals from it.
	forgotten map[ObjectID]*object
	pruned    uint64
	closed    bool
	// ready is closed when the start-up scan of the object records is
	// done (records.go): used is complete from then on. snap is the
	// index as Open found it, which the scan reads; scanOnce starts the
	// scan (or, at Close, drops snap if it never started).
	ready    chan struct{}
	snap     *badger.Txn
	scanOnce sync.Once
	// recorded holds the IDs of the records the scan found; set before
	// ready is closed, nil if the scan was cut short (idfilter.go).
	recorded *idFilter

	spaceMu sync.Mutex   // serialises reservations (reserve)
	used    atomic.Int64 // bytes of present chunks, pending or durable

	stats counters
}

// Open opens (creating if needed) the cache in dir, taking an exclusive lock
// on it. A second Open of the same dir, from this or another process, fails
// with ErrInUse.
func Open(dir string, opts Options) (*Cache, error) {
	if opts.ChunkSize == 0 {
		opts.ChunkSize = DefaultChunkSize
	}
	if opts.ChunkSize < 4096 || opts.ChunkSize > 1<<30 {
		return nil, fmt.Errorf("chunk size %d out of range [4 KiB, 1 GiB]", opts.ChunkSize)
	}
	if opts.Capacity < 0 {
		return nil, fmt.Errorf("negative capacity %d", opts.Capacity)
	}
	if opts.Policy == nil {
		opts.Policy = NewFillAndHold()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create cache dir: %w", err)
	}
	if err := checkPrivate(dir); err != nil {
		return nil, err
	}
	lf, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	if opts.spaceCheckEvery == 0 {
		opts.spaceCheckEvery = spaceCheckEvery
	}
	space, err := startSpaceGuard(dir, reserveSize, opts.spaceCheckEvery, opts.Logger)
	if err != nil {
		lf.Close()
		return nil, err
	}
	c := &Cache{
		dir:       dir,
		chunkSize: opts.ChunkSize,
		policy:    opts.Policy,
		log:       opts.Logger,
		lockFile:  lf,
		space:     space,
		objects:   make(map[ObjectID]*object),
		forgotten: make(map[ObjectID]*object),
		ready:     make(chan struct{}),
	}
	c.capacity.Store(opts.Capacity)
	c.capFunc = opts.CapacityFromUsed
	if opts.FetchSlots <= 0 {
		opts.FetchSlots = DefaultFetchSlots
	}
	c.gate = newFetchGate(opts.FetchSlots, min(16, opts.FetchSlots/4))
	c.flights.workers = newWorkers(workerIdle)
	c.bufs = newBufPool(opts.ChunkSize, opts.Logger)
	c.flights.free = c.bufs.put
	c.flights.stage = c.staged.put
	c.staged.free = c.bufs.put
	c.staged.pushedOut = &c.stats.stagedPushedOut
	if err := c.open(); err != nil {
		if c.db != nil {
			c.db.Close()
		}
		if c.packs != nil {
			c.packs.close()
		}
		space.close()
		lf.Close()
		if errors.Is(err, syscall.ENOSPC) {
			err = fmt.Errorf("%s: %w: %v", dir, ErrNoSpace, err)
		}
		return nil, err
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	// The snapshot the start-up scan reads, taken before anything writes.
	c.snap = c.db.NewTransaction(false)
	index := &indexFiles{dir: filepath.Join(c.dir, "index"), space: c.space, done: map[string]int64{}}
	index.prepare()
	c.dropper = startDropper(c)
	c.commits = startCommitter(c.db, filepath.Join(c.dir, "data"), c.packs, index, c.log, c.dropper.failed, c.recordsDeleted)
	c.maintenance.Add(1)
	go c.runValueLogGC()
	return c, nil
}

// memTableSize is the index's memtable size (see open).
const memTableSize = 8 << 20

func (c *Cache) open() error {
	// data/ before data/xx/: a link at data would take them elsewhere.
	subs := []string{"data", "packs", "index"}
	for i := range 256 {
		subs = append(subs, filepath.Join("data", fmt.Sprintf("%02x", i)))
	}
	for _, sub := range subs {
		d := filepath.Join(c.dir, sub)
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create cache dir: %w", err)
		}
		if err := checkPrivateSub(d); err != nil {
			return err
		}
	}
	packs, err := openPackStore(filepath.Join(c.dir, "packs"), c.log, c.stats.fetchesInFlight.Load)
	if err != nil {
		return err
	}
	c.packs = packs
	bopts := badger.DefaultOptions(filepath.Join(c.dir, "index")).
		// Badger logs each memtable in a file of twice its size, which
		// indexFiles allocates on disk. 8 MiB holds the records of some
		// 50,000 cached files, and is the least that takes a 1 MiB value
		// (a listing page) in one batch.
		WithMemTableSize(memTableSize).
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(4).
		WithCompression(options.None).
		WithBlockCacheSize(0).
		WithIndexCacheSize(32 << 20).
		// The value log holds only listing pages of 1 MiB or more; badger
		// maps twice this size, and indexFiles allocates it all on disk.
		WithValueLogFileSize(4 << 20).
		WithLogger(badgerLogger{c.log})
	db, err := badger.Open(bopts)
	if err != nil {
		return fmt.Errorf("open cache index: %w", err)
	}
	c.db = db
	return c.checkFormat()
}

// lockDir takes an exclusive, non-blocking flock on dir/dsmount.lock and
// writes our pid into it so the error can name the holder.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "dsmount.lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open cache lock: %w", linkErr(err))
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if pid := strings.TrimSpace(string(b[:n])); pid != "" {
				return nil, fmt.Errorf("%s: %w (pid %s)", dir, ErrInUse, pid)
			}
			return nil, fmt.Errorf("%s: %w", dir, ErrInUse)
		}
		return nil, fmt.Errorf("lock cache dir: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

func (c *Cache) checkFormat() error {
	return c.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(keyFormat))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return txn.Set([]byte(keyFormat), []byte(formatVersion))
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if string(v) != formatVersion {
				return fmt.Errorf("cache dir %s has format %q, this dsmount uses %q: remove it or pick another --cache-dir", c.dir, v, formatVersion)
			}
			return nil
		})
	})
}

// Close waits for fetches in flight, makes pending chunks durable, and
// releases the index and the directory lock.
func (c *Cache) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.scanOnce.Do(func() {
		c.snap.Discard()
		close(c.ready)
	})
	c.fetches.Wait()
	c.flights.workers.close()
	c.maintenance.Wait()
	c.commits.close()
	c.dropper.close()
	c.packs.close()
	c.space.close()
	// Closing the index flushes its memtable into a new table, which with
	// no room left would fault (see indexFiles). Everything it was given is
	// in its log already, which it replays at the next start: with no room,
	// leave it unclosed rather than crash. Its goroutines and maps stay
	// until the process exits, and its directory lock with them: this
	// process can't open the cache again (the daemon exits after Close).
	var err error
	if c.commits.index.prepare() {
		err = c.db.Close()
	} else {
		c.log.Warn("cache: the cache filesystem is full; the index is left for its log to be replayed at the next start", "dir", c.dir)
	}
	c.lockFile.Close()
	c.staged.drain()
	if !c.bufs.close() {
		c.log.Debug("cache: chunk buffers still held at close; their memory stays mapped")
	}
	return err
}

// Dir is the cache directory.
func (c *Cache) Dir() string { return c.dir }

// ChunkSize is the cache's chunk size.
func (c *Cache) ChunkSize() int64 { return c.chunkSize }

// Capacity is the configured capacity in bytes (0: unlimited). Under
// Options.CapacityFromUsed it waits for the start-up count.
func (c *Cache) Capacity() int64 {
	if c.capFunc != nil {
		c.awaitIndex()
	}
	return c.capacity.Load()
}

// SetCapacity changes the capacity (0: unlimited). Lowering it evicts
// nothing at once; new data is admitted only as the policy makes room.
func (c *Cache) SetCapacity(n int64) {
	if c.capFunc != nil {
		c.awaitIndex() // after the capacity the count sets, not before
	}
	c.capacity.Store(max(n, 0))
}

// Used is the number of bytes of cached chunks. Just after Open it waits
// for the records to be counted (StartIndexScan).
func (c *Cache) Used() int64 {
	c.awaitIndex()
	return c.used.Load()
}

// UsedIfCounted is Used without the wait: false while the records are
// still being counted.
func (c *Cache) UsedIfCounted() (int64, bool) {
	select {
	case <-c.ready:
		return c.used.Load(), true
	default:
		return 0, false
	}
}

type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) {
	b.l.Error("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}
func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}
func (b badgerLogger) Infof(string, ...any)  {}
func (b badgerLogger) Debugf(string, ...any) {}
