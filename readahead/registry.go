package readahead

import (
	"context"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsmount/dsmount/cache"
)

// Defaults for Config's zero values.
const (
	DefaultJobTimeout  = 10 * time.Minute
	DefaultParallel    = 64
	DefaultWindowBytes = 1 << 30
	DefaultLead        = time.Second
	// MinWindow is the fewest items a job's window holds: enough for a few
	// loader workers before any rate is known.
	MinWindow = 32
)

// Config configures a Registry. The zero value of each field picks a
// default.
type Config struct {
	Logger *slog.Logger
	// JobTimeout: a job with no reads and no declarations for this long is
	// forgotten.
	JobTimeout time.Duration
	// Parallel bounds prefetch fetches in flight, all jobs together.
	Parallel int
	// WindowBytes bounds the bytes a job's window covers ahead of its
	// frontier.
	WindowBytes int64
	// Lead is the least reading time a job's window covers at its read
	// rate, so a store that pauses for less than that goes unnoticed.
	Lead time.Duration
	// Fallback decides eviction while no job is declared. Default
	// cache.NewFillAndHold().
	Fallback cache.Policy
	// Capacity reports the cache's capacity and use, for prefetch
	// admission; nil means unlimited. The daemon passes the cache's.
	Capacity func() (capacity, used int64)
	// Now is the clock; tests set it. Default time.Now.
	Now func() time.Time
	// NoPrefetch turns prefetching off, leaving tracking and the policy:
	// for measuring the policy alone.
	NoPrefetch bool
	// PolicyInstalled says the cache evicts with Policy(): prefetch then
	// skips what the policy would not keep. Under another policy it
	// prefetches regardless (a chunk the cache doesn't keep still reaches
	// its reader through the staging area).
	PolicyInstalled bool
	// NoPush turns off pushing declared jobs' cached files into the
	// kernel's page cache (push.go).
	NoPush bool
}

// Registry holds the declared jobs of every mount sharing one cache, runs
// their prefetching, and provides the order-aware Policy. Close stops its
// goroutines.
type Registry struct {
	cfg    Config
	policy *orderPolicy

	// mu guards mounts, every Mount's jobs and every job (but for a job's
	// identity fields that never change), pc, and the prefetch state that
	// prefetchState says it does. Nothing holding it calls into the cache.
	mu sync.RWMutex
	// mounts are the mounts that have jobs, each at least one: the
	// registry's jobs are theirs (allJobs).
	mounts map[*Mount]struct{}
	// gen counts declarations and removals; reads counts matched reads.
	// Both tell the policy when its ranking is stale.
	gen   atomic.Uint64
	reads atomic.Uint64
	// pc learns how long the kernel's page cache holds what the daemon
	// served (pagecache.go); under mu.
	pc pageCacheModel

	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	pf     prefetchState
}

// New starts a Registry: Prepare, then Start with cfg.Capacity.
func New(cfg Config) *Registry {
	r := Prepare(cfg)
	r.Start(cfg.Capacity)
	return r
}

// Prepare builds a Registry without starting it, so that its Policy can go
// into cache.Open before the cache exists whose capacity Start is given:
// the daemon's start-up is Prepare, cache.Open, Start. Nothing may be
// mounted or declared before Start; Close is safe either way.
func Prepare(cfg Config) *Registry {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.JobTimeout <= 0 {
		cfg.JobTimeout = DefaultJobTimeout
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = DefaultParallel
	}
	if cfg.WindowBytes <= 0 {
		cfg.WindowBytes = DefaultWindowBytes
	}
	if cfg.Lead <= 0 {
		cfg.Lead = DefaultLead
	}
	if cfg.Fallback == nil {
		cfg.Fallback = cache.NewFillAndHold()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Registry{cfg: cfg, mounts: make(map[*Mount]struct{}), wake: make(chan struct{}, 1)}
	r.policy = &orderPolicy{r: r, fallback: cfg.Fallback, resident: make(map[cache.ObjectID]struct{})}
	r.pf.inflight = make(map[cache.ObjectID]bool)
	r.pf.latency = 0.05
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

// Start sets how the registry learns the cache's capacity and use (nil:
// unlimited) and starts its scheduler. Call it once, after Prepare.
func (r *Registry) Start(capacity func() (capacity, used int64)) {
	r.cfg.Capacity = capacity
	r.wg.Add(1)
	go r.schedule()
}

// Policy is the order-aware eviction policy; give it to cache.Open.
func (r *Registry) Policy() cache.Policy { return r.policy }

// Close stops prefetching and waits for prefetches in flight.
func (r *Registry) Close() {
	r.cancel()
	r.wg.Wait()
}

func (r *Registry) kick() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// allJobs yields every job of every mount, with its mount; r.mu is held.
func (r *Registry) allJobs() iter.Seq2[*Mount, *job] {
	return func(yield func(*Mount, *job) bool) {
		for m := range r.mounts {
			for _, j := range m.jobs {
				if !yield(m, j) {
					return
				}
			}
		}
	}
}

// hasJobs reports whether any mount has a job; r.mu is held.
func (r *Registry) hasJobs() bool { return len(r.mounts) > 0 }
