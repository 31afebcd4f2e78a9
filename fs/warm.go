package fs

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
	"github.com/dsmount/dsmount/internal/control"
)

const (
	// warmWritesPerFetch bounds a warm's chunks fetched and not yet
	// written, per fetch slot.
	warmWritesPerFetch  = 4
	defaultWarmParallel = 64
	maxWarmParallel     = 1024
	// maxUserWarmParallel bounds the fetches in flight of another user's
	// warm on a shared mount (see Caller), which also runs at background
	// priority: it must not take the fetch slots the mount's reads and
	// prefetch need.
	maxUserWarmParallel = 16
	warmProgressEvery   = 250 * time.Millisecond
)

// resolve expands request paths (files or directories, relative to the
// root) into files, in the order given, each once. Directories expand in
// name order.
func (m *Mount) resolve(paths []string) (files []entry, notFound []string) {
	t := m.tree
	seen := make([]uint64, (t.fileCount()+63)/64) // a bit per file: a warm may name a million
	var add func(e entry)
	add = func(e entry) {
		if e.isDir() {
			t.each(e, func(_ string, c entry) { add(c) })
			return
		}
		if seen[e.idx/64]&(1<<(e.idx%64)) == 0 {
			seen[e.idx/64] |= 1 << (e.idx % 64)
			files = append(files, e)
		}
	}
	for _, p := range paths {
		if e, ok := t.lookup(p); ok {
			add(e)
		} else {
			notFound = append(notFound, p)
		}
	}
	return files, notFound
}

// warm fetches the chunks of the requested files into the cache, in the
// order given, with req.Parallel fetches in flight, until done, the cache
// is full (earlier paths win: nothing is evicted for later ones) or ctx is
// cancelled. Fetches share the cache's flights with reads.
func (m *Mount) warm(ctx context.Context, req control.Request, c Caller, emit func(control.Event)) {
	files, notFound := m.resolve(req.Paths)
	plan := control.WarmPlan{Files: len(files), NotFound: len(notFound), CacheFree: -1}
	if len(notFound) > 0 {
		plan.NotFoundList = notFound[:min(len(notFound), 5)]
	}
	cached := make([]int64, len(files))
	for i, f := range files {
		obj := m.tree.obj(f)
		n, err := m.src.CachedBytes(obj)
		if err != nil {
			emit(control.Event{Type: "error", Error: err.Error()})
			return
		}
		cached[i] = n
		plan.Bytes += obj.Size
		plan.BytesCached += n
		if n == obj.Size {
			plan.FilesCached++
		}
	}
	plan.Fits = true
	if capacity := m.cache.Capacity(); capacity > 0 {
		plan.CacheFree = max(capacity-m.cache.Used(), 0)
		plan.Fits = plan.Bytes-plan.BytesCached <= plan.CacheFree
	}
	emit(control.Event{Type: "plan", Plan: &plan})
	if req.Check {
		return
	}

	par := req.Parallel
	if par <= 0 {
		par = defaultWarmParallel
	}
	par = min(par, maxWarmParallel)
	prio := cache.Foreground
	if !c.Privileged {
		par, prio = min(par, maxUserWarmParallel), cache.Background
	}
	w := warmRun{m: m, prio: prio, prog: control.WarmProgress{Files: len(files), Bytes: plan.Bytes}, start: time.Now()}
	w.run(ctx, files, par, emit)
	final := w.snapshot()
	final.Interrupted = ctx.Err() != nil
	emit(control.Event{Type: "result", Warm: &final})
}

// warmRun holds one warm's counters; the fetch goroutines update them.
type warmRun struct {
	m     *Mount
	prio  cache.Priority
	start time.Time

	mu   sync.Mutex // guards prog's non-atomic fields
	prog control.WarmProgress

	filesDone, bytesDone, fetched, already, notCached, bytesFetched, errs atomic.Int64
	full                                                                  atomic.Bool
	// reserved is the bytes of warm fetches in flight: counted against the
	// capacity from when a fetch is issued until the cache counts its
	// bytes (as they arrive, before writing them), so a later path's
	// chunk can't take the room an earlier path's chunk, still in flight,
	// will need.
	reserved atomic.Int64
}

// fits reserves room for n more bytes if the cache has it.
func (w *warmRun) fits(n int64) bool {
	c := w.m.cache
	capacity := c.Capacity()
	if capacity == 0 {
		return true
	}
	if c.Used()+w.reserved.Load()+n > capacity {
		return false
	}
	w.reserved.Add(n)
	return true
}

