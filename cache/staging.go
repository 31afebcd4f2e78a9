package cache

import (
	"sync"
	"sync/atomic"
)

// stagingLimit bounds the bytes held by a cache's staging area.
const stagingLimit = 256 << 20

// staging holds chunks fetched ahead (prefetch, sequential readahead)
// between their fetch and their reader. Chunks are written to disk with
// O_DIRECT, so they are not in the page cache; the reader takes them from
// here instead of reading them back from disk. A chunk leaves once as many
// bytes as it holds have been taken (by reads here, and by those its
// flight served before staging it), or first in first out beyond
// stagingLimit; its buffer then goes back to the pool. Counting bytes
// rather than waiting for a read at the chunk's end keeps the kernel's
// concurrent READs of one chunk, which arrive in any order, from either
// dropping it before its earlier parts are read or leaving it behind once
// they all are. A byte read twice (two readers of one file) counts twice:
// the chunk may leave early and the second reader goes to disk, never to
// wrong bytes. The staging area is a buffer's only holder: flights hand
// theirs over only once no reader holds them. Safe for concurrent use;
// the byte slices are never modified while staged.
type staging struct {
	free func([]byte) // recycles a buffer that left; may be nil
	// pushedOut counts chunks that left with bytes never taken (beyond
	// stagingLimit): their readers get them from disk. Readahead
	// outrunning its readers, or more of it than the area holds, shows
	// here.
	pushedOut *atomic.Int64
	mu        sync.Mutex
	m         map[chunkID]*stagedChunk
	fifo      []chunkID
	bytes     int64
}

// stagedChunk is a chunk's bytes and how many of them are yet to be taken.
type stagedChunk struct {
	data []byte
	left int64
}

// put stages data as chunk k, of which took bytes have already been read;
// a chunk read whole already goes straight back to the pool.
func (s *staging) put(k chunkID, data []byte, took int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[chunkID]*stagedChunk)
	}
	if _, ok := s.m[k]; ok || took >= int64(len(data)) {
		s.release(data)
		return
	}
	s.m[k] = &stagedChunk{data: data, left: int64(len(data)) - took}
	s.fifo = append(s.fifo, k)
	s.bytes += int64(len(data))
	for s.bytes > stagingLimit && len(s.fifo) > 0 {
		old := s.fifo[0]
		s.fifo = s.fifo[1:]
		if sc, ok := s.m[old]; ok {
			s.drop(old, sc)
			if s.pushedOut != nil {
				s.pushedOut.Add(1)
			}
		}
	}
	// Keys already taken stay in fifo until compacted away here.
	if len(s.fifo) > 2*len(s.m)+64 {
		live := s.fifo[:0]
		for _, k := range s.fifo {
			if _, ok := s.m[k]; ok {
				live = append(live, k)
			}
		}
		s.fifo = live
	}
}

// take copies the chunk's bytes at inner into dst if staged, dropping the
// chunk once all of its bytes have been taken.
func (s *staging) take(k chunkID, dst []byte, inner int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, ok := s.m[k]
	if !ok {
		return false
	}
	sc.left -= int64(copy(dst, sc.data[inner:]))
	if sc.left <= 0 {
		s.drop(k, sc)
	}
	return true
}

// drop removes chunk k and recycles its buffer. Under s.mu.
func (s *staging) drop(k chunkID, sc *stagedChunk) {
	delete(s.m, k)
	s.bytes -= int64(len(sc.data))
	s.release(sc.data)
}

func (s *staging) release(data []byte) {
	if s.free != nil {
		s.free(data)
	}
}

// drain drops every staged chunk, giving back its buffer (at Close).
func (s *staging) drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, sc := range s.m {
		s.drop(k, sc)
	}
	s.fifo, s.bytes = nil, 0
}
