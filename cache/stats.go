package cache

import "sync/atomic"

type counters struct {
	hits, misses                     atomic.Int64 // chunk reads served from cache / backend
	bytesFromCache, bytesFromBackend atomic.Int64 // bytes returned to readers
	bytesFetched, chunksFetched      atomic.Int64 // fetched from backends
	rangesFetched                    atomic.Int64 // ranged GETs for random readers (randomread.go)
	fetchesInFlight                  atomic.Int64
	streamed                         atomic.Int64 // fetched chunks not admitted
	evictions                        atomic.Int64
	verifyFailures                   atomic.Int64
	syncFailures                     atomic.Int64 // chunks dropped because their sync failed
	writeErrors                      atomic.Int64
	waiting                          atomic.Int64 // readers waiting on a flight now
	warmChunks                       atomic.Int64 // chunks fetched by Warm
	stagedPushedOut                  atomic.Int64 // staged chunks that left unread
}

func (s *counters) hit(n int) {
	s.hits.Add(1)
	s.bytesFromCache.Add(int64(n))
}

func (s *counters) miss(n int) {
	s.misses.Add(1)
	s.bytesFromBackend.Add(int64(n))
}

// Stats is a snapshot of the cache's counters since Open.
type Stats struct {
	Hits, Misses     int64 // chunk-sized read pieces served from cache / from the backend
	BytesFromCache   int64
	BytesFromBackend int64
	BytesFetched     int64 // fetched from backends: whole chunks, and ranges
	ChunksFetched    int64
	// RangesFetched counts the reads of random readers of objects bigger
	// than the cache served by a ranged GET of what they asked, uncached.
	RangesFetched   int64
	FetchesInFlight int64
	Streamed        int64 // fetched chunks the policy did not admit
	Evictions       int64
	VerifyFailures  int64 // cached chunks that failed their checksum, or whose cache file was gone
	SyncFailures    int64 // chunks dropped because their bytes could not be made durable
	// BufferDoubleReleases counts chunk buffers given back twice (a bug,
	// refused: see bufs.Pool); 0 in a healthy daemon.
	BufferDoubleReleases int64
	WriteErrors          int64
	WarmChunks           int64 // chunks fetched by Warm
	// StagedPushedOut counts chunks fetched ahead that left the staging
	// area before their reader took them (it was full): read from disk.
	StagedPushedOut int64
	Used, Capacity  int64
	Waiting         int64 // readers waiting on a chunk verification or fetch now
	// DiskFull: the cache's filesystem is full, so nothing new is cached
	// until it has room again (see store.SpaceGuard).
	DiskFull bool
}

// Stats returns the cache's counters.
func (c *Cache) Stats() Stats {
	s := &c.stats
	return Stats{
		Hits: s.hits.Load(), Misses: s.misses.Load(),
		BytesFromCache: s.bytesFromCache.Load(), BytesFromBackend: s.bytesFromBackend.Load(),
		BytesFetched: s.bytesFetched.Load(), ChunksFetched: s.chunksFetched.Load(), RangesFetched: s.rangesFetched.Load(),
		FetchesInFlight: s.fetchesInFlight.Load(), Streamed: s.streamed.Load(),
		Evictions: s.evictions.Load(), VerifyFailures: s.verifyFailures.Load(), SyncFailures: s.syncFailures.Load(),
		WriteErrors: s.writeErrors.Load(), WarmChunks: s.warmChunks.Load(),
		StagedPushedOut: s.stagedPushedOut.Load(), BufferDoubleReleases: c.bufs.DoubleReleases(),
		Waiting: s.waiting.Load(), Used: c.Used(), Capacity: c.budget.capacity.Load(),
		DiskFull: c.disk.space.IsFull(),
	}
}

// SourceStats counts the reads served through one Source (one mount).
type SourceStats struct {
	Hits             int64
	Misses           int64
	BytesFromCache   int64
	BytesFromBackend int64
}

// Stats returns the counters of reads through s.
func (s *Source) Stats() SourceStats {
	return SourceStats{
		Hits: s.stats.hits.Load(), Misses: s.stats.misses.Load(),
		BytesFromCache: s.stats.bytesFromCache.Load(), BytesFromBackend: s.stats.bytesFromBackend.Load(),
	}
}