func (w *warmRun) snapshot() control.WarmProgress {
	w.mu.Lock()
	p := w.prog
	w.mu.Unlock()
	p.FilesDone, p.BytesDone = w.filesDone.Load(), w.bytesDone.Load()
	p.ChunksFetched, p.ChunksAlreadyCached, p.ChunksNotCached = w.fetched.Load(), w.already.Load(), w.notCached.Load()
	p.BytesFetched, p.Errors = w.bytesFetched.Load(), w.errs.Load()
	p.CacheFull = w.full.Load()
	p.Seconds = time.Since(w.start).Seconds()
	return p
}

func (w *warmRun) fail(err error) {
	if w.errs.Add(1) == 1 {
		w.mu.Lock()
		w.prog.FirstError = err.Error()
		w.mu.Unlock()
	}
}

func (w *warmRun) run(ctx context.Context, files []entry, par int, emit func(control.Event)) {
	stopProgress := make(chan struct{})
	var progress sync.WaitGroup
	progress.Add(1)
	go func() {
		defer progress.Done()
		tick := time.NewTicker(warmProgressEvery)
		defer tick.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-tick.C:
				p := w.snapshot()
				emit(control.Event{Type: "progress", Warm: &p})
			}
		}
	}()
	defer func() { close(stopProgress); progress.Wait() }()

	src := w.m.src
	// sem bounds fetches in flight (--parallel): a slot is free once a
	// chunk's bytes have arrived, while they are written. Holding it for
	// the write too left the backend fewer GETs in flight than asked for.
	// outstanding bounds fetches and writes together, so chunks can't pile
	// up in memory behind a disk slower than the store.
	sem := make(chan struct{}, par)
	outstanding := make(chan struct{}, warmWritesPerFetch*par)
	var fetches sync.WaitGroup
	defer fetches.Wait()
	for _, f := range files {
		obj := w.m.tree.obj(f)
		n := src.NumChunks(obj)
		if n == 0 {
			w.filesDone.Add(1)
			continue
		}
		remaining := &atomic.Int64{}
		remaining.Store(int64(n))
		chunkDone := func() {
			if remaining.Add(-1) == 0 {
				w.filesDone.Add(1)
			}
		}
		for idx := range n {
			size := src.ChunkLen(obj, idx)
			if src.ChunkCached(obj, idx) {
				w.already.Add(1)
				w.bytesDone.Add(size)
				chunkDone()
				continue
			}
			select {
			case outstanding <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				<-outstanding
				return
			}
			release := func() { <-sem; <-outstanding }
			if ctx.Err() != nil {
				release()
				return
			}
			if w.full.Load() || !w.fits(size) {
				// Later chunks are counted as not cached, never fetched:
				// earlier paths keep the room.
				w.full.Store(true)
				w.notCached.Add(1)
				release()
				continue
			}
			fetches.Add(1)
			go func(obj backend.Object, idx int) {
				defer fetches.Done()
				// fetched runs once the cache counts the chunk against its
				// capacity (before writing it): the reservation goes then,
				// neither earlier (nobody would count the chunk for a
				// moment) nor once written (it would count twice).
				var fetchDone sync.Once
				fetched := func() { fetchDone.Do(func() { w.reserved.Add(-size); <-sem }) }
				defer func() { fetched(); <-outstanding }()
				w.warmChunk(ctx, obj, idx, fetched)
				chunkDone()
			}(obj, idx)
		}
	}
}

func (w *warmRun) warmChunk(ctx context.Context, obj backend.Object, idx int, fetched func()) {
	src := w.m.src
	size := src.ChunkLen(obj, idx)
	outcome, err := src.Warm(ctx, obj, idx, w.prio, fetched)
	switch {
	case errors.Is(err, cache.ErrFull):
		w.full.Store(true)
		return
	case ctx.Err() != nil:
		return
	case err != nil:
		w.fail(err)
		return
	}
	w.bytesDone.Add(size)
	switch outcome {
	case cache.WarmAlreadyCached:
		w.already.Add(1)
	case cache.WarmFetched:
		w.fetched.Add(1)
		w.bytesFetched.Add(size)
	case cache.WarmNotCached:
		w.notCached.Add(1)
		w.bytesFetched.Add(size)
	}
}
