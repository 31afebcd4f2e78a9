package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// result is everything a run found; it is written as OUT.json.
type result struct {
	Config     map[string]any `json:"config"`
	Dataset    datasetInfo    `json:"dataset"`
	Started    time.Time      `json:"started"`
	Loop       float64        `json:"loop_seconds"` // the work loop and the final pass
	Activities map[string]int `json:"activities"`
	Abandoned  []abandoned    `json:"abandoned_jobs"`
	Reads      totals         `json:"reads"`
	Judgement  judgement      `json:"judgement"`
	Daemon     daemonFigures  `json:"daemon"`
	DaemonLog  map[string]int `json:"daemon_log_records"`
	Growth     []growth       `json:"growth"`
	// RemountRaces are the seconds each remount waited for the daemon to
	// let the mountpoint in again after the unmount (rig.mount).
	RemountRaces []float64 `json:"remount_races_s"`
	// ProxyRestarts counts the toxiproxy servers replaced because one
	// wedged undoing a fault (proxyctl.go).
	ProxyRestarts int      `json:"toxiproxy_restarts"`
	Faults        []window `json:"faults"`
	Samples       []sample `json:"samples"`
	Checks        []check  `json:"checks"`
	Pass          bool     `json:"pass"`
	Reason        string   `json:"reason"` // the first failure

	base    string // the run's directory, for the leak checks
	ownPIDs []int  // MinIO and toxiproxy
}

type datasetInfo struct {
	Files     int    `json:"files"`
	Bytes     int64  `json:"bytes"`
	CacheSize int64  `json:"cache_size"`
	FastPath  string `json:"fast_path"`
}

// packGrow is how much of a pack file the cache preallocates at a time
// (cache/pack.go).
const packGrow = 64 << 20

// check is one pass/fail line of the verdict.
type check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

func newResult(cfg config) *result {
	return &result{Pass: true, Config: map[string]any{
		"duration": cfg.duration.String(), "fault_interval": cfg.faultInterval.String(), "sample": cfg.sample.String(),
		"warmup": cfg.warmup.String(), "files": cfg.files, "large_files": cfg.largeFiles, "cache_fraction": cfg.cacheFrac,
		"jobs": cfg.jobs, "workers": cfg.workers, "job_timeout": cfg.jobTimeout.String(), "faults": cfg.faults,
		"seed": cfg.seed, "bounds": cfg.bounds, "args": os.Args[1:],
	}}
}

// check records a check; the first failed one is the run's reason.
func (r *result) check(name string, ok bool, detail string) {
	r.Checks = append(r.Checks, check{Name: name, OK: ok, Detail: detail})
	if !ok && r.Pass {
		r.Pass = false
		r.Reason = name + ": " + detail
	}
}

// fail records a failure that is not one of the named checks.
func (r *result) fail(format string, args ...any) {
	r.check("run", false, fmt.Sprintf(format, args...))
}

