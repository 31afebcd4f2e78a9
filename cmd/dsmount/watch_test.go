package main

import (
	"testing"
	"time"

	"github.com/dsmount/dsmount/internal/control"
)

// TestWatchRates: the rates over an interval are the differences of the
// mount's counts over its length, the hit rate that of the interval's
// reads alone; before a second report, and across a daemon's restart,
// there are none.
func TestWatchRates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	report := func(pid int, reads, bytes, hits, misses, fetched int64) control.StatsReport {
		return control.StatsReport{DaemonPid: pid,
			Mount: control.MountStats{Mountpoint: "/mnt/d", Reads: reads, BytesRead: bytes, SourceStats: control.SourceStats{Hits: hits, Misses: misses}},
			Cache: control.CacheStats{BytesFetched: fetched, FetchesInFlight: 3, Used: 1 << 30, Capacity: 4 << 30}}
	}
	a := watchSample{at: t0, r: report(7, 100, 1e6, 90, 10, 5e6)}
	b := watchSample{at: t0.Add(2 * time.Second), r: report(7, 3100, 401e6, 1080, 20, 13e6)}
	for _, c := range []struct {
		prev *watchSample
		cur  watchSample
		want string
	}{
		{nil, a, "/mnt/d: - reads/s, - MB/s read, hit rate -; daemon: - MB/s fetched, 3 fetches in flight, cache 1.0 GiB/4.0 GiB"},
		{&a, b, "/mnt/d: 1500 reads/s, 200.0 MB/s read, hit rate 99.0%; daemon: 4.0 MB/s fetched, 3 fetches in flight, cache 1.0 GiB/4.0 GiB"},
		{&b, watchSample{at: b.at.Add(time.Second), r: report(8, 5, 5, 5, 0, 0)}, "/mnt/d: - reads/s, - MB/s read, hit rate -; daemon: - MB/s fetched, 3 fetches in flight, cache 1.0 GiB/4.0 GiB"},
		{&a, watchSample{at: a.at.Add(time.Second), r: a.r}, "/mnt/d: 0 reads/s, 0.0 MB/s read, hit rate -; daemon: 0.0 MB/s fetched, 3 fetches in flight, cache 1.0 GiB/4.0 GiB"},
	} {
		if got := watchRates(c.prev, c.cur); got != c.want {
			t.Errorf("watchRates\n got %q\nwant %q", got, c.want)
		}
	}
}
