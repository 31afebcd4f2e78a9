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

	"github.com/dsmount/dsmount/cache/internal/bufs"
	"github.com/dsmount/dsmount/cache/internal/flight"
	"github.com/dsmount/dsmount/cache/internal/index"
	"github.com/dsmount/dsmount/cache/internal/store"
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
	dir       string
	chunkSize int64
	policy    Policy
	log       *slog.Logger
	// ctx bounds every backend fetch and background goroutine; cancelled
	// by Close.
	ctx    context.Context
	cancel context.CancelFunc
	// maintenance counts background goroutines (the start-up scan, the
	// value-log GC).
	maintenance sync.WaitGroup

	disk   disk
	budget budget
	table  objectTable
	scan   startupScan
	fetch  fetching
	bufs   *bufs.Pool
	warn   warnings
	stats  counters
}

// disk is what the cache keeps on disk, and the goroutines that write it.
type disk struct {
	lock    *os.File // flock on <dir>/dsmount.lock
	index   *index.DB
	packs   *store.PackStore
	space   *store.SpaceGuard
	commits *committer
	dropper *dropper // drops chunks whose sync failed
}

// budget is the capacity and what counts against it.
//
// Invariant: used equals the sum of the lengths of the chunks marked
// present in memory, pending or durable, once the start-up scan is done.
type budget struct {
	capacity atomic.Int64
	// capFunc is Options.CapacityFromUsed: the scan sets capacity by it.
	capFunc func(used int64) int64
	mu      sync.Mutex   // serialises reservations (reserve)
	used    atomic.Int64 // bytes of present chunks, pending or durable
}

// objectTable is the objects in memory.
type objectTable struct {
	mu      sync.Mutex // guards objects, forgotten, pruned and closed
	objects map[ObjectID]*object
	// forgotten holds evicted objects whose index records may not be
	// deleted yet, by ID: their records are not to be believed
	// (records.go). pruned counts removals from it.
	forgotten map[ObjectID]*object
	pruned    uint64
	closed    bool
}

// startupScan is the background count of the object records (records.go).
type startupScan struct {
	// ready is closed when the scan is done: used is complete from then
	// on. snap is the index as Open found it, which the scan reads; once
	// starts the scan (or, at Close, drops snap if it never started).
	ready chan struct{}
	snap  *index.Snapshot
	once  sync.Once
	// recorded holds the IDs of the records the scan found; set before
	// ready is closed, nil if the scan was cut short (idfilter.go).
	recorded *idFilter
}

// fetching is what loads chunks: the flights, the gate bounding backend
// fetches, and the staging area where chunks fetched ahead wait.
type fetching struct {
	running sync.WaitGroup // flights running; Close waits for them
	flights *flight.Group[chunkID, *chunkFlight]
	gate    *flight.Gate
	staged  staging
}

// warnings keep a failing disk, or a cache file tampered with, from
// writing a warning per chunk.
type warnings struct {
	write, read, sync, doubleRelease rateLimitedLog
}

// ErrNotPrivate is returned by Open for a cache directory that another
// user owns or may write to.
var ErrNotPrivate = store.ErrNotPrivate

// ErrNoSpace is returned by Open when the cache's filesystem hasn't the
// room for the cache to start.
var ErrNoSpace = store.ErrNoSpace

// ErrClosed is returned for reads started after Close.
var ErrClosed = store.ErrClosed

// KeepFree is the free space, in bytes, below which the cache stops taking
// new data: what an index write may need. A capacity chosen from the free
// space must leave it.
const KeepFree = index.FlushRoom

const (
	// reserveSize is what the index needs for a write and a while of
	// compaction after the cache stops taking data: twice the room a
	// write needs.
	reserveSize = 2 * index.FlushRoom
	// spaceCheckEvery paces the free-space check.
	spaceCheckEvery = 500 * time.Millisecond
	// valueLogGCInterval paces the index's value-log garbage collection.
	valueLogGCInterval = 10 * time.Minute
)

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
	if opts.FetchSlots <= 0 {
		opts.FetchSlots = DefaultFetchSlots
	}
	if opts.spaceCheckEvery == 0 {
		opts.spaceCheckEvery = spaceCheckEvery
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create cache dir: %w", err)
	}
	if err := store.CheckPrivate(dir); err != nil {
		return nil, err
	}
	c := &Cache{dir: dir, chunkSize: opts.ChunkSize, policy: opts.Policy, log: opts.Logger}
	if err := c.openDisk(opts); err != nil {
		c.disk.close()
		if errors.Is(err, syscall.ENOSPC) {
			err = fmt.Errorf("%s: %w: %v", dir, ErrNoSpace, err)
		}
		return nil, err
	}
	c.budget.capacity.Store(opts.Capacity)
	c.budget.capFunc = opts.CapacityFromUsed
	c.table.objects = make(map[ObjectID]*object)
	c.table.forgotten = make(map[ObjectID]*object)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.bufs = bufs.NewPool(opts.ChunkSize, func() {
		c.warn.doubleRelease.warn(c.log, "cache: a chunk buffer was given back twice (a bug); refused, so it can't reach two holders")
	})
	c.fetch.gate = flight.NewGate(opts.FetchSlots, min(16, opts.FetchSlots/4))
	c.fetch.flights = flight.NewGroup(flight.NewWorkers(workerIdle), c.newChunkFlight, func(_ chunkID, f *chunkFlight) { f.buf.End() })
	c.fetch.staged.free = c.bufs.Put
	c.fetch.staged.pushedOut = &c.stats.stagedPushedOut
	// The snapshot the start-up scan reads, taken before anything writes.
	c.scan.ready = make(chan struct{})
	c.scan.snap = c.disk.index.Snapshot()
	c.disk.index.Prepare()
	c.disk.dropper = startDropper(c)
	c.disk.commits = startCommitter(c.disk.index, filepath.Join(c.dir, "data"), c.disk.packs, c.log, c.disk.dropper.failed, c.recordsDeleted)
	c.maintenance.Add(1)
	go func() {
		defer c.maintenance.Done()
		c.disk.index.RunValueLogGC(c.ctx, valueLogGCInterval, c.disk.space.IsFull)
	}()
	return c, nil
}

