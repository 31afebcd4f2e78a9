package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache/internal/flight"
	"github.com/dsmount/dsmount/cache/internal/record"
)

// fetchTimeout bounds one chunk fetch, whoever waits for it: a hung
// connection must not pin a flight forever.
const fetchTimeout = 2 * time.Minute

// Source serves the objects of one backend through the cache. Any number of
// Sources (mounts) may share one Cache.
//
// Invariant: once Close has returned, no flight started through this Source
// is running, so its backend may be closed.
type Source struct {
	c *Cache
	b backend.Backend
	// fetch reads b's objects and range objects (backend.RangeOf) alike:
	// a declared range of a big file is cached as an object of its own.
	fetch backend.Backend
	id    string
	stats counters // this source's share of hits and misses
	// blocks are the small random reads' recent blocks (randomblocks.go).
	blocks randomBlocks

	// ctx bounds this source's flights: Close cancels it, so an unmount
	// doesn't wait for prefetches queued behind other mounts' reads.
	ctx     context.Context
	cancel  context.CancelFunc
	mu      sync.Mutex // guards closed against flights.Add after Close
	closed  bool
	flights sync.WaitGroup // flights started through this source
}

// errSourceClosed ends a flight whose Source closed under it. A caller from
// another, open Source over the same store that joined that flight starts
// its own instead of failing.
var errSourceClosed = fmt.Errorf("%w: its mount is closing", ErrClosed)

// Source binds b to the cache. Entries are keyed by b.ID(), so two Sources
// over the same store share cached chunks.
func (c *Cache) Source(b backend.Backend) *Source {
	ctx, cancel := context.WithCancel(c.ctx)
	return &Source{c: c, b: b, fetch: backend.WithRanges(b), id: b.ID(), ctx: ctx, cancel: cancel}
}

// Close cancels the flights started through s (prefetches included), waits
// for them, and refuses new ones with ErrClosed: after it, s's backend is no
// longer used and may be closed. Callers from another Source over the same
// store that had joined one of those flights fetch again on their own.
func (s *Source) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.flights.Wait()
}

func (s *Source) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Source) startFlight() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.flights.Add(1)
	return true
}

// Backend is the backend this source reads from.
func (s *Source) Backend() backend.Backend { return s.b }

// ReadAt fills p with obj's bytes at off, from the cache where present and
// from the backend (caching them, if admitted) where not. Like io.ReaderAt it
// returns io.EOF with fewer bytes when obj ends before p is full. Backend
// errors keep their type (errors.Is(err, backend.ErrChanged), ...).
func (s *Source) ReadAt(ctx context.Context, obj backend.Object, p []byte, off int64) (int, error) {
	return s.readAt(ctx, obj, p, off, false)
}

// ReadAtStream is ReadAt for a reader going through obj in order (its
// caller saw a sequential stream): when the read has to wait for a chunk
// and ends before the chunk does, the rest of the chunk is staged for the
// reader's next reads rather than recycled. Read back from its cache
// file, written with O_DIRECT, the rest would come from the disk, queued
// behind the writes of the chunks fetched ahead.
func (s *Source) ReadAtStream(ctx context.Context, obj backend.Object, p []byte, off int64) (int, error) {
	return s.readAt(ctx, obj, p, off, true)
}

// clip checks a read of p at off of obj and cuts p at obj's end, with
// io.EOF to return once it is filled; done says there is nothing to read.
func clip(obj backend.Object, p []byte, off int64) (clipped []byte, eof error, done bool) {
	if off < 0 {
		return nil, fmt.Errorf("cache: negative offset %d", off), true
	}
	if off >= obj.Size {
		return nil, io.EOF, true
	}
	if rest := obj.Size - off; int64(len(p)) > rest {
		return p[:rest], io.EOF, false
	}
	return p, nil, false
}

func (s *Source) readAt(ctx context.Context, obj backend.Object, p []byte, off int64, stream bool) (int, error) {
	p, eof, done := clip(obj, p, off)
	if done {
		return 0, eof
	}
	meta := metaOf(s.id, obj, s.c.chunkSize)
	cs := s.c.chunkSize
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		idx := int(pos / cs)
		inner := pos - int64(idx)*cs
		want := int(min(int64(len(p)-n), meta.ChunkLen(idx)-inner))
		if err := s.copyChunk(ctx, meta, obj, idx, p[n:n+want], inner, stream); err != nil {
			return n, err
		}
		n += want
	}
	return n, eof
}

