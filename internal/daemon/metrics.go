package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
	dsfs "github.com/dsmount/dsmount/fs"
	"github.com/dsmount/dsmount/internal/version"
	"github.com/dsmount/dsmount/readahead"
)

// The daemon's Prometheus metrics (docs/metrics.md lists every series).
// Names follow Prometheus' conventions: the unit last, in base units
// (bytes, seconds), "_total" on counters, and one name with a small label
// ("from", "kind") where the figures are parts of one whole. Labels are
// bounded: mount is one of the daemon's mountpoints, job and uid a
// declared job (at most readahead.MaxJobsPerMount per mount), from and
// kind a fixed set.
//
// Most figures are counted by the packages that serve reads and read at
// scrape time by collector. The distributions (a mount's read latency, its
// store's GET times) are observed as they happen into the mount's
// liveMetrics, and a job's stall times are bucketed by readahead
// (readahead.StallHistogram) and exported as they stand.

// Exported kinds, for the tables below.
const (
	counter = prometheus.CounterValue
	gauge   = prometheus.GaugeValue
)

// Label values of "from": where the bytes a reader got came from.
const (
	fromCache   = "cache"
	fromBackend = "backend"
)

// cacheMetrics are the cache's figures, daemon-wide.
var cacheMetrics = []struct {
	name, help string
	kind       prometheus.ValueType
	value      func(cache.Stats) int64
}{
	{"dsmount_backend_fetched_bytes_total", "Bytes fetched from backends (whole chunks).", counter, func(s cache.Stats) int64 { return s.BytesFetched }},
	{"dsmount_backend_fetched_chunks_total", "Chunks fetched from backends.", counter, func(s cache.Stats) int64 { return s.ChunksFetched }},
	{"dsmount_backend_fetched_ranges_total", "Ranged GETs, uncached, for random readers of files bigger than the cache.", counter, func(s cache.Stats) int64 { return s.RangesFetched }},
	{"dsmount_backend_fetches_in_flight", "Backend fetches in progress.", gauge, func(s cache.Stats) int64 { return s.FetchesInFlight }},
	{"dsmount_cache_used_bytes", "Bytes of cached chunks.", gauge, func(s cache.Stats) int64 { return s.Used }},
	{"dsmount_cache_capacity_bytes", "Cache capacity in bytes.", gauge, func(s cache.Stats) int64 { return s.Capacity }},
	{"dsmount_cache_waiting_reads", "Reads waiting now for a chunk's check or fetch.", gauge, func(s cache.Stats) int64 { return s.Waiting }},
	{"dsmount_cache_evictions_total", "Objects evicted.", counter, func(s cache.Stats) int64 { return s.Evictions }},
	{"dsmount_cache_streamed_chunks_total", "Fetched chunks the policy did not keep.", counter, func(s cache.Stats) int64 { return s.Streamed }},
	{"dsmount_cache_verify_failures_total", "Cached chunks that failed their checksum, or whose cache file was gone, and were refetched.", counter, func(s cache.Stats) int64 { return s.VerifyFailures }},
	{"dsmount_cache_write_errors_total", "Fetched chunks that could not be written to the cache disk: served, not kept.", counter, func(s cache.Stats) int64 { return s.WriteErrors }},
	{"dsmount_cache_sync_failures_total", "Chunks dropped because the cache disk failed the sync that was to make them durable.", counter, func(s cache.Stats) int64 { return s.SyncFailures }},
	{"dsmount_cache_buffer_double_releases_total", "Chunk buffers given back twice: a bug, refused so that no buffer reaches two holders. 0 in a healthy daemon.", counter, func(s cache.Stats) int64 { return s.BufferDoubleReleases }},
	{"dsmount_cache_staged_pushed_out_total", "Chunks fetched ahead that left the staging area unread (it was full); their readers read them from disk.", counter, func(s cache.Stats) int64 { return s.StagedPushedOut }},
	{"dsmount_warm_chunks_total", "Chunks fetched by warm requests.", counter, func(s cache.Stats) int64 { return s.WarmChunks }},
	{"dsmount_cache_disk_full", "1 while the cache's filesystem is full and nothing new is cached.", gauge, func(s cache.Stats) int64 { return boolInt(s.DiskFull) }},
}