// verdicts turns the judgement and the growth figures into checks.
func (r *result) verdicts() {
	j := r.Judgement
	r.check("no wrong byte", j.Wrong == 0,
		fmt.Sprintf("%d reads verified (%.1f GB), %d wrong; first: %v", r.Reads.Files, float64(r.Reads.Bytes)/1e9, j.Wrong, j.WrongExamples))
	r.check("every error explained by a fault", j.Unexplained == 0,
		fmt.Sprintf("%d errors explained, %d not; first unexplained: %s", j.Explained, j.Unexplained, eventList(j.UnexplainedFirst)))
	for _, g := range r.Growth {
		if g.Limit == 0 {
			continue
		}
		r.check(fmt.Sprintf("%s growth (%s)", g.Series, g.Span), g.OK,
			fmt.Sprintf("first third max %s, last third max %s, limit %s", fmtSeries(g.Series, g.First), fmtSeries(g.Series, g.Last), fmtSeries(g.Series, g.Limit)))
	}
	if r.Dataset.CacheSize > 0 {
		// On disk, the cached data may exceed --cache-size by: up to 4% (a
		// ~100 KB file's slot rounds up to 4 KiB blocks); 16 MiB of chunks
		// written before the eviction that makes room for them is done;
		// the pack being filled, preallocated 64 MiB at a time
		// (cache/pack.go); and the preallocated tail of each pack a killed
		// daemon was filling, which nothing trims until that pack's last
		// slot is evicted.
		worst, at := 0.0, sample{}
		for _, s := range r.Samples {
			limit := float64(r.Dataset.CacheSize)*1.04 + 16<<20 + float64(packGrow)*float64(s.Gen)
			if float64(s.Cache)-limit > worst || at.Time.IsZero() {
				worst, at = float64(s.Cache)-limit, s
			}
		}
		r.check("cache within --cache-size", worst <= 0,
			fmt.Sprintf("data and packs took at most %.0f MB over their limit (--cache-size %.0f MB x 1.04 + 16 MiB + 64 MiB per daemon life): %.0f MB on disk at %.0fs, daemon life %d",
				worst/1e6, float64(r.Dataset.CacheSize)/1e6, float64(at.Cache)/1e6, at.T, at.Gen))
	}
	var failed []string
	for _, w := range r.Faults {
		if w.Err != "" {
			failed = append(failed, w.Kind+": "+w.Err)
		}
	}
	r.check("every fault injected and lifted", len(failed) == 0, fmt.Sprintf("%d faults, failures: %q", len(r.Faults), failed))
	if r.Reads.Files == 0 {
		r.check("reads happened", false, "no read was verified")
	}
}

// leakChecks looks, after everything the run started was stopped, for a
// mount under the run's directory and for a process of the run: one
// whose command line names the run's directory (the dsmount binary and
// the readers' files are there), or a child of this process, or MinIO or
// toxiproxy.
func (r *result) leakChecks(log *slog.Logger) {
	if r.base == "" {
		return
	}
	mps, err := testenv.MountPointsUnder(r.base)
	r.check("no mount left", err == nil && len(mps) == 0, fmt.Sprintf("mounts under %s: %q (%v)", r.base, mps, err))
	self := os.Getpid()
	own := map[int]bool{}
	for _, p := range r.ownPIDs {
		own[p] = true
	}
	procs, err := testenv.FindProcs(func(p testenv.Proc) bool {
		return p.PID != self && (p.PPID == self || own[p.PID] || strings.Contains(p.Cmdline, r.base))
	})
	var names []string
	for _, p := range procs {
		names = append(names, fmt.Sprintf("%d %q", p.PID, p.Cmdline))
	}
	r.check("no process left", err == nil && len(procs) == 0, fmt.Sprintf("%v (%v)", names, err))
	log.Info("leak checks", "mounts", len(mps), "processes", len(procs))
}

// verdictLine is the one line printed at the end.
func (r *result) verdictLine() string {
	j := r.Judgement
	summary := fmt.Sprintf("%d reads verified, %d wrong, %d errors explained by faults, %d faults injected, %d daemon lives",
		r.Reads.Files, j.Wrong, j.Explained, len(r.Faults), r.Daemon.Lives)
	if r.Pass {
		return "soak: PASS: " + summary
	}
	return "soak: FAIL: " + r.Reason
}

func eventList(evs []event) string {
	var parts []string
	for _, ev := range evs {
		parts = append(parts, fmt.Sprintf("[%s %s %s at %s: %s]", ev.E, ev.Job, ev.Path,
			time.Unix(0, ev.End).Format("15:04:05.000"), ev.Err))
	}
	return strings.Join(parts, " ")
}

func fmtSeries(name string, v float64) string {
	if strings.HasSuffix(name, "_bytes") {
		return fmt.Sprintf("%.1f MB", v/1e6)
	}
	return fmt.Sprintf("%.0f", v)
}
