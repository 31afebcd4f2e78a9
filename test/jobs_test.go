package test

import (
	"testing"

	"github.com/dsmount/dsmount/internal/control"
)

// TestDeclaredJobsShareTheCacheBetterThanFillAndHold runs the cheap case
// of `go run ./bench jobs` in the suite: two jobs (reader processes of 4
// goroutines, each its own shuffle, declaring each epoch's order and the
// next with --pid, as the Python sampler does) read 2,000 files from MinIO
// through one mount whose cache holds a quarter of them, the readers' page
// cache bounded by a memory cgroup; then the same with fill-and-hold and
// no declarations. The order policy's hit rate (1 - GETs / reads) must
// beat fill-and-hold's clearly and come near the offline oracle (Belady
// over the reads the jobs made). Measured when written (2026-11-25, this
// VM): order 0.44-0.45, fill-and-hold 0.26-0.27, oracle 0.50.
func TestDeclaredJobsShareTheCacheBetterThanFillAndHold(t *testing.T) {
	out := runBench(t, "jobs", "--files", "2000", "--jobs", "2", "--fractions", "0.25", "--bounded", "on", "--page-cache", "30000000",
		"--policies", "order,fill-and-hold", "--epochs", "2", "--latency", "5", "--jitter", "0", "--json")
	var results []struct {
		Policy  string             `json:"policy"`
		HitRate []float64          `json:"hit_rate"`
		Oracle  []float64          `json:"oracle"`
		Daemon  []control.JobStats `json:"daemon"`
		Error   string             `json:"error"`
	}
	benchJSON(t, out, &results)
	by := map[string][]float64{}
	var oracle []float64
	for _, r := range results {
		if r.Error != "" {
			t.Fatalf("%s: %s\n%s", r.Policy, r.Error, out)
		}
		by[r.Policy] = r.HitRate
		oracle = r.Oracle
		if r.Policy != "order" {
			continue
		}
		// What dsmount stats shows of each job: where the daemon believes
		// it is (at the end of its last epoch: nearly every position read;
		// the frontier past the middle, since it trails by the learnt lag
		// and a file the page cache served may never reach the daemon; a
		// job whose reads went astray stood near its start), its hit rate
		// and stall time. Up to a lag's worth of positions past the
		// frontier stay unread at the end: files the daemon pushed into the
		// page cache are read there, and no later read moves the frontier
		// over them (1,945-1,958 of 2,000 read in a quarter of the runs).
		if len(r.Daemon) != 2 {
			t.Errorf("the daemon's jobs after the order run: %+v, want 2", r.Daemon)
		}
		for _, j := range r.Daemon {
			if j.Frontier < j.Declared/2 || j.Read < j.Declared*95/100 || j.HitRate <= 0 || j.HitRate > 1 || j.StallSeconds <= 0 {
				t.Errorf("job %s after its last epoch: frontier %d, read %d of %d, hit rate %.3f, stalled %.1fs; want the frontier past half, 95%% read, a hit rate in (0, 1], some stall time",
					j.Name, j.Frontier, j.Read, j.Declared, j.HitRate, j.StallSeconds)
			}
		}
	}
	order, fah := mean(by["order"]), mean(by["fill-and-hold"])
	t.Logf("hit rate over 2 epochs: order %.3f, fill-and-hold %.3f, oracle %.3f", order, fah, mean(oracle))
	if len(by["order"]) == 0 || len(by["fill-and-hold"]) == 0 {
		t.Fatalf("no results:\n%s", out)
	}
	if order < 1.3*fah {
		t.Errorf("two declared jobs hit %.3f, fill-and-hold %.3f: want at least 1.3x", order, fah)
	}
	if order < 0.75*mean(oracle) {
		t.Errorf("two declared jobs hit %.3f, the oracle %.3f: want at least 0.75 of it", order, mean(oracle))
	}
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