// cacheFromMetrics are daemon-wide counters of reads, one series per
// source (label from).
var cacheFromMetrics = []struct {
	name, help     string
	cache, backend func(cache.Stats) int64
}{
	{"dsmount_cache_reads_total", "Chunk-sized pieces of reads, by where they were served from: the cache (hits) or the backend (misses).",
		func(s cache.Stats) int64 { return s.Hits }, func(s cache.Stats) int64 { return s.Misses }},
	{"dsmount_cache_read_bytes_total", "Bytes returned to readers, by where they came from: the cache, or fetched from the backend for them.",
		func(s cache.Stats) int64 { return s.BytesFromCache }, func(s cache.Stats) int64 { return s.BytesFromBackend }},
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// mountMetrics are per mount (label mount).
var mountMetrics = []struct {
	name, help string
	value      func(dsfs.MountStats) int64
}{
	{"dsmount_mount_reads_total", "Reads served by the mount.", func(s dsfs.MountStats) int64 { return s.Reads }},
	{"dsmount_mount_read_bytes_total", "Bytes read through the mount.", func(s dsfs.MountStats) int64 { return s.BytesRead }},
	{"dsmount_mount_read_errors_total", "Reads that failed.", func(s dsfs.MountStats) int64 { return s.ReadErrors }},
	{"dsmount_mount_getattrs_total", "Attributes the kernel asked for again (GETATTR) after its timeout for them passed.", func(s dsfs.MountStats) int64 { return s.Getattrs }},
	{"dsmount_mount_batched_reads_total", "READs of whole small cached files read from the cache disk together with others.", func(s dsfs.MountStats) int64 { return s.BatchedReads }},
	{"dsmount_mount_lookups_total", "Names the kernel looked up one at a time (LOOKUP); a directory listing introduces its entries without one.", func(s dsfs.MountStats) int64 { return s.Lookups }},
}

// mountFromMetrics are per mount and source (labels mount, from).
var mountFromMetrics = []struct {
	name, help     string
	cache, backend func(cache.SourceStats) int64
}{
	{"dsmount_mount_cache_reads_total", "Chunk-sized pieces of the mount's reads, by where they were served from: the cache (hits) or the backend (misses).",
		func(s cache.SourceStats) int64 { return s.Hits }, func(s cache.SourceStats) int64 { return s.Misses }},
	{"dsmount_mount_cache_read_bytes_total", "Bytes returned to the mount's readers, by where they came from.",
		func(s cache.SourceStats) int64 { return s.BytesFromCache }, func(s cache.SourceStats) int64 { return s.BytesFromBackend }},
}

// backendMetrics are per mount whose backend reports its requests
// (backend.StatsReporter, S3's), read at scrape time.
var backendMetrics = []struct {
	name, help string
	value      func(backend.RequestStats) int64
}{
	{"dsmount_backend_get_requests_total", "GETs sent for the mount's reads, hedges and retries included.", func(s backend.RequestStats) int64 { return s.Gets }},
	{"dsmount_backend_hedges_total", "Second GETs sent for a read whose first was slow to answer.", func(s backend.RequestStats) int64 { return s.Hedges }},
	{"dsmount_backend_hedges_won_total", "Hedges that answered before the GET they hedged.", func(s backend.RequestStats) int64 { return s.HedgesWon }},
}

// jobMetrics are per declared job; labels mount, job and uid (jobs come
// and go with their declarations and expire; their names are the jobs'
// own, per user).
var jobMetrics = []struct {
	name, help string
	kind       prometheus.ValueType
	value      func(readahead.JobStats) float64
}{
	{"dsmount_job_epoch", "The job's current epoch.", gauge, func(j readahead.JobStats) float64 { return float64(j.Epoch) }},
	{"dsmount_job_declared_files", "Files in the job's declared order for this epoch.", gauge, func(j readahead.JobStats) float64 { return float64(j.Declared) }},
	{"dsmount_job_read_files", "Files of this epoch's order read so far.", gauge, func(j readahead.JobStats) float64 { return float64(j.Read) }},
	{"dsmount_job_prefetch_window_files", "Files the job's prefetch keeps ahead of its reads.", gauge, func(j readahead.JobStats) float64 { return float64(j.Window) }},
	{"dsmount_job_reads_total", "Files of the job read, all epochs.", counter, func(j readahead.JobStats) float64 { return float64(j.TotalReads) }},
	{"dsmount_job_prefetched_total", "Files fetched ahead of the job's readers.", counter, func(j readahead.JobStats) float64 { return float64(j.Prefetched) }},
	{"dsmount_job_prefetch_hits_total", "First reads of a file that prefetch had fetched.", counter, func(j readahead.JobStats) float64 { return float64(j.PrefetchHits) }},
	{"dsmount_job_hit_ratio", "Share of this epoch's files read so far that were cached when read.", gauge, func(j readahead.JobStats) float64 { return j.HitRate }},
	{"dsmount_job_frontier_files", "Where the daemon believes the job is: the first unread position of its order.", gauge, func(j readahead.JobStats) float64 { return float64(j.Frontier) }},
	{"dsmount_job_prefetch_evicted_total", "Files fetched ahead of the job and evicted before it read them.", counter, func(j readahead.JobStats) float64 { return float64(j.PrefetchEvicted) }},
	{"dsmount_job_prefetch_page_cached_total", "Files fetched ahead of the job that its readers then got from the kernel's page cache.", counter, func(j readahead.JobStats) float64 { return float64(j.PrefetchUnseen) }},
	{"dsmount_job_admissions_refused_total", "Files of the job's prefetch window the cache would not evict for.", counter, func(j readahead.JobStats) float64 { return float64(j.AdmissionsRefused) }},
	{"dsmount_job_evicted_in_window_total", "Files evicted while the job needed them within its prefetch window.", counter, func(j readahead.JobStats) float64 { return float64(j.EvictedInWindow) }},
	{"dsmount_job_pushed_total", "Cached files put into the kernel's page cache ahead of the job's readers.", counter, func(j readahead.JobStats) float64 { return float64(j.Pushed) }},
}

// jobStallMetric is the histogram of a job's stalls
// (readahead.StallHistogram).
const (
	jobStallMetric = "dsmount_job_stall_duration_seconds"
	jobStallHelp   = "How long the job's first reads of files not cached yet took (stalls), each observed when the read ends."
)

// collector exports the figures read at scrape time (the tables above).
// Its series' labels are mount (the daemon's mountpoints: a closed set),
// mount, job and uid (the declared jobs), and the small set from.
type collector struct {
	d     *Daemon
	descs map[string]*prometheus.Desc
	// skipped is said once: a series that could not be made (see emit).
	skipped sync.Once
}

func newCollector(d *Daemon) *collector {
	c := &collector{d: d, descs: map[string]*prometheus.Desc{}}
	for _, m := range cacheMetrics {
		c.descs[m.name] = prometheus.NewDesc(m.name, m.help, nil, nil)
	}
	for _, m := range cacheFromMetrics {
		c.descs[m.name] = prometheus.NewDesc(m.name, m.help, []string{"from"}, nil)
	}
	for _, m := range mountMetrics {
		c.descs[m.name] = prometheus.NewDesc(m.name, m.help, []string{"mount"}, nil)
	}
	for _, m := range mountFromMetrics {
		c.descs[m.name] = prometheus.NewDesc(m.name, m.help, []string{"mount", "from"}, nil)
	}
	for _, m := range backendMetrics {
		c.descs[m.name] = prometheus.NewDesc(m.name, m.help, []string{"mount"}, nil)
	}
	for _, m := range jobMetrics {
		c.descs[m.name] = prometheus.NewDesc(m.name, m.help, []string{"mount", "job", "uid"}, nil)
	}
	c.descs[jobStallMetric] = prometheus.NewDesc(jobStallMetric, jobStallHelp, []string{"mount", "job", "uid"}, nil)
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.d.cache.Stats()
	for _, m := range cacheMetrics {
		c.emit(ch, m.name, m.kind, float64(m.value(s)))
	}
	for _, m := range cacheFromMetrics {
		c.emit(ch, m.name, counter, float64(m.cache(s)), fromCache)
		c.emit(ch, m.name, counter, float64(m.backend(s)), fromBackend)
	}
	for _, mm := range c.d.metricMounts() {
		ms, mp := mm.stats, mm.stats.Mountpoint
		for _, m := range mountMetrics {
			c.emit(ch, m.name, counter, float64(m.value(ms)), mp)
		}
		for _, m := range mountFromMetrics {
			c.emit(ch, m.name, counter, float64(m.cache(ms.SourceStats)), mp, fromCache)
			c.emit(ch, m.name, counter, float64(m.backend(ms.SourceStats)), mp, fromBackend)
		}
		if mm.live != nil && mm.live.backend {
			for _, m := range backendMetrics {
				c.emit(ch, m.name, counter, float64(m.value(ms.Backend)), mp)
			}
		}
		for _, j := range ms.Jobs {
			uid := strconv.FormatUint(uint64(j.UID), 10)
			for _, m := range jobMetrics {
				c.emit(ch, m.name, m.kind, m.value(j), mp, j.Name, uid)
			}
			c.emitStalls(ch, j, mp, uid)
		}
	}
}

// liveCollector exports each mount's liveMetrics. It describes nothing,
// which makes it "unchecked" to the Prometheus client: a mount's series
// carry its mountpoint as a constant label, so each mount's have
// descriptions of their own, made with the mount.
type liveCollector struct{ d *Daemon }

func (liveCollector) Describe(chan<- *prometheus.Desc) {}

func (c liveCollector) Collect(ch chan<- prometheus.Metric) {
	c.d.mu.Lock()
	live := make([]*liveMetrics, 0, len(c.d.mounts))
	for _, m := range c.d.mounts {
		if m.metrics != nil {
			live = append(live, m.metrics)
		}
	}
	c.d.mu.Unlock()
	for _, l := range live {
		l.collect(ch)
	}
}

// emitStalls sends the stall histogram of job j of mount mp, owned by
// uid: readahead's buckets made cumulative, its sum the job's stall
// seconds. The job's name comes from j, so the labels are always the
// three the description has.
func (c *collector) emitStalls(ch chan<- prometheus.Metric, j readahead.JobStats, mp, uid string) {
	labels := []string{mp, j.Name, uid}
	h := j.StallHistogram
	buckets := make(map[float64]uint64, len(readahead.StallBuckets))
	var n uint64
	for i, le := range readahead.StallBuckets {
		n += h.Counts[i]
		buckets[le] = n
	}
	for i, l := range labels {
		labels[i] = labelValue(l)
	}
	m, err := prometheus.NewConstHistogram(c.descs[jobStallMetric], h.Count(), j.StallSeconds, buckets, labels...)
	c.send(ch, jobStallMetric, m, err)
}

// emit sends one series, its label values made valid by labelValue. Collect
// runs in a goroutine of its own: a panic there (MustNewConstMetric's, on
// a label it refuses) would end the daemon and every mount with it, so a
// series that still can't be made is left out, and said once.
func (c *collector) emit(ch chan<- prometheus.Metric, name string, kind prometheus.ValueType, v float64, labels ...string) {
	for i, l := range labels {
		labels[i] = labelValue(l)
	}
	m, err := prometheus.NewConstMetric(c.descs[name], kind, v, labels...)
	c.send(ch, name, m, err)
}

func (c *collector) send(ch chan<- prometheus.Metric, name string, m prometheus.Metric, err error) {
	if err != nil {
		c.skipped.Do(func() {
			c.d.log.Warn("metrics: leaving out a series that can't be exported", "metric", name, "err", err)
		})
		return
	}
	ch <- m
}

// metricMount is a mount's figures and its observed series.
type metricMount struct {
	stats dsfs.MountStats
	live  *liveMetrics
}

// metricMounts are every mount's figures, each under the mountpoint it is
// served at, with its observed series.
func (d *Daemon) metricMounts() []metricMount {
	d.mu.Lock()
	defer d.mu.Unlock()
	all := make([]metricMount, 0, len(d.mounts))
	for mp, m := range d.mounts {
		s := m.fs.Stats()
		s.Mountpoint = mp
		all = append(all, metricMount{stats: s, live: m.metrics})
	}
	return all
}

// Buckets of the observed histograms, in seconds. A read served from the
// cache takes tens of microseconds; one that waits for the store, and a
// GET, milliseconds to seconds, and up to the 30 s a stalled connection
// is given.
var (
	readBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	getBuckets  = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
)

// liveMetrics are one mount's series observed as things happen: its reads'
// latency (fs.Config.ReadLatency) and, for a backend that reports its
// requests (backend.Observed, S3's), its GETs' times, failures and
// retries (backend.RequestObserver). They are made with the mount when
// metrics are served (the cost is two clock reads and an observation per
// read, which fs's BenchmarkNodeRead measures), carry the mount's label
// from the start, and go with the mount.
type liveMetrics struct {
	read prometheus.Histogram
	// backend says the rest are there.
	backend                   bool
	getFirstByte, getDuration prometheus.Histogram
	getErrors, getRetries     [backend.NumFailureKinds]prometheus.Counter
}

// newLiveMetrics makes the series of a mount at mountpoint and has b
// report to them, if it can.
func newLiveMetrics(mountpoint string, b backend.Backend) *liveMetrics {
	labels := prometheus.Labels{"mount": labelValue(mountpoint)}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, ConstLabels: labels, Buckets: buckets})
	}
	l := &liveMetrics{read: hist("dsmount_mount_read_duration_seconds", "How long the mount's reads took to serve, from the request reaching the daemon to its reply.", readBuckets)}
	o, ok := b.(backend.Observed)
	if !ok {
		return l
	}
	l.backend = true
	l.getFirstByte = hist("dsmount_backend_get_first_byte_seconds", "Time from sending a GET for the mount's reads to its answer (the response headers).", getBuckets)
	l.getDuration = hist("dsmount_backend_get_duration_seconds", "Time from sending a GET for the mount's reads to the end of its body.", getBuckets)
	for k := range backend.NumFailureKinds {
		kl := prometheus.Labels{"mount": labels["mount"], "kind": backend.FailureKind(k).String()}
		l.getErrors[k] = prometheus.NewCounter(prometheus.CounterOpts{Name: "dsmount_backend_errors_total",
			Help: "GETs for the mount's reads that failed, by kind: throttled (the store asked for fewer requests), timeout (no answer, or a body that stopped coming), other.", ConstLabels: kl})
		l.getRetries[k] = prometheus.NewCounter(prometheus.CounterOpts{Name: "dsmount_backend_retries_total",
			Help: "GETs for the mount's reads made again after a failure, by the failure's kind.", ConstLabels: kl})
	}
	o.ObserveRequests(l)
	return l
}