// The path of a read, by layer: copyChunk serves a read's part of one
// chunk (staging, then the cache disk, then a flight); flightRead and
// flightStored are the two ways to wait on a chunk's flight (for its
// bytes; until they are stored), both through flightWait, which joins the
// flight (flightJoin) again where another mount's unmount cancelled it;
// flightLoad is what the flight runs.

// copyChunk copies dst from chunk idx at offset inner: from the staging
// area, from the cache disk (checked), or through the chunk's flight.
// stream: see ReadAtStream.
func (s *Source) copyChunk(ctx context.Context, meta record.Meta, obj backend.Object, idx int, dst []byte, inner int64, stream bool) error {
	c := s.c
	o, err := c.object(meta)
	if err != nil {
		return err
	}
	// A chunk fetched ahead of its reader.
	if c.fetch.staged.take(chunkID{o.id, idx}, dst, inner) {
		c.stats.hit(len(dst))
		s.stats.hit(len(dst))
		return nil
	}
	// A cached chunk: the check blocks the read touches are read and
	// checked (check.go).
	if c.readChecked(o, idx, dst, inner) {
		c.stats.hit(len(dst))
		s.stats.hit(len(dst))
		c.touched(o)
		return nil
	}

	// A stream's other reads of this chunk may come before or after this
	// one, or be waiting on the same flight: what none of them took is
	// staged for the rest.
	res, release, err := s.flightRead(ctx, meta, obj, idx, stream)
	if err != nil {
		return err
	}
	release(copy(dst, res.data[inner:]))
	if res.fromBackend {
		c.stats.miss(len(dst))
		s.stats.miss(len(dst))
	} else {
		c.stats.hit(len(dst))
		s.stats.hit(len(dst))
		c.touched(o)
	}
	return nil
}

// flightRead returns the whole of chunk idx to a reader, through the
// chunk's flight (flightWait), with release to call with the bytes it
// took. keepRest says the reader will read the rest of the chunk: the
// flight then stages what its readers left untaken when done, instead of
// recycling its buffer.
func (s *Source) flightRead(ctx context.Context, meta record.Meta, obj backend.Object, idx int, keepRest bool) (res chunkResult, release func(took int), err error) {
	return s.flightWait(ctx, meta, obj, idx, Foreground, waitFor{keepRest: keepRest})
}

// flightStored waits on chunk idx's flight until the chunk has been
// offered to the cache (warm and prefetch want it there; a read only
// wants the bytes), calling fetched (if not nil) once, when the bytes
// have arrived and the cache has counted them against its capacity (or
// declined them), before they are written.
func (s *Source) flightStored(ctx context.Context, meta record.Meta, obj backend.Object, idx int, prio Priority, fetched func()) (chunkResult, error) {
	w := waitFor{stored: true}
	if fetched != nil {
		// Once: a flight cancelled by another mount's unmount is joined
		// again.
		var once sync.Once
		w.fetched = func() { once.Do(fetched) }
	}
	res, _, err := s.flightWait(ctx, meta, obj, idx, prio, w)
	return res, err
}

// waitFor says how long a caller of a flight waits: for the bytes (a
// read), or until they are stored too (warm, prefetch), being told when
// the bytes have arrived if fetched is set.
type waitFor struct {
	stored   bool
	fetched  func()
	keepRest bool // a reader's: see flightRead
	// arrived, if set, hears of the bytes as they come from the backend
	// (backend.WithProgress) when this caller's join starts the flight;
	// a caller that joins one already running hears nothing.
	arrived func(n int)
}

// flightWait waits on chunk idx's single flight as w says: at most one
// verification or backend fetch per chunk runs at a time, and every
// concurrent caller shares its result. The flight runs on the context of
// the source that started it, not the caller's, so a reader that gives up
// doesn't fail the others; the caller stops waiting when its ctx is done.
// A flight another mount's unmount cancelled is joined again once it has
// left the group.
//
// A reader (w.stored unset) gets release, to call with the bytes of
// res.data it took once it is done with them; others get a no-op.
func (s *Source) flightWait(ctx context.Context, meta record.Meta, obj backend.Object, idx int, prio Priority, w waitFor) (res chunkResult, release func(took int), err error) {
	if s.isClosed() {
		return chunkResult{}, nil, errSourceClosed
	}
	for {
		res, f, err := s.flightJoin(ctx, meta, obj, idx, prio, w)
		release := func(int) {}
		if !w.stored {
			release = f.Val.buf.Release
		}
		if err == nil {
			return res, release, nil
		}
		release(0)
		if err != errSourceClosed || s.isClosed() {
			return res, nil, err
		}
		// Another mount's flight, cancelled by its unmount: once it has
		// left the group, start our own.
		select {
		case <-f.Done():
		case <-ctx.Done():
			return chunkResult{}, nil, ctx.Err()
		}
	}
}

