package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/test/testenv"
)

// TestStats reads the warm dataset through a fresh mount (cold), then through
// a remount on the same cache dir (every read a cache hit), and after each
// pass checks `dsmount stats --json` against what the test did and what
// MinIO served: reads > 0, bytes_read == the bytes read, misses on the cold
// pass and only hits on the hot one, bytes from cache + from backend ==
// bytes read, chunks fetched == MinIO's GETs, used > 0, capacity as set. It
// checks the human table (mountpoint, "hit rate"), and /metrics
// (--metrics-addr 127.0.0.1:PORT, then :PORT): 200, every documented metric
// present and equal to stats --json, listening on 127.0.0.1 only.
func TestStats(t *testing.T) {
	f := warmData(t)
	mp, cacheDir := t.TempDir(), t.TempDir()
	const capacity = 1 << 30
	source := "s3://" + warmBucket + "/" + warmPrefix
	ports, err := testenv.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	d := mountWarm(t, f, f.minio.Endpoint(), warmPrefix, mp, cacheDir, "--cache-size", "1G",
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", ports[0]))

	s0 := testenv.Stats(t, dsmountBin, mp)
	if s0.DaemonPid != d.Pid() || len(s0.Mounts) != 1 || s0.Mounts[0].Mountpoint != mp || s0.Mount.Mountpoint != mp || !strings.HasPrefix(s0.Mount.Source, source) {
		t.Errorf("stats of a fresh mount: %+v; want daemon_pid %d, one mount %s of %s[...]", s0, d.Pid(), mp, source)
	}
	if m := s0.Mount; m.Reads != 0 || m.BytesRead != 0 || m.Hits != 0 || m.Misses != 0 {
		t.Errorf("stats before any read: %+v; want no reads, hits or misses", m)
	}
	if s0.Cache.Capacity != capacity || s0.Cache.Used != 0 {
		t.Errorf("stats of a fresh cache: used %d, capacity %d; want 0, %d", s0.Cache.Used, s0.Cache.Capacity, capacity)
	}

	// Cold pass.
	g0 := f.gets(t)
	testenv.CompareTree(t, f.src, mp, f.paths, 8, 1)
	waitNoFetches(t, mp)
	g1 := f.gets(t)
	s1 := testenv.Stats(t, dsmountBin, mp)
	t.Logf("after a cold pass (%d GETs): %+v", g1-g0, s1)
	m, c := s1.Mount, s1.Cache
	if m.Files != len(f.paths) {
		t.Errorf("stats: mount files %d, the mount holds %d", m.Files, len(f.paths))
	}
	if m.Reads <= 0 || !onePass(m.BytesRead, f.total) || m.ReadErrors != 0 {
		t.Errorf("stats after reading every file once: reads %d, bytes_read %d, read_errors %d; want reads > 0, bytes_read %d (give or take a re-read page), no errors",
			m.Reads, m.BytesRead, m.ReadErrors, f.total)
	}
	if m.Misses <= 0 || m.Hits+m.Misses < f.chunks || m.BytesFromBackend <= 0 || m.BytesFromCache+m.BytesFromBackend != m.BytesRead {
		t.Errorf("stats after a cold pass: hits %d, misses %d, bytes from cache %d + from backend %d; want misses > 0, hits+misses >= %d chunks, bytes from backend > 0, the two byte counts summing to bytes_read %d",
			m.Hits, m.Misses, m.BytesFromCache, m.BytesFromBackend, f.chunks, m.BytesRead)
	}
	if !getsWithin(t, mp, g1-g0, c.ChunksFetched) || c.BytesFetched != f.total || c.FetchesInFlight != 0 {
		t.Errorf("stats: cache chunks_fetched %d, bytes_fetched %d, fetches_in_flight %d; MinIO served %d GETs, the dataset is %d bytes",
			c.ChunksFetched, c.BytesFetched, c.FetchesInFlight, g1-g0, f.total)
	}
	if c.Hits != m.Hits || c.Misses != m.Misses || c.BytesFromCache != m.BytesFromCache || c.BytesFromBackend != m.BytesFromBackend {
		t.Errorf("stats: with one mount the cache's hits/misses/bytes (%d/%d/%d/%d) should equal the mount's (%d/%d/%d/%d)",
			c.Hits, c.Misses, c.BytesFromCache, c.BytesFromBackend, m.Hits, m.Misses, m.BytesFromCache, m.BytesFromBackend)
	}
	if c.Used <= 0 || c.Used > capacity || c.Capacity != capacity || c.Evictions != 0 || c.Streamed != 0 {
		t.Errorf("stats: used %d, capacity %d, evictions %d, streamed %d; want 0 < used <= capacity = %d, no evictions, nothing streamed",
			c.Used, c.Capacity, c.Evictions, c.Streamed, capacity)
	}
	checkMetrics(t, fmt.Sprintf("127.0.0.1:%d", ports[0]), s1, true)

	// The human table.
	r := testenv.RunCLI(dsmountBin, nil, 30*time.Second, "stats", mp)
	if r.ExitCode != 0 || !strings.Contains(r.Stdout, mp) || !strings.Contains(strings.ToLower(r.Stdout), "hit rate") {
		t.Errorf("dsmount stats %s: exit %d; want exit 0 and a table naming the mountpoint and the hit rate:\n%s\nstderr: %s", mp, r.ExitCode, r.Stdout, r.Stderr)
	}
	t.Logf("dsmount stats:\n%s", r.Stdout)
	d.NoErrorLogs()
	d.Stop()

	// Hot pass through a remount: the kernel's page cache is gone with the
	// old mount, so every read reaches the daemon and hits its cache.
	d = mountWarm(t, f, f.minio.Endpoint(), warmPrefix, mp, cacheDir, "--cache-size", "1G",
		"--metrics-addr", fmt.Sprintf(":%d", ports[1]))
	testenv.CompareTree(t, f.src, mp, f.paths, 8, 2)
	g2 := f.gets(t)
	if g2 != g1 {
		t.Errorf("the pass over a remount on a full cache made %d GETs", g2-g1)
	}
	s2 := testenv.Stats(t, dsmountBin, mp)
	t.Logf("after a hot pass: %+v", s2)
	m, c = s2.Mount, s2.Cache
	if m.Reads <= 0 || !onePass(m.BytesRead, f.total) || m.Hits <= 0 || m.Misses != 0 || m.BytesFromBackend != 0 || m.BytesFromCache != m.BytesRead {
		t.Errorf("stats after a pass served from the cache: reads %d, bytes_read %d, hits %d, misses %d, from cache %d, from backend %d; want bytes_read = from cache = %d (give or take a re-read page), hits > 0, no misses, nothing from the backend",
			m.Reads, m.BytesRead, m.Hits, m.Misses, m.BytesFromCache, m.BytesFromBackend, f.total)
	}
	if c.ChunksFetched != 0 || c.BytesFetched != 0 || c.Used <= 0 || c.Capacity != capacity || c.Hits != m.Hits {
		t.Errorf("stats: cache chunks_fetched %d, bytes_fetched %d, used %d, capacity %d, hits %d; want nothing fetched, used > 0 (kept across the remount), capacity %d, hits = the mount's %d",
			c.ChunksFetched, c.BytesFetched, c.Used, c.Capacity, c.Hits, capacity, m.Hits)
	}
	if c.Used != s1.Cache.Used {
		t.Errorf("cache used %d after the remount, %d before", c.Used, s1.Cache.Used)
	}
	checkMetrics(t, fmt.Sprintf("127.0.0.1:%d", ports[1]), s2, false)
	d.NoErrorLogs()
	d.Stop()
}

// checkMetrics scrapes http://addr/metrics (parsed with the Prometheus
// client's parser) and wants 200; every figure `stats --json` gave (s,
// taken with no reads or fetches since) under its Prometheus name and
// type, exactly once, with the same value; the reads' latency histogram
// holding the mount's reads, and, after a cold pass (cold), the S3 GET
// histograms holding GETs, with an errors and a retries counter per kind;
// dsmount_build_info; the process's and the Go runtime's series; no series
// of the names before issue 27; and the listener bound to 127.0.0.1 only.
func checkMetrics(t *testing.T, addr string, s control.StatsReport, cold bool) {
	t.Helper()
	url := "http://" + addr + "/metrics"
	code, fams, err := testenv.ScrapeFamilies(url)
	if err != nil || code != 200 {
		t.Errorf("GET %s: status %d, %v", url, code, err)
		return
	}
	// find returns the series of name whose labels include want (pairs),
	// failing unless the family has the type.
	find := func(name string, typ dto.MetricType, want ...string) []*dto.Metric {
		t.Helper()
		f, ok := fams[name]
		if !ok {
			t.Errorf("%s: no %s", url, name)
			return nil
		}
		if f.GetType() != typ {
			t.Errorf("%s: %s is a %v, want a %v", url, name, f.GetType(), typ)
		}
		var out []*dto.Metric
	next:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(want); i += 2 {
				if labels[want[i]] != want[i+1] {
					continue next
				}
			}
			out = append(out, m)
		}
		return out
	}
	value := func(m *dto.Metric) float64 {
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	type series struct {
		name   string
		typ    dto.MetricType
		labels []string
		want   int64
	}
	c := s.Cache
	all := []series{
		{"dsmount_cache_reads_total", dto.MetricType_COUNTER, []string{"from", "cache"}, c.Hits},
		{"dsmount_cache_reads_total", dto.MetricType_COUNTER, []string{"from", "backend"}, c.Misses},
		{"dsmount_cache_read_bytes_total", dto.MetricType_COUNTER, []string{"from", "cache"}, c.BytesFromCache},
		{"dsmount_cache_read_bytes_total", dto.MetricType_COUNTER, []string{"from", "backend"}, c.BytesFromBackend},
		{"dsmount_backend_fetched_bytes_total", dto.MetricType_COUNTER, nil, c.BytesFetched},
		{"dsmount_backend_fetched_chunks_total", dto.MetricType_COUNTER, nil, c.ChunksFetched},
		{"dsmount_backend_fetches_in_flight", dto.MetricType_GAUGE, nil, c.FetchesInFlight},
		{"dsmount_cache_used_bytes", dto.MetricType_GAUGE, nil, c.Used},
		{"dsmount_cache_capacity_bytes", dto.MetricType_GAUGE, nil, c.Capacity},
	}
	for _, m := range s.Mounts {
		mp := []string{"mount", m.Mountpoint}
		all = append(all,
			series{"dsmount_mount_reads_total", dto.MetricType_COUNTER, mp, m.Reads},
			series{"dsmount_mount_read_bytes_total", dto.MetricType_COUNTER, mp, m.BytesRead},
			series{"dsmount_mount_cache_reads_total", dto.MetricType_COUNTER, append(mp, "from", "cache"), m.Hits},
			series{"dsmount_mount_cache_reads_total", dto.MetricType_COUNTER, append(mp, "from", "backend"), m.Misses},
			series{"dsmount_mount_cache_read_bytes_total", dto.MetricType_COUNTER, append(mp, "from", "cache"), m.BytesFromCache},
			series{"dsmount_mount_cache_read_bytes_total", dto.MetricType_COUNTER, append(mp, "from", "backend"), m.BytesFromBackend},
			series{"dsmount_backend_get_requests_total", dto.MetricType_COUNTER, mp, m.Backend.Gets},
		)
	}
	for _, x := range all {
		got := find(x.name, x.typ, x.labels...)
		if len(got) != 1 || value(got[0]) != float64(x.want) {
			var vs []float64
			for _, m := range got {
				vs = append(vs, value(m))
			}
			t.Errorf("%s: %s%v = %v; stats --json says %d", url, x.name, x.labels, vs, x.want)
		}
	}
	for _, m := range s.Mounts {
		reads := find("dsmount_mount_read_duration_seconds", dto.MetricType_HISTOGRAM, "mount", m.Mountpoint)
		if len(reads) != 1 || reads[0].GetHistogram().GetSampleCount() < uint64(m.Reads) || m.Reads == 0 {
			t.Errorf("%s: dsmount_mount_read_duration_seconds{mount=%q} = %v; want one series holding the mount's %d reads (the read of the control entry's stats may add some)", url, m.Mountpoint, reads, m.Reads)
		}
		for _, name := range []string{"dsmount_backend_get_first_byte_seconds", "dsmount_backend_get_duration_seconds"} {
			h := find(name, dto.MetricType_HISTOGRAM, "mount", m.Mountpoint)
			switch {
			case len(h) != 1:
				t.Errorf("%s: %s{mount=%q}: %d series, want 1", url, name, m.Mountpoint, len(h))
			case cold && h[0].GetHistogram().GetSampleCount() == 0:
				t.Errorf("%s: %s{mount=%q} holds no GET after a cold pass (%d GETs)", url, name, m.Mountpoint, m.Backend.Gets)
			case !cold && h[0].GetHistogram().GetSampleCount() != 0:
				t.Errorf("%s: %s{mount=%q} holds %d GETs after a pass served from the cache", url, name, m.Mountpoint, h[0].GetHistogram().GetSampleCount())
			}
		}
		for _, name := range []string{"dsmount_backend_errors_total", "dsmount_backend_retries_total"} {
			for _, kind := range []string{"throttled", "timeout", "other"} {
				if got := find(name, dto.MetricType_COUNTER, "mount", m.Mountpoint, "kind", kind); len(got) != 1 {
					t.Errorf("%s: %s{mount=%q,kind=%q}: %d series, want 1", url, name, m.Mountpoint, kind, len(got))
				}
			}
		}
	}
	if info := find("dsmount_build_info", dto.MetricType_GAUGE); len(info) != 1 || value(info[0]) != 1 {
		t.Errorf("%s: dsmount_build_info = %v; want one series of 1", url, info)
	} else {
		labels := map[string]string{}
		for _, l := range info[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["version"] == "" || !strings.HasPrefix(labels["goversion"], "go") {
			t.Errorf("%s: dsmount_build_info labels %v; want a version and a goversion", url, labels)
		}
	}
	for name, typ := range map[string]dto.MetricType{"process_resident_memory_bytes": dto.MetricType_GAUGE, "process_cpu_seconds_total": dto.MetricType_COUNTER,
		"process_open_fds": dto.MetricType_GAUGE, "go_goroutines": dto.MetricType_GAUGE} {
		if len(find(name, typ)) != 1 {
			t.Errorf("%s: want one series of %s", url, name)
		}
	}
	for _, old := range []string{"dsmount_cache_hits_total", "dsmount_cache_misses_total", "dsmount_cache_bytes_from_cache_total", "dsmount_cache_bytes_from_backend_total",
		"dsmount_backend_bytes_fetched_total", "dsmount_backend_chunks_fetched_total", "dsmount_fetches_in_flight", "dsmount_staged_pushed_out_total",
		"dsmount_mount_bytes_read_total", "dsmount_mount_hits_total", "dsmount_mount_misses_total", "dsmount_job_stall_seconds_total", "dsmount_job_stalls_total"} {
		if _, ok := fams[old]; ok {
			t.Errorf("%s: %s is still exported (renamed: docs/metrics.md)", url, old)
		}
	}
	_, portStr, _ := strings.Cut(addr, ":")
	var port int
	fmt.Sscan(portStr, &port)
	ips, err := testenv.TCPListenAddrs(port)
	if err != nil || len(ips) != 1 || ips[0] != "127.0.0.1" {
		t.Errorf("sockets listening on port %d: %q (%v); want 127.0.0.1 only", port, ips, err)
	}
}