// readObserver is what the mount's reads report to.
func (l *liveMetrics) readObserver() dsfs.ReadObserver { return l.read }

func (l *liveMetrics) GetDone(firstByte, total time.Duration) {
	l.getFirstByte.Observe(firstByte.Seconds())
	l.getDuration.Observe(total.Seconds())
}

func (l *liveMetrics) GetFailed(k backend.FailureKind) {
	if k < backend.NumFailureKinds {
		l.getErrors[k].Inc()
	}
}

func (l *liveMetrics) Retried(k backend.FailureKind) {
	if k < backend.NumFailureKinds {
		l.getRetries[k].Inc()
	}
}

func (l *liveMetrics) collect(ch chan<- prometheus.Metric) {
	l.read.Collect(ch)
	if !l.backend {
		return
	}
	l.getFirstByte.Collect(ch)
	l.getDuration.Collect(ch)
	for k := range backend.NumFailureKinds {
		l.getErrors[k].Collect(ch)
		l.getRetries[k].Collect(ch)
	}
}

// labelValue makes s a valid Prometheus label value (UTF-8) without ever
// giving two distinct strings the same value: mountpoints and job names are
// any bytes but NUL. A valid string without a backslash, the usual case, is
// kept as it is; in any other every backslash is doubled and every byte
// that isn't part of valid UTF-8 is written as \xNN. Only the latter
// contain a backslash, and their escapes decode one way, so values never
// merge.
func labelValue(s string) string {
	if utf8.ValidString(s) && !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// newRegistry gathers the daemon's series, dsmount_build_info, and the Go
// runtime's and the process's standard series (go_goroutines, go_threads,
// go_memstats_*, process_cpu_seconds_total, process_resident_memory_bytes,
// process_open_fds, ...), which a long run watches for leaks (test/soak).
func newRegistry(d *Daemon) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	registerMetrics(reg, d)
	return reg
}

