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
// here instead of reading them back from disk. A chunk leaves when a read
// reaches its end, or first in first out beyond stagingLimit; its buffer
// then goes back to the pool. The staging area is a buffer's only holder:
// flights hand theirs over only when no reader joined them. Safe for
// concurrent use; the byte slices are never modified while staged.
type staging struct {
	free func([]byte) // recycles a buffer that left; may be nil
	// pushedOut counts chunks that left unread (beyond stagingLimit): their
	// readers get them from disk. Readahead outrunning its readers, or more
	// of it than the area holds, shows here.
	pushedOut *atomic.Int64
	mu        sync.Mutex
	m         map[chunkID][]byte
	fifo      []chunkID
	bytes     int64
}

func (s *staging) put(k chunkID, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[chunkID][]byte)
	}
	if _, ok := s.m[k]; ok {
		s.release(data)
		return
	}
	s.m[k] = data
	s.fifo = append(s.fifo, k)
	s.bytes += int64(len(data))
	for s.bytes > stagingLimit && len(s.fifo) > 0 {
		old := s.fifo[0]
		s.fifo = s.fifo[1:]
		if d, ok := s.m[old]; ok {
			s.bytes -= int64(len(d))
			delete(s.m, old)
			s.release(d)
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
// chunk once dst reaches its end.
func (s *staging) take(k chunkID, dst []byte, inner int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.m[k]
	if !ok {
		return false
	}
	copy(dst, data[inner:])
	if inner+int64(len(dst)) >= int64(len(data)) {
		delete(s.m, k)
		s.bytes -= int64(len(data))
		s.release(data)
	}
	return true
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
	for k, data := range s.m {
		delete(s.m, k)
		s.release(data)
	}
	s.fifo, s.bytes = nil, 0
}
