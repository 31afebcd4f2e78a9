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
// Once a stream is established the readahead window is MaxChunks chunks
// past the one being read.
type Sequential struct {
	mu    sync.Mutex
	next  int64 // where the last read ended
	run   int   // sequential reads in a row
	ahead int   // chunks [0, ahead) were already requested
}

// MaxChunks is the sequential window, in chunks. Eight 4 MiB chunks in
// flight already carry several times what one connection does (a 4 MiB
// GET at 100 MB/s and 20 ms takes ~60 ms: 8 of them move ~550 MB/s). 32
// did no better and cost more: every chunk in flight holds a buffer, and
// a daemon's fresh buffers are paid for in page faults (first touch costs
// 1.5-3 µs per 4 KiB page here): go run ./test/benchorder --skip-small
// gave the daemon 0.8-1.0 s of CPU per 256 MiB read with 32, 0.6 s with 8.
const MaxChunks = 8

// Observe records a read of n bytes at off in a file of size bytes split
// into chunks of chunk bytes, and returns the chunk range [from, to) to
// prefetch now (empty when none) and whether the read belongs to a
// sequential stream (its reader will most likely read the rest of its
// chunk next).
func (s *Sequential) Observe(off, n, size, chunk int64) (from, to int, stream bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := off - s.next; d < -seqSlack || d > seqSlack {
		s.run, s.ahead = 0, 0
	}
	s.run++
	if end := off + n; end > s.next || s.run == 1 {
		s.next = end
	}
	// A read from the very start of a file is the usual beginning of a
	// sequential pass: don't wait for the second read to fetch ahead.
	if (s.run < seqMinRun && off != 0) || chunk <= 0 {
		return 0, 0, false
	}
	last := int((size + chunk - 1) / chunk)
	cur := int(off / chunk)
	from = max(s.ahead, cur+1)
	to = min(cur+1+MaxChunks, last)
	if from >= to {
		return 0, 0, true
	}
	s.ahead = to
	return from, to, true
}
