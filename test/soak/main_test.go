package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags(nil)
	if err != nil || c.duration != 30*time.Minute || c.faultInterval != time.Minute || c.sample != 10*time.Second ||
		c.warmup != 3*time.Minute || c.out != "docs/soak" || !slices.Equal(c.faults, faultKinds) {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	c, err = parseFlags([]string{"--duration", "2m", "--fault-interval", "15s", "--faults", "kill, stall", "--rss-growth-pct", "10"})
	if err != nil || c.warmup != 20*time.Second || !slices.Equal(c.faults, []string{"kill", "stall"}) || c.bounds.RSS.Pct != 10 {
		t.Fatalf("2m: %+v, %v", c, err)
	}
	for _, bad := range [][]string{{"--faults", "flood"}, {"--duration", "0s"}, {"--files", "3"}, {"--jobs", "0"},
		{"--job-timeout", "1s"}, {"extra"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) succeeded", bad)
		}
	}
}

func TestBoundLimit(t *testing.T) {
	b := bound{Abs: 64 << 20, Pct: 25}
	if got := b.limit(100 << 20); got != 164<<20 {
		t.Errorf("limit(100 MiB) = %v, want 164 MiB (the 64 MiB floor)", got)
	}
	if got := b.limit(400 << 20); got != 500<<20 {
		t.Errorf("limit(400 MiB) = %v, want 500 MiB (+25%%)", got)
	}
}

// at is a time s seconds after base.
var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return base.Add(time.Duration(s * float64(time.Second))) }

func ev(kind string, from, to float64) event {
	return event{E: kind, Job: "j", Path: "p", Start: at(from).UnixNano(), End: at(to).UnixNano(), Err: "x"}
}

func TestJudge(t *testing.T) {
	windows := []window{
		{Kind: "stall", Start: at(10), End: at(30), Lift: at(29.9)},       // a quick lift
		{Kind: "latency", Start: at(100), End: at(125), Lift: at(110)},    // a slow lift: 15 s
		{Kind: "store-down", Start: at(200), End: at(210), Lift: at(210)}, // explains until 220
		{Kind: "cache-file", Start: at(300), End: at(300)},                // never explains
		{Kind: "kill", Start: at(400), End: at(405)},                      // until the remount
		{Kind: "kill", Start: at(500)},                                    // still open: until now
	}
	events := []event{
		ev("read-error", 15, 16),      // during a stall: not explained
		ev("read-error", 105, 106),    // latency in force: not explained
		ev("read-error", 111, 112),    // during the slow lift: explained
		ev("op-error", 130, 134),      // within the lift's grace
		ev("read-error", 199, 201),    // overlaps the store-down
		ev("declare-error", 219, 221), // within its grace
		ev("read-error", 221, 222),    // past it
		ev("read-error", 299, 301),    // a cache file tampered with: never
		ev("read-error", 403, 404),    // kill
		ev("read-error", 600, 601),    // the open kill
		ev("wrong", 403, 404),         // never
		ev("slow", 12, 14),            // during the stall
		ev("slow", 150, 152.5),        // healthy
	}
	j := judge(events, windows, at(1000))
	if j.Wrong != 1 || j.Explained != 6 || j.Unexplained != 4 {
		t.Fatalf("wrong %d, explained %d, unexplained %d; want 1, 6, 4\n%+v", j.Wrong, j.Explained, j.Unexplained, j)
	}
	var starts []float64
	for _, e := range j.UnexplainedFirst {
		starts = append(starts, time.Unix(0, e.Start).Sub(base).Seconds())
	}
	if !slices.Equal(starts, []float64{15, 105, 221, 299}) {
		t.Errorf("unexplained events start at %v", starts)
	}
	per := map[string]faultSummary{}
	for _, f := range j.PerFault {
		per[f.Kind] = f
	}
	if f := per["latency"]; f.LiftErrors != 2 || f.LiftMaxS != 15 {
		t.Errorf("latency: %+v; want 2 errors explained by its 15 s lift", f)
	}
	if f := per["store-down"]; f.ReadErrors != 1 || f.OtherErrors != 1 {
		t.Errorf("store-down: %+v", f)
	}
	if f := per["kill"]; f.Injected != 2 || f.ReadErrors != 2 {
		t.Errorf("kill: %+v", f)
	}
	if f := per["stall"]; f.SlowReads != 1 || f.MaxReadS != 2 || f.LiftErrors != 0 {
		t.Errorf("stall: %+v", f)
	}
	if j.HealthySlow != 1 || j.HealthyMaxS != 2.5 {
		t.Errorf("healthy slow reads %d, max %v; want 1, 2.5", j.HealthySlow, j.HealthyMaxS)
	}
	if kinds := []string{j.PerFault[0].Kind, j.PerFault[len(j.PerFault)-1].Kind}; kinds[0] != "stall" || kinds[1] != "kill" {
		t.Errorf("per-fault order %v", j.PerFault)
	}
}

