package order

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/bench/internal/measure"
	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/test/testenv"
)

// The tail passes (--tail) measure what a store whose connections
// sometimes stall forever costs the readers: a toxiproxy "timeout" toxic
// with timeout 0 on the small files' proxy stops forwarding the answers of
// that share of its connections and never closes them, as a wedged load
// balancer or a half-dead store node does. Each pass runs healthy, then
// with the toxic, on fresh mounts and cache dirs, so every faulted figure
// has its healthy reference from the same round:
//
//   - cold, not declared: one epoch, --readers readers, every read a miss
//     the reader waits for; --stall-pct of connections stalled. Targets:
//     files/s >= 0.8x healthy, the slowest read <= 2 s.
//   - stall, declared: the declared epoch with the readers' work (as the
//     stall passes); --stall-declared-pct stalled. Target: the time the
//     readers stalled (epoch - pure work) <= 2x the healthy pass's.
//   - warm: `dsmount warm` of the whole dataset on a fresh mount;
//     --stall-pct stalled. Context: warm's time, faulted / healthy.
//
// Every healthy pass also gives the share of extra GETs (hedges, retries):
// MinIO's GET count over the files, less one per file; target <= 2%.

// tailPair is one pass, healthy and faulted.
type tailPair struct {
	what            string
	pct             float64
	healthy, faulty tailResult
}

// tailResult is one tail pass's figures.
type tailResult struct {
	result
	maxRead, p99Read time.Duration
	stallSec         float64 // epoch - work, for passes with work
	backend          control.RequestStats
}

// extraGets is the share of GETs beyond one per file.
func (r tailResult) extraGets() float64 {
	return float64(r.GETs-r.Files) / float64(r.Files)
}

func runTailRound(e *env, r int, work time.Duration) []tailPair {
	c := e.cfg
	order := shuffled(e.paths, c.seed+uint64(r)-1)
	pairs := []tailPair{
		{what: "cold, not declared", pct: c.stallPct},
		{what: "stall, declared", pct: c.stallDeclaredPct},
		{what: "warm", pct: c.stallPct},
	}
	for i := range pairs {
		p := &pairs[i]
		for _, faulted := range []bool{false, true} {
			pct := 0.0
			if faulted {
				pct = p.pct
			}
			e.recycleMemory()
			var res tailResult
			switch p.what {
			case "cold, not declared":
				res = tailPass(e, r, p.what, order, false, 0, pct)
			case "stall, declared":
				res = tailPass(e, r, p.what, order, true, work, pct)
			case "warm":
				res = tailPass(e, r, p.what, nil, false, 0, pct)
			}
			if faulted {
				p.faulty = res
			} else {
				p.healthy = res
			}
		}
	}
	return pairs
}

