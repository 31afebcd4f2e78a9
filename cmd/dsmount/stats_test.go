package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/internal/daemon"
)

// TestStatsShowEachJob: dsmount stats shows per job where the daemon
// believes it is, its hit rate this epoch, its stall time and the
// policy's trace, and what the policy knows of the page cache.
func TestStatsShowEachJob(t *testing.T) {
	r := control.StatsReport{
		Mounts: []control.MountStats{{Mountpoint: "/mnt/data", Jobs: []control.JobStats{{
			Name: "resnet", UID: 1000, Epoch: 3, Declared: 10000, Frontier: 4242, HitRate: 0.625, StallSeconds: 12.5,
			PrefetchEvicted: 7, PrefetchUnseen: 8, AdmissionsRefused: 9, EvictedInWindow: 11,
		}}}},
		Cache:     control.CacheStats{Policy: daemon.PolicyOrder},
		PageCache: control.PageCache{Samples: 10, Same: control.Horizon{Seconds: 4.2}, Earlier: control.Horizon{Seconds: 1.5}},
	}
	var out bytes.Buffer
	printStats(&out, r)
	var header, row string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "JOB ") {
			header = line
		}
		if strings.HasPrefix(line, "resnet ") {
			row = line
		}
	}
	if row == "" {
		t.Fatalf("no row for the job:\n%s", out.String())
	}
	for _, col := range []string{"AT", "HIT RATE", "STALLED", "EVICTED UNREAD", "PAGE-CACHED UNREAD", "REFUSED", "EVICTED NEEDED"} {
		if !strings.Contains(header, col) {
			t.Errorf("header lacks %s: %q", col, header)
		}
	}
	fields := strings.Fields(row)
	want := []string{"resnet", "1000", "/mnt/data", "3", "4242/10000", "62.5%", "12.5s"}
	if len(fields) < len(want) {
		t.Fatalf("row %q, want it to start with %q", row, want)
	}
	for i, w := range want {
		if fields[i] != w {
			t.Errorf("row field %d = %q, want %q (row %q)", i, fields[i], w, row)
		}
	}
	// After WINDOW, READS/S, PREFETCHED, PREFETCH HITS: the trace.
	if len(fields) < 16 || strings.Join(fields[11:15], " ") != "7 8 9 11" {
		t.Errorf("row %q: want the trace counts 7 8 9 11 in fields 11-14", row)
	}
	if !strings.Contains(out.String(), "page cache: holds a file read this epoch for about 4.2s, one read before for about 1.5s") {
		t.Errorf("no page cache line:\n%s", out.String())
	}
}