// chunkFlightOf is a chunk's flight as the group runs it.
type chunkFlightOf = flight.Flight[*chunkFlight]

// flightJoin joins (or starts) chunk idx's flight at prio and waits on it
// once, as w says.
func (s *Source) flightJoin(ctx context.Context, meta record.Meta, obj backend.Object, idx int, prio Priority, w waitFor) (chunkResult, *chunkFlightOf, error) {
	c := s.c
	reader := !w.stored
	var joined func(*chunkFlight)
	if reader {
		joined = func(f *chunkFlight) { f.buf.Join(w.keepRest) }
	}
	f, raised := c.fetch.flights.Join(chunkID{ObjectID(meta.ID()), idx}, prio == Foreground, joined, func(f *chunkFlightOf) {
		// The flight, not its callers, is what Close must wait for.
		if !s.startFlight() {
			f.Publish(errSourceClosed)
			return
		}
		defer s.flights.Done()
		if !c.startFetch() {
			f.Publish(ErrClosed)
			return
		}
		defer c.fetch.running.Done()
		s.flightLoad(meta, obj, idx, f, w.arrived)
	})
	if raised {
		c.fetch.gate.Kick()
	}
	c.stats.waiting.Add(1)
	defer c.stats.waiting.Add(-1)
	if w.fetched != nil {
		select {
		case <-f.Val.counted:
		case <-f.Done(): // failed, or ended without storing
		case <-ctx.Done():
			return chunkResult{}, f, ctx.Err()
		}
		w.fetched()
	}
	wait := f.Ready()
	if w.stored {
		wait = f.Done()
	}
	select {
	case <-wait:
		// Once stored, the buffer is recycled: only readers may touch it.
		return f.Val.result(reader), f, f.Err()
	case <-ctx.Done():
		return chunkResult{}, f, ctx.Err()
	}
}

// Settle waits until no chunk load is running: a read returns as soon as
// its bytes arrive, and they are stored after. Tests that count what is
// cached after a read call it.
func (c *Cache) Settle() {
	for f := c.fetch.flights.Any(); f != nil; f = c.fetch.flights.Any() {
		<-f.Done()
	}
}

// startFetch registers a flight with Close; false once the cache is closing.
func (c *Cache) startFetch() bool {
	c.table.mu.Lock()
	defer c.table.mu.Unlock()
	if c.table.closed {
		return false
	}
	c.fetch.running.Add(1)
	return true
}

// Prefetch starts fetching chunk idx of obj in the background unless it is
// cached or in flight, and returns at once. A read of the same chunk joins
// the same flight (and raises it to foreground).
func (s *Source) Prefetch(obj backend.Object, idx int) {
	s.PrefetchWatched(obj, idx, nil, nil)
}

// PrefetchWatched is Prefetch for a caller that keeps count of the bytes
// it has in flight (a readahead window over bytes still to arrive):
// arrived, if set, hears of the chunk's bytes as the backend receives them
// (see backend.WithProgress: possibly none, possibly more than the chunk
// when a read is retried), and ended, if set, is called once when the
// prefetch is over, however it ended (fetched, found cached, joined,
// failed, or refused because idx is out of range).
func (s *Source) PrefetchWatched(obj backend.Object, idx int, arrived func(n int), ended func()) {
	meta := metaOf(s.id, obj, s.c.chunkSize) // hashed once: this runs per chunk ahead
	if idx < 0 || idx >= meta.NumChunks() {
		if ended != nil {
			ended()
		}
		return
	}
	go func() {
		if ended != nil {
			defer ended()
		}
		_, _, err := s.flightWait(context.Background(), meta, obj, idx, Background, waitFor{stored: true, arrived: arrived})
		if err != nil && !errors.Is(err, ErrClosed) {
			s.c.log.Debug("cache: prefetch failed", "key", obj.Key, "chunk", idx, "err", err)
		}
	}()
}

// Fetch makes sure chunk idx of obj has been loaded, from the cache or the
// backend (through the flight a read would join), waiting until it has
// been offered to the cache. Whether the bytes are kept is the policy's
// call, as for a read. fetched, if not nil, is called once the bytes have
// arrived, before they are written (see Warm).
func (s *Source) Fetch(ctx context.Context, obj backend.Object, idx int, prio Priority, fetched func()) error {
	meta := metaOf(s.id, obj, s.c.chunkSize)
	if idx < 0 || idx >= meta.NumChunks() {
		return fmt.Errorf("cache: chunk %d out of range for %s", idx, obj.Key)
	}
	_, err := s.flightStored(ctx, meta, obj, idx, prio, fetched)
	return err
}

