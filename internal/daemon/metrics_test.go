package daemon

import (
	"context"
	"log/slog"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/internal/version"
	"github.com/dsmount/dsmount/readahead"
)

// observedStore is a store in memory that takes a request observer, as
// backend/s3 does.
type observedStore struct {
	*memory.Backend
	mu  sync.Mutex
	obs backend.RequestObserver
}

func (s *observedStore) ObserveRequests(o backend.RequestObserver) {
	s.mu.Lock()
	s.obs = o
	s.mu.Unlock()
}

func (s *observedStore) observer() backend.RequestObserver {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.obs
}

// gather returns the daemon's families by name, gathered by a pedantic
// registry: one that checks every series against its description.
func gather(t *testing.T, d *Daemon) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	registerMetrics(reg, d)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// labelsOf shows a series' labels as "k=v,k=v", sorted.
func labelsOf(m *dto.Metric) string {
	var kv []string
	for _, l := range m.GetLabel() {
		kv = append(kv, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

// TestMetricsSeries: the daemon's registry exports every series under its
// Prometheus name and type, with its labels: the cache's, by source
// (from); each mount's (mount), its reads' latency histogram, and for a
// store that reports its requests the GET histograms and the error and
// retry counters by kind; dsmount_build_info; the Go runtime's and the
// process's. A store that does not report its requests has no backend
// series.
func TestMetricsSeries(t *testing.T) {
	st := &observedStore{Backend: memory.New()}
	st.Put("a.bin", []byte("a"))
	plain := memory.New()
	plain.Put("b.bin", []byte("b"))
	r := newRig(t, func(c *Config) {
		c.MetricsAddr = "127.0.0.1:0" // live series are made only where they are served
		c.OpenBackend = func(ctx context.Context, req control.MountRequest, log *slog.Logger) (backend.Backend, error) {
			if strings.HasSuffix(req.Mountpoint, "observed") {
				return st, nil
			}
			return plain, nil
		}
	})
	mpObs, mpPlain := r.mountpoint("observed"), r.mountpoint("plain")
	for _, mp := range []string{mpObs, mpPlain} {
		if _, err := r.d.AddMount(context.Background(), control.MountRequest{Source: "/data", Mountpoint: mp}); err != nil {
			t.Fatal(err)
		}
	}
	obs := st.observer()
	if obs == nil {
		t.Fatal("the mount did not install an observer in its store")
	}
	obs.GetDone(3*time.Millisecond, 20*time.Millisecond)
	obs.GetFailed(backend.FailureThrottled)
	obs.Retried(backend.FailureThrottled)
	obs.GetFailed(backend.FailureTimeout)
	r.d.mu.Lock()
	r.d.mounts[mpObs].metrics.read.Observe(0.0002)
	r.d.mu.Unlock()

	fams := gather(t, r.d)
	want := map[string]dto.MetricType{
		"dsmount_cache_reads_total":              dto.MetricType_COUNTER,
		"dsmount_cache_read_bytes_total":         dto.MetricType_COUNTER,
		"dsmount_backend_fetched_bytes_total":    dto.MetricType_COUNTER,
		"dsmount_backend_fetches_in_flight":      dto.MetricType_GAUGE,
		"dsmount_cache_used_bytes":               dto.MetricType_GAUGE,
		"dsmount_cache_staged_pushed_out_total":  dto.MetricType_COUNTER,
		"dsmount_mount_reads_total":              dto.MetricType_COUNTER,
		"dsmount_mount_read_bytes_total":         dto.MetricType_COUNTER,
		"dsmount_mount_cache_reads_total":        dto.MetricType_COUNTER,
		"dsmount_mount_cache_read_bytes_total":   dto.MetricType_COUNTER,
		"dsmount_mount_read_duration_seconds":    dto.MetricType_HISTOGRAM,
		"dsmount_backend_get_first_byte_seconds": dto.MetricType_HISTOGRAM,
		"dsmount_backend_get_duration_seconds":   dto.MetricType_HISTOGRAM,
		"dsmount_backend_errors_total":           dto.MetricType_COUNTER,
		"dsmount_backend_retries_total":          dto.MetricType_COUNTER,
		"dsmount_backend_get_requests_total":     dto.MetricType_COUNTER,
		"dsmount_build_info":                     dto.MetricType_GAUGE,
		"go_goroutines":                          dto.MetricType_GAUGE,
		"process_resident_memory_bytes":          dto.MetricType_GAUGE,
		"process_cpu_seconds_total":              dto.MetricType_COUNTER,
	}
	for name, typ := range want {
		f, ok := fams[name]
		if !ok {
			t.Errorf("%s: not exported", name)
			continue
		}
		if f.GetType() != typ {
			t.Errorf("%s: type %v, want %v", name, f.GetType(), typ)
		}
	}
	series := func(name string) map[string]*dto.Metric {
		out := map[string]*dto.Metric{}
		for _, m := range fams[name].GetMetric() {
			out[labelsOf(m)] = m
		}
		return out
	}
	for _, name := range []string{"dsmount_cache_reads_total", "dsmount_cache_read_bytes_total"} {
		if got := series(name); len(got) != 2 || got["from=cache"] == nil || got["from=backend"] == nil {
			t.Errorf("%s: series %v; want from=cache and from=backend", name, keys(got))
		}
	}
	if got := series("dsmount_mount_cache_reads_total"); len(got) != 4 || got["from=backend,mount="+mpObs] == nil {
		t.Errorf("dsmount_mount_cache_reads_total: series %v; want from=cache|backend for each of the 2 mounts", keys(got))
	}
	reads := series("dsmount_mount_read_duration_seconds")
	if len(reads) != 2 || reads["mount="+mpObs].GetHistogram().GetSampleCount() != 1 || reads["mount="+mpPlain].GetHistogram().GetSampleCount() != 0 {
		t.Errorf("dsmount_mount_read_duration_seconds: %v; want one series per mount, the observed one's holding the one read", reads)
	}
	// Backend series: the observed store's mount only.
	for _, name := range []string{"dsmount_backend_get_first_byte_seconds", "dsmount_backend_get_duration_seconds", "dsmount_backend_get_requests_total"} {
		if got := series(name); len(got) != 1 || got["mount="+mpObs] == nil {
			t.Errorf("%s: series %v; want the observed store's mount alone", name, keys(got))
		}
	}
	if h := series("dsmount_backend_get_first_byte_seconds")["mount="+mpObs].GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() != 0.003 {
		t.Errorf("first byte histogram: %v; want the one GET's 3 ms", h)
	}
	if h := series("dsmount_backend_get_duration_seconds")["mount="+mpObs].GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() != 0.02 {
		t.Errorf("GET duration histogram: %v; want the one GET's 20 ms", h)
	}
	for name, want := range map[string]map[string]float64{
		"dsmount_backend_errors_total":  {"throttled": 1, "timeout": 1, "other": 0},
		"dsmount_backend_retries_total": {"throttled": 1, "timeout": 0, "other": 0},
	} {
		got := series(name)
		for kind, v := range want {
			m := got["kind="+kind+",mount="+mpObs]
			if m == nil || m.GetCounter().GetValue() != v {
				t.Errorf("%s{kind=%q}: %v; want %v (series %v)", name, kind, m, v, keys(got))
			}
		}
		if len(got) != 3 {
			t.Errorf("%s: %d series %v; want one per kind", name, len(got), keys(got))
		}
	}
	info := fams["dsmount_build_info"].GetMetric()
	if len(info) != 1 || info[0].GetGauge().GetValue() != 1 || labelsOf(info[0]) != "goversion="+runtime.Version()+",version="+version.String() {
		t.Errorf("dsmount_build_info: %v; want 1 with version %q and goversion %q", info, version.String(), runtime.Version())
	}
	// No series left of the names before issue 27.
	for _, old := range []string{"dsmount_cache_hits_total", "dsmount_cache_bytes_from_cache_total", "dsmount_backend_bytes_fetched_total",
		"dsmount_fetches_in_flight", "dsmount_mount_bytes_read_total", "dsmount_mount_hits_total", "dsmount_staged_pushed_out_total"} {
		if _, ok := fams[old]; ok {
			t.Errorf("%s: still exported", old)
		}
	}

	// A mount that goes takes its series with it.
	r.servedAt(mpPlain).takeAway()
	r.servedAt(mpPlain).end()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got := gather(t, r.d); len(got["dsmount_mount_read_duration_seconds"].GetMetric()) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the unmounted mount's read histogram is still exported")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func keys(m map[string]*dto.Metric) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestJobStallHistogram: a job's stall buckets come out cumulative, with
// its stall seconds as the sum and its stalls as the count.
func TestJobStallHistogram(t *testing.T) {
	c := newCollector(&Daemon{log: slog.New(slog.DiscardHandler)})
	j := readahead.JobStats{Name: "job"}
	j.StallHistogram.Counts[0] = 2                           // <= 1 ms
	j.StallHistogram.Counts[3] = 1                           // <= 10 ms
	j.StallHistogram.Counts[len(readahead.StallBuckets)] = 1 // > 30 s
	j.StallSeconds = 31.5
	ch := make(chan prometheus.Metric, 1)
	c.emitStalls(ch, j, "/mnt/\xff", "1000")
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		t.Fatal(err)
	}
	h := m.GetHistogram()
	if h.GetSampleCount() != 4 || h.GetSampleSum() != 31.5 {
		t.Errorf("count %d, sum %v; want 4, 31.5", h.GetSampleCount(), h.GetSampleSum())
	}
	want := map[float64]uint64{0.001: 2, 0.0025: 2, 0.005: 2, 0.01: 3, 30: 3}
	for _, b := range h.GetBucket() {
		if w, ok := want[b.GetUpperBound()]; ok && b.GetCumulativeCount() != w {
			t.Errorf("bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), w)
		}
	}
	if got := labelsOf(&m); got != `job=job,mount=/mnt/\xff,uid=1000` {
		t.Errorf("labels %s", got)
	}
}
