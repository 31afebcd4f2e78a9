package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

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
	if s0.DaemonPID != d.Pid() || len(s0.Mounts) != 1 || s0.Mounts[0].Mountpoint != mp || s0.Mount.Mountpoint != mp || !strings.HasPrefix(s0.Mount.Source, source) {
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
	if m.Files != int64(len(f.paths)) {
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
	checkMetrics(t, fmt.Sprintf("127.0.0.1:%d", ports[0]), s1)

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
	checkMetrics(t, fmt.Sprintf("127.0.0.1:%d", ports[1]), s2)
	d.NoErrorLogs()
	d.Stop()
}

// checkMetrics scrapes http://addr/metrics and wants 200, every documented
// metric exactly once with the value `stats --json` gave (s, taken with no
// reads or fetches since), and the listener bound to 127.0.0.1 only.
func checkMetrics(t *testing.T, addr string, s testenv.DaemonStats) {
	t.Helper()
	url := "http://" + addr + "/metrics"
	code, samples, err := testenv.ScrapeMetrics(url)
	if err != nil || code != 200 {
		t.Errorf("GET %s: status %d, %v", url, code, err)
		return
	}
	c := s.Cache
	for name, want := range map[string]int64{
		"dsmount_cache_hits_total":               c.Hits,
		"dsmount_cache_misses_total":             c.Misses,
		"dsmount_cache_bytes_from_cache_total":   c.BytesFromCache,
		"dsmount_cache_bytes_from_backend_total": c.BytesFromBackend,
		"dsmount_backend_bytes_fetched_total":    c.BytesFetched,
		"dsmount_fetches_in_flight":              c.FetchesInFlight,
		"dsmount_cache_used_bytes":               c.Used,
		"dsmount_cache_capacity_bytes":           c.Capacity,
	} {
		v, n := testenv.PromFind(samples, name)
		if n != 1 || v != float64(want) {
			t.Errorf("%s: %s = %v (%d series); stats --json says %d", url, name, v, n, want)
		}
	}
	for _, m := range s.Mounts {
		for name, want := range map[string]int64{
			"dsmount_mount_reads_total":      m.Reads,
			"dsmount_mount_bytes_read_total": m.BytesRead,
			"dsmount_mount_hits_total":       m.Hits,
			"dsmount_mount_misses_total":     m.Misses,
		} {
			v, n := testenv.PromFind(samples, name, "mount", m.Mountpoint)
			if n != 1 || v != float64(want) {
				t.Errorf("%s: %s{mount=%q} = %v (%d series); stats --json says %d", url, name, m.Mountpoint, v, n, want)
			}
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