// openDisk takes the directory lock and opens what the cache keeps on
// disk, making its directories if need be. What it opened before failing
// is closed by disk.close.
func (c *Cache) openDisk(opts Options) error {
	d := &c.disk
	var err error
	if d.lock, err = lockDir(c.dir); err != nil {
		return err
	}
	if d.space, err = store.StartSpaceGuard(c.dir, reserveSize, opts.spaceCheckEvery, c.log); err != nil {
		return err
	}
	// data/ before data/xx/: a link at data would take them elsewhere.
	subs := []string{"data", "packs", "index"}
	for i := range 256 {
		subs = append(subs, filepath.Join("data", fmt.Sprintf("%02x", i)))
	}
	for _, sub := range subs {
		p := filepath.Join(c.dir, sub)
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create cache dir: %w", err)
		}
		if err := store.CheckPrivateSub(p); err != nil {
			return err
		}
	}
	if d.packs, err = store.OpenPackStore(filepath.Join(c.dir, "packs"), c.log, c.stats.fetchesInFlight.Load); err != nil {
		return err
	}
	d.index, err = index.Open(filepath.Join(c.dir, "index"), c.dir, c.log, d.space.NoSpace)
	return err
}

// close closes what openDisk opened, when Open fails.
func (d *disk) close() {
	if d.index != nil {
		d.index.Close()
	}
	if d.packs != nil {
		d.packs.Close()
	}
	d.space.Close()
	if d.lock != nil {
		d.lock.Close()
	}
}

// lockDir takes an exclusive, non-blocking flock on dir/dsmount.lock and
// writes our pid into it so the error can name the holder.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "dsmount.lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open cache lock: %w", store.LinkErr(err))
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

// Close waits for fetches in flight, makes pending chunks durable, and
// releases the index and the directory lock.
func (c *Cache) Close() error {
	c.table.mu.Lock()
	c.table.closed = true
	c.table.mu.Unlock()
	c.cancel()
	c.scan.once.Do(func() {
		c.scan.snap.Discard()
		close(c.scan.ready)
	})
	c.fetch.running.Wait()
	c.fetch.flights.Close()
	c.maintenance.Wait()
	c.disk.commits.close()
	c.disk.dropper.close()
	c.disk.packs.Close()
	c.disk.space.Close()
	// With no room left, the index is left unclosed rather than crash (see
	// index.DB.Close): this process can't open the cache again, and the
	// daemon exits after Close.
	closed, err := c.disk.index.Close()
	if !closed {
		c.log.Warn("cache: the cache filesystem is full; the index is left for its log to be replayed at the next start", "dir", c.dir)
	}
	c.disk.lock.Close()
	c.fetch.staged.drain()
	if !c.bufs.Close() {
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
	if c.budget.capFunc != nil {
		c.awaitIndex()
	}
	return c.budget.capacity.Load()
}

// SetCapacity changes the capacity (0: unlimited). Lowering it evicts
// nothing at once; new data is admitted only as the policy makes room.
func (c *Cache) SetCapacity(n int64) {
	if c.budget.capFunc != nil {
		c.awaitIndex() // after the capacity the count sets, not before
	}
	c.budget.capacity.Store(max(n, 0))
}

// Used is the number of bytes of cached chunks. Just after Open it waits
// for the records to be counted (StartIndexScan).
func (c *Cache) Used() int64 {
	c.awaitIndex()
	return c.budget.used.Load()
}

// UsedIfCounted is Used without the wait: false while the records are
// still being counted.
func (c *Cache) UsedIfCounted() (int64, bool) {
	select {
	case <-c.scan.ready:
		return c.budget.used.Load(), true
	default:
		return 0, false
	}
}
