package control

// The stats answer's types are the wire's own. The daemon's packages keep
// their figures in types of their own (cache.Stats, cache.SourceStats,
// readahead.JobStats, readahead.PageCache, backend.RequestStats), and the
// side that reports them converts them to these, each in one place
// (package fs for a mount's figures, internal/daemon for the cache's and
// the page cache's). So this package depends on none of those packages,
// and a field's wire name is set here and nowhere else.

// StatsReport is the answer to OpStats (Event.Stats) and what
// `dsmount stats --json` prints.
type StatsReport struct {
	DaemonPid int          `json:"daemon_pid"`
	Mount     MountStats   `json:"mount"`  // the mount asked through
	Mounts    []MountStats `json:"mounts"` // every mount of the daemon, or Mount alone for an unprivileged caller
	Cache     CacheStats   `json:"cache"`
	// PageCache is what the declared orders' policy has learnt of the
	// kernel's page cache.
	PageCache PageCache `json:"page_cache"`
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
	RangesFetched    int64  `json:"ranges_fetched"`
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
	SourceStats
	Jobs []JobStats `json:"jobs"`
	// Backend counts the source's requests (hedges, timeouts, retries),
	// where its backend keeps count (backend.StatsReporter); zero where
	// it doesn't.
	Backend RequestStats `json:"backend"`
}

// SourceStats count the reads served through one mount's source, by
// where they came from (cache.SourceStats). Their fields are the
// MountStats object's own on the wire.
type SourceStats struct {
	Hits             int64 `json:"hits"`
	Misses           int64 `json:"misses"`
	BytesFromCache   int64 `json:"bytes_from_cache"`
	BytesFromBackend int64 `json:"bytes_from_backend"`
}

// JobStats are one declared job's figures (readahead.JobStats).
type JobStats struct {
	Mount        string  `json:"mount"`
	Name         string  `json:"name"`
	UID          uint32  `json:"uid"` // the user who owns the job
	Epoch        int     `json:"epoch"`
	Declared     int     `json:"declared"`      // items in the current epoch's order
	NextDeclared int     `json:"next_declared"` // items in the next epoch's order, 0 if not declared
	Read         int     `json:"read"`          // items of the current epoch read
	Frontier     int     `json:"frontier"`      // first unread position of the current epoch
	Window       int     `json:"window"`        // prefetch window, items
	ReadRate     float64 `json:"read_rate"`     // items per second, smoothed
	TotalReads   int64   `json:"total_reads"`
	Prefetched   int64   `json:"prefetched"`
	PrefetchHits int64   `json:"prefetch_hits"`
	Stalls       int64   `json:"stalls"`
	// HitRate is the share of this epoch's positions passed so far whose
	// read didn't find the item uncached (positions passed unseen, which
	// the kernel's page cache served, count as hits); StallSeconds the
	// time the requests that found their item uncached took, all epochs;
	// PrefetchEvicted the items fetched ahead for the job and evicted
	// before it read them, PrefetchUnseen those its readers then
	// got from the kernel's page cache; AdmissionsRefused the items of
	// its window that prefetch left because the cache would not evict
	// for them, EvictedInWindow the items evicted while it needed them
	// within its window (the policy's trace: see docs/multijob.md).
	HitRate           float64 `json:"hit_rate"`
	StallSeconds      float64 `json:"stall_seconds"`
	PrefetchEvicted   int64   `json:"prefetch_evicted"`
	PrefetchUnseen    int64   `json:"prefetch_unseen"`
	AdmissionsRefused int64   `json:"admissions_refused"`
	EvictedInWindow   int64   `json:"evicted_in_window"`
	IdleSeconds       float64 `json:"idle_seconds"`
	// Pushed counts the files put into the kernel's page cache ahead of
	// the readers, all epochs.
	Pushed int64 `json:"pushed"`
}

// RequestStats are a backend's counts of the requests it made for reads
// (backend.RequestStats).
type RequestStats struct {
	// Gets counts the GETs sent for reads, hedges and retries included.
	Gets int64 `json:"gets"`
	// Hedges counts second GETs sent for a read whose first was slow to
	// answer; HedgesWon those that answered first.
	Hedges    int64 `json:"hedges"`
	HedgesWon int64 `json:"hedges_won"`
	// FirstByteTimeouts counts GETs abandoned for giving no answer in
	// time, and BodyTimeouts those whose body stopped coming.
	FirstByteTimeouts int64 `json:"first_byte_timeouts"`
	BodyTimeouts      int64 `json:"body_timeouts"`
	// Retries counts GETs made again after a failure or a timeout.
	Retries int64 `json:"retries"`
	// Throttled counts answers asking to slow down (503 SlowDown, 429).
	Throttled int64 `json:"throttled"`
	// FirstByteP99Millis is the recent 99th percentile of the time to a
	// GET's answer, which the timeouts follow; TimeoutMillis the first
	// attempt's timeout it gives, and HedgeMillis how long an urgent read
	// waits before a second GET.
	FirstByteP99Millis float64 `json:"first_byte_p99_ms"`
	TimeoutMillis      float64 `json:"timeout_ms"`
	HedgeMillis        float64 `json:"hedge_ms"`
}

// PageCache is what the declared orders' policy has learnt of the
// kernel's page cache (readahead.PageCache): how long it holds a file
// the daemon served, for a file served since the reading job's epoch
// began (Same) and before (Earlier); Samples counts the observations
// they were learnt from.
type PageCache struct {
	Same    Horizon `json:"same_epoch"`
	Earlier Horizon `json:"earlier"`
	Samples int     `json:"samples"`
	// FillAndHold: the page cache holds every file read in an epoch, so
	// the order policy keeps what it holds.
	FillAndHold bool `json:"fill_and_hold"`
}

// Horizon is one learnt horizon. Seconds 0: nothing learnt yet;
// Unbounded: files were found there at every age and never gone.
type Horizon struct {
	Seconds   float64 `json:"seconds"`
	Unbounded bool    `json:"unbounded"`
}
