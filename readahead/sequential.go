package readahead

import "sync"

const (
	// seqSlack is how far a read may land from where the last one ended and
	// still count as sequential: the kernel issues readahead READs
	// concurrently, so they arrive a little out of order.
	seqSlack = 4 << 20
	// seqMinRun is how many sequential reads establish a stream (one, at
	// offset 0).
	seqMinRun = 2
)

// Sequential detects sequential reading of one file and says which chunks
// to fetch ahead. The zero value is ready; it is safe for concurrent use.
//
// Once a stream is established the readahead window starts at two chunks
// and doubles with every chunk read, up to MaxChunks, so a short read of a
// big file costs little and a long one soon has MaxChunks ranged GETs in
// flight.
type Sequential struct {
	mu    sync.Mutex
	next  int64 // where the last read ended
	run   int   // sequential reads in a row
	ahead int   // chunks [0, ahead) were already requested
	win   int   // current window, in chunks
	// lastChunk is the furthest chunk read since the stream began.
	lastChunk int
}

// MaxChunks is the widest sequential window, in chunks.
const MaxChunks = 32

// Observe records a read of n bytes at off in a file of size bytes split
// into chunks of chunk bytes, and returns the chunk range [from, to) to
// prefetch now (empty when none).
func (s *Sequential) Observe(off, n, size, chunk int64) (from, to int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := off - s.next; d < -seqSlack || d > seqSlack {
		s.run, s.ahead, s.win, s.lastChunk = 0, 0, 0, 0
	}
	s.run++
	if end := off + n; end > s.next || s.run == 1 {
		s.next = end
	}
	// A read from the very start of a file is the usual beginning of a
	// sequential pass: don't wait for the second read to fetch ahead.
	if (s.run < seqMinRun && off != 0) || chunk <= 0 {
		return 0, 0
	}
	last := int((size + chunk - 1) / chunk)
	cur := int(off / chunk)
	switch {
	case s.win == 0:
		s.win = 8
	case cur > s.lastChunk:
		// Every chunk the reader finishes doubles the window.
		s.win = min(2*s.win, MaxChunks)
	}
	s.lastChunk = max(s.lastChunk, cur)
	from = max(s.ahead, cur+1)
	to = min(cur+1+s.win, last)
	if from >= to {
		return 0, 0
	}
	s.ahead = to
	return from, to
}
