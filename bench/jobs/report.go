package jobs

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/dsmount/dsmount/bench/internal/measure"
	"github.com/dsmount/dsmount/internal/control"
)

// report prints the table of every configuration run so far.
func report(c config, e *env, rows []row) {
	fmt.Printf("\n%d files (%.2f GB), %d workers per job, %d epochs after a warm-up, store +%d ms; %s; declarations: %s, next epoch's declared: %v\n",
		len(e.paths), float64(e.total)/1e9, c.workers, c.epochs, c.Latency, e.Store.CPUNote, c.declare, c.next)
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "jobs\tcache\tpage cache\tpolicy\thit rate per epoch\toracle\tfiles/s per job\tdaemon, per job: hit rate, stalled s, prefetched, evicted unread, page-cached unread, refused, evicted needed")
	for _, r := range rows {
		b := "unbounded"
		if r.bounded {
			b = "bounded"
		}
		if r.err != "" {
			fmt.Fprintf(w, "%d\t%.2f\t%s\t%s\terror: %s\t\t\t\n", r.jobs, r.fraction, b, r.policy, r.err)
			continue
		}
		var rates []string
		for _, ep := range r.rate {
			rates = append(rates, fmtRates(ep))
		}
		var js []string
		for _, j := range r.stats {
			js = append(js, fmt.Sprintf("%.2f %.0fs %d %d %d %d %d", j.HitRate, j.StallSeconds, j.Prefetched, j.PrefetchEvicted, j.PrefetchUnseen, j.AdmissionsRefused, j.EvictedInWindow))
		}
		fmt.Fprintf(w, "%d\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\n", r.jobs, r.fraction, b, r.policy,
			measure.List(r.hit, "%.3f"), measure.List(r.oracle, "%.3f"), strings.Join(rates, ", "), strings.Join(js, "; "))
	}
	w.Flush()
}

// Result is one configuration's result in --json output.
type Result struct {
	Jobs     int       `json:"jobs"`
	Fraction float64   `json:"fraction"`
	Bounded  bool      `json:"bounded"`
	Policy   string    `json:"policy"`
	HitRate  []float64 `json:"hit_rate"` // per measured epoch
	Oracle   []float64 `json:"oracle"`
	// FilesPerSec is each job's files/s, per measured epoch.
	FilesPerSec [][]float64 `json:"files_per_sec"`
	// Daemon is the daemon's figures of each job after the last epoch.
	Daemon []control.JobStats `json:"daemon,omitempty"`
	Error  string             `json:"error,omitempty"`
}

func printJSON(rows []row) {
	out := make([]Result, len(rows))
	for i, r := range rows {
		out[i] = Result{Jobs: r.jobs, Fraction: r.fraction, Bounded: r.bounded, Policy: r.policy,
			HitRate: r.hit, Oracle: r.oracle, FilesPerSec: r.rate, Daemon: r.stats, Error: r.err}
	}
	b, _ := json.Marshal(out)
	fmt.Printf("JSON %s\n", b)
}