// ObjectID is the cache's identity of obj's version as read through s:
// what Policy calls name.
func (s *Source) ObjectID(obj backend.Object) ObjectID {
	meta := metaOf(s.id, obj, s.c.chunkSize)
	return ObjectID(meta.ID())
}

// RangeID is ObjectID(backend.RangeOf(parent, off, n)), without making
// the range's key.
func (s *Source) RangeID(parent backend.Object, off, n int64) ObjectID {
	var kb [192]byte
	return ObjectID(record.HashID(s.id, backend.AppendRangeKey(kb[:0], parent.Key, off, n), n, parent.Version, s.c.chunkSize))
}

// Cached reports whether every chunk of obj is cached.
func (s *Source) Cached(obj backend.Object) bool {
	n, err := s.CachedBytes(obj)
	return err == nil && n == obj.Size
}

// flightLoad runs inside the flight and publishes its result. It
// re-checks the cache first (another flight may have just stored the
// chunk), verifying a chunk loaded from the index before trusting it;
// otherwise it fetches from the backend, hands the bytes to the flight's
// waiters, and offers them to the cache.
func (s *Source) flightLoad(meta record.Meta, obj backend.Object, idx int, f *chunkFlightOf, arrived func(int)) {
	c := s.c
	o, err := c.object(meta)
	if err != nil {
		f.Publish(err)
		return
	}
	n := meta.ChunkLen(idx)
	off := int64(idx) * meta.ChunkSize
	if data, ok := c.readVerified(o, idx); ok {
		f.Val.buf.Set(data, false)
		f.Publish(nil)
		return
	}

	// The timeout bounds the fetch, not the wait for a slot: a prefetch
	// queued behind reads must not hand a joining read a spent deadline.
	if err := c.fetch.gate.Acquire(s.ctx, f); err != nil {
		f.Publish(s.flightErr(err))
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, fetchTimeout)
	defer cancel()
	if arrived != nil {
		ctx = backend.WithProgress(ctx, arrived)
	}
	// A prefetch that a reader catches up with becomes urgent: the
	// backend may then race a slow GET sooner (backend/s3's hedging).
	ctx = backend.WithUrgency(ctx, f.Foreground)
	buf := c.bufs.Get(int(n))
	// In flight until stored: tests and stats readers that wait for no
	// fetches in flight then see the chunk cached.
	c.stats.fetchesInFlight.Add(1)
	defer c.stats.fetchesInFlight.Add(-1)
	start := time.Now()
	got, err := s.fetch.ReadAt(ctx, obj, buf, off)
	c.log.Debug("cache: fetched", "key", obj.Key, "chunk", idx, "bytes", got, "took", time.Since(start), "foreground", f.Foreground(), "err", err)
	c.fetch.gate.Release()
	// Only a bare io.EOF is the backend's end-of-object signal; a wrapped
	// one is a failed read.
	if got == len(buf) && err == io.EOF {
		err = nil
	}
	if err == nil && got != len(buf) {
		err = io.EOF // a short read without an error breaks the contract: never cache a zero tail
	}
	if err != nil {
		c.bufs.Put(buf) // partly written, and nobody saw it
		if err == io.EOF {
			// The object is shorter than its listing said: it changed.
			err = backend.Wrap("read", obj.Key, backend.ErrChanged, fmt.Errorf("object ended at %d, listed size %d", off+int64(got), obj.Size))
		}
		f.Publish(s.flightErr(err))
		return
	}
	c.stats.bytesFetched.Add(int64(len(buf)))
	c.stats.chunksFetched.Add(1)
	// Fetched ahead: unless a reader joins meanwhile, the bytes wait for
	// theirs in the staging area once stored.
	f.Val.buf.Set(buf, !f.Foreground())
	f.Val.fromBackend = true
	// Waiters get the bytes now; the flight stays open until they are
	// stored, so nobody fetches them again meanwhile.
	f.Publish(nil)
	c.store(o, idx, buf, record.BlockSums(buf), f.Val.markCounted)
}

// flightErr is err, unless the flight failed because s closed while the
// cache did not: then errSourceClosed, so other sources' callers retry.
func (s *Source) flightErr(err error) error {
	if s.ctx.Err() != nil && s.c.ctx.Err() == nil {
		return errSourceClosed
	}
	return err
}