func registerMetrics(reg prometheus.Registerer, d *Daemon) {
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "dsmount_build_info",
		Help:        "Always 1; its labels say which dsmount this is and the Go it was built with.",
		ConstLabels: prometheus.Labels{"version": version.String(), "goversion": runtime.Version()},
	})
	info.Set(1)
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		info,
		newCollector(d),
		liveCollector{d},
	)
}

func metricsHandler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

// MetricsListenAddr is where --metrics-addr says to listen: ":PORT" is
// 127.0.0.1:PORT, never every interface by omission; "0.0.0.0:PORT" (or
// "[::]:PORT") is every interface, for a scraper on another host
// (docs/metrics.md: the endpoint has no authentication).
func MetricsListenAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--metrics-addr %q: want HOST:PORT or :PORT", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

func (d *Daemon) serveMetrics(addr string) error {
	listen, err := MetricsListenAddr(addr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("--metrics-addr: %w", err)
	}
	reg := newRegistry(d)
	d.metrics = &http.Server{Handler: metricsHandler(reg), ReadHeaderTimeout: 10 * time.Second}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := d.metrics.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Warn("metrics server stopped", "err", err)
		}
	}()
	d.log.Info("serving metrics", "addr", "http://"+ln.Addr().String()+"/metrics")
	return nil
}
