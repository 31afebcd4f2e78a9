package cache

import "sync/atomic"

type counters struct {
	hits, misses                     atomic.Int64 // chunk reads served from cache / backend
	bytesFromCache, bytesFromBackend atomic.Int64 // bytes returned to readers
	bytesFetched                     atomic.Int64 // bytes fetched from backends
	streamed                         atomic.Int64 // fetched chunks not admitted
	evictions                        atomic.Int64
	verifyFailures                   atomic.Int64
	writeErrors                      atomic.Int64
	waiting                          atomic.Int64 // readers waiting on a flight now
}

func (s *counters) hit(n int) {
	s.hits.Add(1)
	s.bytesFromCache.Add(int64(n))
}

func (s *counters) miss(n int) {
	s.misses.Add(1)
	s.bytesFromBackend.Add(int64(n))
}

func (s *counters) fetched(n int) { s.bytesFetched.Add(int64(n)) }

// Stats is a snapshot of the cache's counters since Open.
type Stats struct {
	Hits, Misses     int64 // chunk-sized read pieces served from cache / from the backend
	BytesFromCache   int64
	BytesFromBackend int64
	BytesFetched     int64 // whole chunks fetched from backends
	Streamed         int64 // fetched chunks the policy did not admit
	Evictions        int64
	VerifyFailures   int64 // cached chunks that failed their checksum
	WriteErrors      int64
	Used, Capacity   int64
	Waiting          int64 // readers waiting on a chunk verification or fetch now
}

// Stats returns the cache's counters.
func (c *Cache) Stats() Stats {
	s := &c.stats
	return Stats{
		Hits: s.hits.Load(), Misses: s.misses.Load(),
		BytesFromCache: s.bytesFromCache.Load(), BytesFromBackend: s.bytesFromBackend.Load(),
		BytesFetched: s.bytesFetched.Load(), Streamed: s.streamed.Load(),
		Evictions: s.evictions.Load(), VerifyFailures: s.verifyFailures.Load(),
		WriteErrors: s.writeErrors.Load(), Waiting: s.waiting.Load(),
		Used: c.used.Load(), Capacity: c.capacity.Load(),
	}
}
