package stream

import "sync"

const (
	// seqSlack is how far a read may land from where the last one ended and
	// still count as sequential: the kernel issues readahead READs
	// concurrently, so they arrive a little out of order.
	seqSlack = 4 << 20
	// seqMinRun is how many sequential reads establish a stream (one, at
	// offset 0).
	seqMinRun = 2
	// randomMinJumps is how many reads in a row, each landing away from
	// where the one before ended, make a file's reading random.
	randomMinJumps = 2
)

// The sequential window is measured in bytes still to arrive, not in
// chunks. A window of N chunks past the reader tops up only when the
// reader moves on, so its chunks start together, share the store's
// bandwidth evenly, arrive together, and the next wave's GETs then spend
// their latency with the store idle, however many chunks the window
// holds. Counting the bytes still to arrive, and starting the next chunk
// as soon as the ones in flight have delivered enough, keeps GETs
// starting while others are still delivering (test/models/ddwindow.py
// models both).
const (
	// WindowBytes bounds the bytes a stream has asked for and not yet
	// received: about 80 ms of a 400 MB/s store, four times its latency.
	WindowBytes = 32 << 20
	// AheadBytes bounds how far past the chunk being read a stream fetches,
	// arrived or not: every chunk fetched ahead holds a buffer until it is
	// read, and a daemon's fresh buffers are paid for in page faults.
	AheadBytes = 64 << 20
)

// Fetcher starts fetching chunk idx in the background and returns at once.
// It tells arrived of the chunk's bytes as they come in (possibly never,
// possibly more than the chunk's length when a read is retried) and calls
// ended exactly once when the fetch is over, however it ended: possibly
// before the Fetcher returns.
// cache.Source.PrefetchWatched, bound to one object, is one.
type Fetcher func(idx int, arrived func(n int), ended func())

// Detector detects sequential reading of one file and fetches ahead of
// it: once a stream is established it keeps chunks past the one being
// read fetched or in flight, at most WindowBytes of them still to arrive
// and at most AheadBytes past the reader, or its share of a Budget
// when it has one (as of its last read). The window is topped up both on
// reads and as fetched bytes arrive. It is safe for concurrent use.
//
// The bounds are soft in four ways: the chunk right after the reader's
// always goes (a chunk bigger than the window is still fetched); fetches
// of an earlier stream of the same file still count until they end (a
// jump shrinks the new stream's window for a while rather than letting
// both run at full width); the bytes of a body cut off count as arrived
// while the backend fetches them again; and chunks asked for while the
// stream's share was larger stay asked for when it shrinks.
//
// A stream that has had one read only (the first, at offset 0) goes no
// further than its window past it: a job that opens large files to read
// a header doesn't pull AheadBytes of each.
//
// Invariant (under mu): left is the sum, over every fetch this Detector
// started and that has not ended, of the bytes not yet reported arrived;
// chunks [cur+1, ahead) of the current stream have been asked for.
type Detector struct {
	size, chunk int64
	chunks      int // the file's chunk count
	fetch       Fetcher
	budget      *Budget // shared with the cache's other streams; nil: none
	// tooBig, if set, says the file is bigger than the cache can hold
	// (see GuardRandom).
	tooBig func() bool

	mu   sync.Mutex
	next int64 // where the last read ended
	run  int   // sequential reads in a row
	// runBytes is what the run has read; jumps counts the runs ended by
	// a read that jumped, since the last run of a chunk or more (Random).
	runBytes int64
	jumps    int
	stream   bool  // a stream is established: fetch ahead
	cur      int   // the chunk the stream's reader is in
	ahead    int   // the next chunk to ask for: those before it need no asking
	left     int64 // bytes asked for and not yet arrived
	// reach and window are the stream's bounds: AheadBytes and WindowBytes,
	// or its share of budget's as of its last read.
	reach, window int64
}

// NewDetector returns a detector for a file of size bytes split into
// chunks of chunk bytes, which fetches ahead through fetch, within its
// share of budget's bounds (nil: AheadBytes and WindowBytes of its own).
func NewDetector(size, chunk int64, budget *Budget, fetch Fetcher) *Detector {
	s := &Detector{size: size, chunk: chunk, fetch: fetch, budget: budget, reach: AheadBytes, window: WindowBytes}
	if chunk > 0 {
		s.chunks = int((size + chunk - 1) / chunk)
	}
	return s
}

