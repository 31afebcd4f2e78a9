package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dsmount/dsmount/cache"
	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/readahead"
)

// collector exports the daemon's figures at scrape time. Its only label is
// mount, whose values are the daemon's mountpoints: a closed set. It also
// exports the Go runtime's standard series (go_goroutines, go_threads,
// go_memstats_*), which a long run watches for leaks (test/soak).
type collector struct {
	d       *Daemon
	descs   map[string]*prometheus.Desc
	runtime prometheus.Collector
	// skipped is said once: a series that could not be made (see emit).
	skipped sync.Once
}

var cacheMetrics = []struct {
	name, help string
	counter    bool
	value      func(cache.Stats) int64
}{
	{"dsmount_cache_hits_total", "Chunk-sized read pieces served from the cache.", true, func(s cache.Stats) int64 { return s.Hits }},
	{"dsmount_cache_misses_total", "Chunk-sized read pieces served from the backend.", true, func(s cache.Stats) int64 { return s.Misses }},
	{"dsmount_cache_bytes_from_cache_total", "Bytes returned to readers from the cache.", true, func(s cache.Stats) int64 { return s.BytesFromCache }},
	{"dsmount_cache_bytes_from_backend_total", "Bytes returned to readers that were fetched for them.", true, func(s cache.Stats) int64 { return s.BytesFromBackend }},
	{"dsmount_backend_bytes_fetched_total", "Bytes fetched from backends (whole chunks).", true, func(s cache.Stats) int64 { return s.BytesFetched }},
	{"dsmount_backend_chunks_fetched_total", "Chunks fetched from backends.", true, func(s cache.Stats) int64 { return s.ChunksFetched }},
	{"dsmount_fetches_in_flight", "Backend fetches in progress.", false, func(s cache.Stats) int64 { return s.FetchesInFlight }},
	{"dsmount_cache_used_bytes", "Bytes of cached chunks.", false, func(s cache.Stats) int64 { return s.Used }},
	{"dsmount_cache_capacity_bytes", "Cache capacity in bytes.", false, func(s cache.Stats) int64 { return s.Capacity }},
	{"dsmount_cache_evictions_total", "Objects evicted.", true, func(s cache.Stats) int64 { return s.Evictions }},
	{"dsmount_cache_streamed_chunks_total", "Fetched chunks the policy did not keep.", true, func(s cache.Stats) int64 { return s.Streamed }},
	{"dsmount_cache_verify_failures_total", "Cached chunks that failed their checksum, or whose cache file was gone, and were refetched.", true, func(s cache.Stats) int64 { return s.VerifyFailures }},
	{"dsmount_cache_sync_failures_total", "Chunks dropped because the cache disk failed the sync that was to make them durable.", true, func(s cache.Stats) int64 { return s.SyncFailures }},
	{"dsmount_cache_buffer_double_releases_total", "Chunk buffers given back twice: a bug, refused so that no buffer reaches two holders. 0 in a healthy daemon.", true, func(s cache.Stats) int64 { return s.BufferDoubleReleases }},
	{"dsmount_staged_pushed_out_total", "Chunks fetched ahead that left the staging area unread (it was full); their readers read them from disk.", true, func(s cache.Stats) int64 { return s.StagedPushedOut }},
	{"dsmount_warm_chunks_total", "Chunks fetched by warm requests.", true, func(s cache.Stats) int64 { return s.WarmChunks }},
	{"dsmount_cache_disk_full", "1 while the cache's filesystem is full and nothing new is cached.", false, func(s cache.Stats) int64 { return boolInt(s.DiskFull) }},
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

var mountMetrics = []struct {
	name, help string
	value      func(control.MountStats) int64
}{
	{"dsmount_mount_reads_total", "Reads served by the mount.", func(s control.MountStats) int64 { return s.Reads }},
	{"dsmount_mount_bytes_read_total", "Bytes read through the mount.", func(s control.MountStats) int64 { return s.BytesRead }},
	{"dsmount_mount_read_errors_total", "Reads that failed.", func(s control.MountStats) int64 { return s.ReadErrors }},
	{"dsmount_mount_lookups_total", "Names the kernel looked up one at a time (LOOKUP); a directory listing introduces its entries without one.", func(s control.MountStats) int64 { return s.Lookups }},
	{"dsmount_mount_hits_total", "Read pieces of the mount served from the cache.", func(s control.MountStats) int64 { return s.Hits }},
	{"dsmount_mount_misses_total", "Read pieces of the mount fetched from the backend.", func(s control.MountStats) int64 { return s.Misses }},
}

// jobMetrics are per declared job; labels mount, job and uid (jobs come
// and go with their declarations and expire; their names are the jobs'
// own, per user).
var jobMetrics = []struct {
	name, help string
	counter    bool
	value      func(readahead.JobStats) float64
}{
	{"dsmount_job_epoch", "The job's current epoch.", false, func(j readahead.JobStats) float64 { return float64(j.Epoch) }},
	{"dsmount_job_declared_files", "Files in the job's declared order for this epoch.", false, func(j readahead.JobStats) float64 { return float64(j.Declared) }},
	{"dsmount_job_read_files", "Files of this epoch's order read so far.", false, func(j readahead.JobStats) float64 { return float64(j.Read) }},
	{"dsmount_job_prefetch_window_files", "Files the job's prefetch keeps ahead of its reads.", false, func(j readahead.JobStats) float64 { return float64(j.Window) }},
	{"dsmount_job_reads_total", "Files of the job read, all epochs.", true, func(j readahead.JobStats) float64 { return float64(j.TotalReads) }},
	{"dsmount_job_prefetched_total", "Files fetched ahead of the job's readers.", true, func(j readahead.JobStats) float64 { return float64(j.Prefetched) }},
	{"dsmount_job_prefetch_hits_total", "First reads of a file that prefetch had fetched.", true, func(j readahead.JobStats) float64 { return float64(j.PrefetchHits) }},
	{"dsmount_job_stalls_total", "First reads of a file that was not cached yet.", true, func(j readahead.JobStats) float64 { return float64(j.Stalls) }},
	{"dsmount_job_stall_seconds_total", "Time the job's reads of files not cached yet took.", true, func(j readahead.JobStats) float64 { return j.StallSeconds }},
	{"dsmount_job_hit_ratio", "Share of this epoch's files read so far that were cached when read.", false, func(j readahead.JobStats) float64 { return j.HitRate }},
	{"dsmount_job_frontier_files", "Where the daemon believes the job is: the first unread position of its order.", false, func(j readahead.JobStats) float64 { return float64(j.Frontier) }},
	{"dsmount_job_prefetch_evicted_total", "Files fetched ahead of the job and evicted before it read them.", true, func(j readahead.JobStats) float64 { return float64(j.PrefetchEvicted) }},
	{"dsmount_job_prefetch_page_cached_total", "Files fetched ahead of the job that its readers then got from the kernel's page cache.", true, func(j readahead.JobStats) float64 { return float64(j.PrefetchUnseen) }},
	{"dsmount_job_admissions_refused_total", "Files of the job's prefetch window the cache would not evict for.", true, func(j readahead.JobStats) float64 { return float64(j.AdmissionsRefused) }},
	{"dsmount_job_evicted_in_window_total", "Files evicted while the job needed them within its prefetch window.", true, func(j readahead.JobStats) float64 { return float64(j.EvictedInWindow) }},
}

func newCollector(d *Daemon) *collector {
	c := &collector{d: d, descs: map[string]*prometheus.Desc{}, runtime: collectors.NewGoCollector()}
	for _, m := range cacheMetrics {
		c.descs[m.name] = prometheus.NewDesc(m.name, m.help, nil, nil)
	}
	for _, m := range mountMetrics {
		c.descs[m.name] = prometheus.NewDesc(m.name, m.help, []string{"mount"}, nil)
	}
	for _, m := range jobMetrics {
		c.descs[m.name] = prometheus.NewDesc(m.name, m.help, []string{"mount", "job", "uid"}, nil)
	}
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	c.runtime.Describe(ch)
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.runtime.Collect(ch)
	s := c.d.cache.Stats()
	for _, m := range cacheMetrics {
		kind := prometheus.GaugeValue
		if m.counter {
			kind = prometheus.CounterValue
		}
		c.emit(ch, m.name, kind, float64(m.value(s)))
	}
	for _, ms := range c.d.mountStats() {
		for _, m := range mountMetrics {
			c.emit(ch, m.name, prometheus.CounterValue, float64(m.value(ms)), ms.Mountpoint)
		}
		for _, j := range ms.Jobs {
			for _, m := range jobMetrics {
				kind := prometheus.GaugeValue
				if m.counter {
					kind = prometheus.CounterValue
				}
				c.emit(ch, m.name, kind, m.value(j), ms.Mountpoint, j.Name, strconv.FormatUint(uint64(j.UID), 10))
			}
		}
	}
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
	if err != nil {
		c.skipped.Do(func() {
			c.d.log.Warn("metrics: leaving out a series that can't be exported", "metric", name, "err", err)
		})
		return
	}
	ch <- m
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

func metricsHandler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

// MetricsListenAddr is where --metrics-addr says to listen: ":PORT" is
// 127.0.0.1:PORT, never every interface by omission.
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
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(d))
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