// tailPass is one pass on a fresh mount with pct% of the small files'
// proxy's connections stalled from the moment the mount has listed the
// dataset: an epoch of order (declared or not, with work per sample), or,
// with no order, `dsmount warm` of everything.
func tailPass(e *env, round int, what string, order []string, declare bool, work time.Duration, pct float64) tailResult {
	c, t := e.cfg, e.T
	name := fmt.Sprintf("%s, %g%% stalled", what, pct)
	dir := filepath.Join(e.Work, fmt.Sprintf("round%d-tail-%s-%g", round, strings.NewReplacer(" ", "", ",", "-").Replace(what), pct))
	os.MkdirAll(dir, 0o755)
	m, _ := e.startMount(dir, "s3://"+bucket+"/ds", e.smallEndpoint)
	mp := m.Dir()
	if pct > 0 {
		e.Store.Toxiproxy.AddToxic("small", testenv.Toxic{Name: "stall", Type: "timeout", Stream: "downstream", Toxicity: pct / 100,
			Attributes: map[string]any{"timeout": 0}})
	}
	meter := measure.Start(e.Store, measure.Proc(m.Pid()))
	start := time.Now()
	var rs readStats
	var err error
	if order == nil {
		r := testenv.RunCLI(e.Bin, nil, 30*time.Minute, "warm", mp, "--json")
		if r.ExitCode != 0 {
			err = fmt.Errorf("dsmount warm: exit %d: %s", r.ExitCode, r.Stderr)
		}
		rs.files = int64(len(e.paths))
		for _, p := range e.paths {
			rs.bytes += e.sizes[p]
		}
	} else {
		if declare {
			declareOrder(e, dir, mp, order)
		}
		rs, err = readEpoch(e, mp, order, c.readers, work)
	}
	el := time.Since(start)
	usage := meter.Stop()
	if pct > 0 {
		e.Store.Toxiproxy.RemoveToxic("small", "stall")
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	st, err := testenv.StatsErr(e.Bin, mp)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if order == nil {
		// Warm read nothing through the mount: check it all now.
		if _, err := testenv.CompareTreeErr(e.smallSrc, mp, e.paths, c.readers, int64(round)); err != nil {
			t.Fatalf("%s: after warm: %v", name, err)
		}
	}
	logs := e.stopMount(m, dir)
	res := tailResult{result: result{name: name, Pass: measure.Pass{Files: rs.files, Bytes: rs.bytes, Elapsed: el}, Usage: usage, stall: -1, logs: logs}}
	if len(rs.lat) > 0 {
		res.maxRead = slices.Max(rs.lat)
		res.p99Read = time.Duration(percentiles(rs.lat, 99)[0] * 1e6)
	}
	res.backend = st.Mount.Backend
	if work > 0 {
		res.work = time.Duration(int64(len(order)) * int64(work) / int64(c.readers))
		res.stallSec = (el - res.work).Seconds()
		res.stall = res.stallSec / el.Seconds()
	}
	b := res.backend
	res.note = fmt.Sprintf("GETs %d hedged %d (won %d) no-answer %d body-stalled %d retries %d; answer p99 %.0fms timeout %.0fms hedge after %.0fms",
		b.Gets, b.Hedges, b.HedgesWon, b.FirstByteTimeouts, b.BodyTimeouts, b.Retries, b.FirstByteP99Millis, b.TimeoutMillis, b.HedgeMillis)
	cli.Logf("round %d: %s: %.0f files/s in %.2fs, max read %v, %d GETs (%s)", round, name, res.FilesPerSec(), el.Seconds(),
		res.maxRead.Round(time.Millisecond), usage.GETs, res.note)
	return res
}

// declareOrder runs `dsmount order` with order for job "bench", epoch 0.
func declareOrder(e *env, dir, mp string, order []string) {
	orderFile := filepath.Join(dir, "order.txt")
	if err := os.WriteFile(orderFile, []byte(strings.Join(order, "\n")+"\n"), 0o644); err != nil {
		e.T.Fatalf("%v", err)
	}
	r := testenv.RunCLI(e.Bin, nil, 5*time.Minute, "order", mp, "--job", "bench", "--epoch", "0", orderFile)
	if r.ExitCode != 0 {
		e.T.Fatalf("dsmount order: exit %d\nstdout: %s\nstderr: %s", r.ExitCode, r.Stdout, r.Stderr)
	}
}

// reportTail prints the tail passes of every round and the verdicts.
func reportTail(e *env, rounds [][]tailPair) {
	c := e.cfg
	fmt.Printf("\n%-36s %8s %9s %9s %9s %7s %7s %9s  %s\n", "tail pass", "seconds", "files/s", "max read", "p99 read", "GETs", "extra", "stalled", "backend")
	var coldRatio, coldMax, stallRatio, extra []float64
	for i, pairs := range rounds {
		for _, p := range pairs {
			for _, r := range []tailResult{p.healthy, p.faulty} {
				stalled := "-"
				if r.work > 0 {
					stalled = fmt.Sprintf("%.2fs", r.stallSec)
				}
				maxRead, p99 := "-", "-"
				if r.maxRead > 0 {
					maxRead, p99 = fmt.Sprintf("%.0fms", ms(r.maxRead)), fmt.Sprintf("%.0fms", ms(r.p99Read))
				}
				fmt.Printf("%-36s %8.2f %9.0f %9s %9s %7d %6.1f%% %9s  %s\n", fmt.Sprintf("%s #%d", r.name, i+1), r.Elapsed.Seconds(), r.FilesPerSec(),
					maxRead, p99, r.GETs, 100*r.extraGets(), stalled, r.note)
			}
			extra = append(extra, 100*p.healthy.extraGets())
			switch p.what {
			case "cold, not declared":
				coldRatio = append(coldRatio, p.faulty.FilesPerSec()/p.healthy.FilesPerSec())
				coldMax = append(coldMax, p.faulty.maxRead.Seconds())
			case "stall, declared":
				stallRatio = append(stallRatio, p.faulty.stallSec/max(p.healthy.stallSec, 1e-3))
			case "warm":
				fmt.Printf("  warm, %g%% stalled / healthy (time): %.2f (no target)\n", p.pct, p.faulty.Elapsed.Seconds()/p.healthy.Elapsed.Seconds())
			}
		}
	}
	fmt.Printf("tail: %d files of %d B, MinIO behind toxiproxy +%d ms ± %d, %d readers; stalled = a toxiproxy timeout toxic (never closes) on that share of connections\n",
		len(e.paths), c.FileSize, c.Latency, c.Jitter, c.readers)
	verdict(fmt.Sprintf("cold epoch, %g%% of connections stalled / healthy (files/s)", c.stallPct), coldRatio, ">=", 0.8, "%.2f")
	verdict(fmt.Sprintf("cold epoch, %g%% stalled: slowest read (s)", c.stallPct), coldMax, "<=", 2, "%.2f")
	verdict(fmt.Sprintf("declared epoch, %g%% stalled / healthy (seconds stalled)", c.stallDeclaredPct), stallRatio, "<=", 2, "%.2f")
	verdict("extra GETs on healthy passes (%)", []float64{slices.Max(extra)}, "<=", 2, "%.2f")
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