// GuardRandom tells the Detector how to know that its file is bigger than
// the cache can hold: while the file is read at random (Random), reads of
// such a file in a row start no stream until a chunk's worth has been
// read in order. A file the cache holds keeps streaming on two reads in
// a row, random or not: what it fetches ahead stays cached. Call it
// before the Detector's first use.
func (s *Detector) GuardRandom(tooBig func() bool) { s.tooBig = tooBig }

// chunkLen is the length of chunk idx (the last one may be short).
func (s *Detector) chunkLen(idx int) int64 { return min(s.chunk, s.size-int64(idx)*s.chunk) }

// Observe records a read of n bytes at off, fetches ahead if it belongs to
// a stream, and reports whether it does (its reader will most likely read
// the rest of its chunk next).
func (s *Detector) Observe(off, n int64) (stream bool) {
	s.mu.Lock()
	if d := off - s.next; d < -seqSlack || d > seqSlack {
		if s.run > 0 {
			s.jumps++
		}
		s.run, s.runBytes, s.ahead, s.cur, s.stream = 0, 0, 0, 0, false
	}
	s.run++
	s.runBytes += n
	if end := off + n; end > s.next || s.run == 1 {
		s.next = end
	}
	if s.runBytes >= s.chunk {
		s.jumps = 0 // a chunk's worth read in order: a stream after all
	}
	if s.jumps >= randomMinJumps && s.tooBig != nil && s.tooBig() {
		// A random reader's reads that happen to follow one another (an
		// mmap fault's read-around comes as a few READs in a row) are no
		// stream: fetching ahead of them would pull chunks nobody reads
		// into a cache that can't hold the file.
		s.mu.Unlock()
		return false
	}
	// A read from the very start of a file is the usual beginning of a
	// sequential pass: don't wait for the second read to fetch ahead.
	if (s.run < seqMinRun && off != 0) || s.chunk <= 0 {
		s.mu.Unlock()
		return false
	}
	s.stream = true
	// The kernel's concurrent READs arrive a little out of order: the
	// reader's chunk only moves forward within a stream.
	s.cur = max(s.cur, int(off/s.chunk))
	if s.budget != nil {
		if s.cur >= s.chunks-1 {
			// Nothing left to fetch ahead: give the share to the others.
			s.budget.leave(s)
		} else {
			s.reach, s.window = s.budget.share(s, s.run < seqMinRun)
		}
	}
	from, to := s.topUpLocked()
	s.mu.Unlock()
	s.start(from, to)
	return true
}

// Random reports whether the file is being read at random: randomMinJumps
// or more of its reads landed away from where the one before ended, with
// no chunk's worth read in order since, as an mmap of a token file, an
// LMDB or an HDF5 dataset is read. Such a reader will not read the rest
// of a chunk it touches.
func (s *Detector) Random() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jumps >= randomMinJumps
}

// topUpLocked picks the chunks [from, to) to fetch now and counts them in
// flight; s.mu is held.
func (s *Detector) topUpLocked() (from, to int) {
	if !s.stream {
		return 0, 0
	}
	reach := s.reach
	if s.run < seqMinRun {
		reach = min(reach, s.window)
	}
	s.ahead = max(s.ahead, s.cur+1)
	from = s.ahead
	for s.ahead < s.chunks {
		n := s.chunkLen(s.ahead)
		// The next chunk past the reader always goes; beyond it, both
		// bounds hold.
		if s.ahead > s.cur+1 && (s.left+n > s.window || int64(s.ahead-s.cur)*s.chunk > reach) {
			break
		}
		s.left += n
		s.ahead++
	}
	return from, s.ahead
}

// start asks for chunks [from, to), already counted in s.left.
func (s *Detector) start(from, to int) {
	for idx := from; idx < to; idx++ {
		f := &seqFetch{s: s, want: s.chunkLen(idx)}
		s.fetch(idx, f.arrived, f.ended)
	}
}

// seqFetch is one chunk a stream asked for. got (under s.mu) is how much
// of want has been reported arrived; it never exceeds want.
type seqFetch struct {
	s         *Detector
	want, got int64
}

func (f *seqFetch) arrived(n int) { f.settle(int64(n)) }

func (f *seqFetch) ended() { f.settle(f.want) }

// settle counts up to n more of f's bytes as arrived and tops the window
// up.
func (f *seqFetch) settle(n int64) {
	s := f.s
	s.mu.Lock()
	take := min(n, f.want-f.got)
	if take <= 0 {
		s.mu.Unlock()
		return
	}
	f.got += take
	s.left -= take
	from, to := s.topUpLocked()
	s.mu.Unlock()
	s.start(from, to)
}
