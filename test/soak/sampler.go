package main

import (
	"context"
	"path/filepath"
	"sync"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// sample is the daemon's state at one moment.
type sample struct {
	T              float64   `json:"t"` // seconds since the work loop started
	Time           time.Time `json:"time"`
	Gen            int       `json:"generation"` // which daemon (1 = the first; each kill -9 starts the next)
	PID            int       `json:"pid"`
	Up             bool      `json:"up"` // the daemon was running and answered /metrics
	RSS            int64     `json:"rss_bytes"`
	Heap           int64     `json:"go_heap_bytes"` // go_memstats_heap_inuse_bytes
	FDs            int       `json:"fds"`
	Badger         int64     `json:"badger_bytes"` // cache-dir/index
	Cache          int64     `json:"cache_bytes"`  // cache-dir/data and packs
	Goroutines     int       `json:"goroutines"`
	Threads        int       `json:"threads"`
	Jobs           int       `json:"jobs"` // declared jobs the daemon holds, all mounts
	Used           int64     `json:"cache_used_bytes"`
	VerifyFailures int64     `json:"verify_failures"` // this daemon's, so far
	ReadErrors     int64     `json:"read_errors"`     // the mount's, since it was last mounted
	Verified       int64     `json:"verified_reads"`  // by the readers, whole run, so far
	Faults         string    `json:"faults"`          // in force
}

// sampler samples the daemon every interval.
type sampler struct {
	r     *rig
	led   *ledger
	inj   *injector
	start time.Time

	mu      sync.Mutex
	samples []sample
}

func (sm *sampler) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	sm.take()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			sm.take()
		}
	}
}

// take records one sample.
func (sm *sampler) take() {
	now := time.Now()
	d, gen := sm.r.current()
	s := sample{T: now.Sub(sm.start).Seconds(), Time: now, Gen: gen, Verified: sm.led.totals().Files, Faults: sm.inj.active()}
	if d != nil && !d.Exited() {
		s.PID = d.Pid()
		s.Up = sm.fill(&s)
	}
	sm.mu.Lock()
	sm.samples = append(sm.samples, s)
	sm.mu.Unlock()
}

// fill reads the daemon's figures into s; false if any could not be read
// (it died meanwhile).
func (sm *sampler) fill(s *sample) bool {
	var err error
	if s.RSS, err = testenv.ProcRSS(s.PID); err != nil {
		return false
	}
	if s.FDs, err = testenv.ProcFDCount(s.PID); err != nil {
		return false
	}
	code, m, err := testenv.ScrapeMetrics("http://" + sm.r.metricsAddr + "/metrics")
	if err != nil || code != 200 {
		return false
	}
	get := func(name string) float64 { v, _ := testenv.PromFind(m, name); return v }
	s.Goroutines = int(get("go_goroutines"))
	s.Threads = int(get("go_threads"))
	s.Heap = int64(get("go_memstats_heap_inuse_bytes"))
	s.Used = int64(get("dsmount_cache_used_bytes"))
	s.VerifyFailures = int64(get("dsmount_cache_verify_failures_total"))
	for _, p := range m {
		switch p.Name {
		case "dsmount_mount_read_errors_total":
			s.ReadErrors += int64(p.Value)
		case "dsmount_job_epoch":
			s.Jobs++
		}
	}
	s.Badger, _ = testenv.DirUsage(filepath.Join(sm.r.cacheDir, "index"))
	data, _ := testenv.DirUsage(filepath.Join(sm.r.cacheDir, "data"))
	packs, _ := testenv.DirUsage(filepath.Join(sm.r.cacheDir, "packs"))
	s.Cache = data + packs
	return true
}

func (sm *sampler) all() []sample {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return append([]sample(nil), sm.samples...)
}
