package control

import (
	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
	"github.com/dsmount/dsmount/readahead"
)

// StatsReport is the answer to OpStats (Event.Stats) and what
// `dsmount stats --json` prints.
type StatsReport struct {
	DaemonPid int          `json:"daemon_pid"`
	Mount     MountStats   `json:"mount"`  // the mount asked through
	Mounts    []MountStats `json:"mounts"` // every mount of the daemon, or Mount alone for an unprivileged caller
	Cache     CacheStats   `json:"cache"`
	// PageCache is what the declared orders' policy has learnt of the
	// kernel's page cache (see readahead.PageCache).
	PageCache readahead.PageCache `json:"page_cache"`
}

// CacheStats are the daemon's cache's figures.
type CacheStats struct {
	Dir              string `json:"dir"`
	Policy           string `json:"policy"`
	ChunkSize        int64  `json:"chunk_size"`
	Hits             int64  `json:"hits"`
	Misses           int64  `json:"misses"`
	BytesFromCache   int64  `json:"bytes_from_cache"`
	BytesFromBackend int64  `json:"bytes_from_backend"`
	BytesFetched     int64  `json:"bytes_fetched"`
	ChunksFetched    int64  `json:"chunks_fetched"`
	FetchesInFlight  int64  `json:"fetches_in_flight"`
	Used             int64  `json:"used"`
	Capacity         int64  `json:"capacity"`
	Evictions        int64  `json:"evictions"`
	Streamed         int64  `json:"streamed"`
	VerifyFailures   int64  `json:"verify_failures"`
	SyncFailures     int64  `json:"sync_failures"`
	WarmChunks       int64  `json:"warm_chunks"`
	StagedPushedOut  int64  `json:"staged_pushed_out"`
	DiskFull         bool   `json:"disk_full"`
}

// NewCacheStats reports s, the cache in dir with its policy and chunk size.
func NewCacheStats(s cache.Stats, dir, policy string, chunkSize int64) CacheStats {
	return CacheStats{
		Dir: dir, Policy: policy, ChunkSize: chunkSize,
		Hits: s.Hits, Misses: s.Misses, BytesFromCache: s.BytesFromCache, BytesFromBackend: s.BytesFromBackend,
		BytesFetched: s.BytesFetched, ChunksFetched: s.ChunksFetched, FetchesInFlight: s.FetchesInFlight,
		Used: s.Used, Capacity: s.Capacity, Evictions: s.Evictions, Streamed: s.Streamed,
		VerifyFailures: s.VerifyFailures, SyncFailures: s.SyncFailures, WarmChunks: s.WarmChunks, StagedPushedOut: s.StagedPushedOut, DiskFull: s.DiskFull,
	}
}

// MountStats are one mount's figures.
type MountStats struct {
	Mountpoint string `json:"mountpoint"`
	Source     string `json:"source"`
	Files      int    `json:"files"`
	Reads      int64  `json:"reads"`
	BytesRead  int64  `json:"bytes_read"`
	ReadErrors int64  `json:"read_errors"`
	// Lookups counts the kernel's LOOKUPs: names it had to ask for one at
	// a time (a file's first open, unless a listing of its directory
	// introduced it).
	Lookups int64 `json:"lookups"`
	// Getattrs counts the kernel's GETATTRs of the tree's files and
	// directories: attributes it no longer held (kernelTimeout passed).
	Getattrs int64 `json:"getattrs"`
	// BatchedReads counts the READs of whole small cached files that
	// were read from the cache disk together with others (one system
	// call for many, no thread blocked on the disk).
	BatchedReads int64  `json:"batched_reads"`
	FastPath     string `json:"fast_path"`
	cache.SourceStats
	Jobs []readahead.JobStats `json:"jobs"`
	// Backend counts the source's requests (hedges, timeouts, retries),
	// where its backend keeps count (backend.StatsReporter); zero where
	// it doesn't.
	Backend backend.RequestStats `json:"backend"`
}