// series of samples: t seconds, one daemon life per pid.
func samplesOf(pid int, from, to, step float64, rss func(t float64) int64) []sample {
	var out []sample
	for t := from; t <= to; t += step {
		out = append(out, sample{T: t, PID: pid, Up: true, RSS: rss(t), Goroutines: 300, FDs: 90})
	}
	return out
}

func TestGrowthChecks(t *testing.T) {
	flat := func(float64) int64 { return 200 << 20 }
	leak := func(t float64) int64 { return 200<<20 + int64(t)*(100<<10) } // 100 KiB/s: +180 MB in 30 min
	b := defaultBounds()

	// A flat daemon passes, over the run and over its life.
	g := growthChecks(samplesOf(1, 0, 1800, 10, flat), 3*time.Minute, b)
	if len(g) != 2*len(series) {
		t.Fatalf("%d checks, want %d (run and one life)", len(g), 2*len(series))
	}
	for _, c := range g {
		if !c.OK {
			t.Errorf("flat: %+v failed", c)
		}
	}
	// A leaking one fails its RSS check.
	g = growthChecks(samplesOf(1, 0, 1800, 10, leak), 3*time.Minute, b)
	if c := find(g, "rss_bytes", "run"); c.OK {
		t.Errorf("a leak of 100 KiB/s passed: %+v", c)
	}
	// Restarted every 6 minutes, the leak stays under the run's bound but
	// each life of 6 minutes is checked on its own; the samples while the
	// daemon is down are left out.
	var ss []sample
	for life := 0; life < 5; life++ {
		t0 := float64(life * 360)
		ss = append(ss, samplesOf(100+life, t0, t0+350, 10, func(t float64) int64 { return leak(t - t0) })...)
		ss = append(ss, sample{T: t0 + 355})
	}
	g = growthChecks(ss, 3*time.Minute, defaultBounds())
	lives := 0
	for _, c := range g {
		if strings.HasPrefix(c.Span, "daemon pid") && c.Series == "rss_bytes" {
			lives++
		}
	}
	if lives != 5 {
		t.Errorf("%d lives checked, want 5: %+v", lives, g)
	}
	// Too few samples: nothing to compare.
	if g := growthChecks(samplesOf(1, 0, 20, 10, flat), 10*time.Second, b); len(g) != 0 {
		t.Errorf("2 samples after the warm-up gave checks %+v", g)
	}
}

func find(gs []growth, series, span string) growth {
	for _, g := range gs {
		if g.Series == series && g.Span == span {
			return g
		}
	}
	return growth{}
}

func TestSumsAndReaderArgs(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sums")
	if err := os.WriteFile(p, []byte("12 0000abcd a/b c.bin\n0 00000000 empty.bin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sums, paths, err := loadSums(p)
	if err != nil || !slices.Equal(paths, []string{"a/b c.bin", "empty.bin"}) || sums["a/b c.bin"] != (sum{12, 0xabcd}) {
		t.Fatalf("loadSums = %v, %v, %v", sums, paths, err)
	}
	args := readerArgs(readerFlags{mp: "/m", bin: "/b", sums: p, job: "j", tmp: dir, epochs: 2, epoch0: 4, workers: 3, seed: 9, frac: 0.25, declare: true})
	if args[0] != "reader" || !slices.Contains(args, "--declare=true") || !slices.Contains(args, "--end=false") || !slices.Contains(args, "0.25") {
		t.Errorf("readerArgs = %q", args)
	}
}

func TestWriteCSV(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.csv")
	if err := writeCSV(p, []sample{{T: 10, Gen: 1, PID: 7, Up: true, RSS: 1 << 20, Faults: "stall+kill"}}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) != 2 || len(rows[1]) != len(csvColumns) || rows[1][5] != "1048576" || rows[1][len(csvColumns)-1] != "stall+kill" {
		t.Errorf("CSV = %q, %v", rows, err)
	}
}
