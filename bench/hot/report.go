package hot

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"

	"github.com/dsmount/dsmount/bench/internal/measure"
	"github.com/dsmount/dsmount/test/testenv"
)

// pass is one side-by-side comparison: a value per round for each side.
type pass struct {
	name          string
	unit          string // of the values: "files/s", "MB/s", "samples/s", "s"
	lowerIsBetter bool   // times
	target        float64
	refName       string
	ref, mnt      []float64
	notes         []string
}

func (p *pass) best(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	b := v[0]
	for _, x := range v[1:] {
		if p.lowerIsBetter && x < b || !p.lowerIsBetter && x > b {
			b = x
		}
	}
	return b
}

func (p *pass) ratio() float64 { return p.best(p.mnt) / p.best(p.ref) }

func (p *pass) targetText() string {
	switch {
	case p.target == 0:
		return "context"
	case p.lowerIsBetter:
		return fmt.Sprintf("<= %.2fx", p.target)
	default:
		return fmt.Sprintf(">= %.2fx", p.target)
	}
}

func (p *pass) verdict() string {
	r := p.ratio()
	switch {
	case p.target == 0:
		return "-"
	case math.IsNaN(r):
		return "n/a"
	case p.lowerIsBetter && r <= p.target, !p.lowerIsBetter && r >= p.target:
		return "PASS"
	default:
		return "MISSES"
	}
}

func (p *pass) fmtValue(v float64) string {
	switch p.unit {
	case "s":
		return fmt.Sprintf("%.3f s", v)
	default:
		return fmt.Sprintf("%.0f %s", v, p.unit)
	}
}

// round runs round r of p, its two sides in sides' order, and returns the
// CPU seconds daemon pid spent during the mount's side.
func (p *pass) round(r, pid int, direct, mount func() float64) (cpu float64) {
	sides(r, func() { p.ref = append(p.ref, direct()) }, func() {
		c0 := testenv.ProcCPU(pid)
		p.mnt = append(p.mnt, mount())
		cpu = testenv.ProcCPU(pid) - c0
	})
	return cpu
}

// sides runs the round's two sides, direct first in even rounds and the
// mount first in odd ones.
func sides(round int, direct, mount func()) {
	if round%2 == 0 {
		direct()
		mount()
	} else {
		mount()
		direct()
	}
}

func firstDiff(a, b []string) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return fmt.Sprintf("line %d: source %q, mount %q", i, a[i], b[i])
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("source %d lines, mount %d", len(a), len(b))
	}
	return ""
}

// pctList is shares (0 to 1) as percents, space-separated.
func pctList(v []float64) string {
	pct := make([]float64, len(v))
	for i, x := range v {
		pct[i] = 100 * x
	}
	return measure.Join(pct, "%.0f%%", " ")
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func report(c config, passes []*pass, cpuPerK []float64, rss, hwm int64, fastPath string, hasFlag bool,
	stats0, stats1 map[string]any, mnt string, logs []string, bin string) {
	host, _ := os.Hostname()
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	fmt.Printf("\nbenchhot: %s, kernel %s, %d CPUs; dsmount %s; --fast-path %s (binary has the flag: %v); stats fast_path: %s\n",
		host, strings.TrimSpace(string(kernel)), runtime.NumCPU(), bin, shellQuote(c.fastPath), hasFlag, fastPath)
	fmt.Printf("each figure: best of %d rounds per side (rounds alternate which side goes first)\n\n", c.rounds)

	fmt.Printf("%-50s %-24s %-18s %8s %9s  %s\n", "pass", "reference", "mount", "ratio", "target", "result")
	for _, p := range passes {
		fmt.Printf("%-50s %-24s %-18s %7.2fx %9s  %s\n", p.name, p.refName+" "+p.fmtValue(p.best(p.ref)), p.fmtValue(p.best(p.mnt)),
			p.ratio(), p.targetText(), p.verdict())
	}
	if len(cpuPerK) > 0 {
		minC := cpuPerK[0]
		for _, x := range cpuPerK {
			minC = math.Min(minC, x)
		}
		fmt.Printf("%-50s %-24s %-18s %8s %9s  %s\n", "5. daemon CPU during pass 1", "-",
			fmt.Sprintf("%.3f s/1000 files", mean(cpuPerK)), "", "-", fmt.Sprintf("mean of %d epochs (min %.3f)", len(cpuPerK), minC))
	}
	fmt.Printf("%-50s %-24s %-18s %8s %9s  %s\n", "5. daemon RSS after the passes", "-",
		fmt.Sprintf("%.1f MiB", float64(rss)/(1<<20)), "", "-", fmt.Sprintf("peak (VmHWM) %.1f MiB", float64(hwm)/(1<<20)))

	fmt.Printf("\nrounds (reference | mount):\n")
	for _, p := range passes {
		var r, m []string
		for i := range p.ref {
			r = append(r, p.fmtValue(p.ref[i]))
		}
		for i := range p.mnt {
			m = append(m, p.fmtValue(p.mnt[i]))
		}
		fmt.Printf("  %s: %s | %s\n", p.name, strings.Join(r, ", "), strings.Join(m, ", "))
		for _, n := range p.notes {
			fmt.Printf("      %s\n", n)
		}
	}
	m0, m1 := mountEntry(stats0, mnt), mountEntry(stats1, mnt)
	fmt.Printf("\ndsmount stats over the timed passes: reads %d, hits %d, misses %d, bytes_from_backend %d (after warm + check: reads %d, hits %d, misses %d)\n",
		num(m1, "reads")-num(m0, "reads"), num(m1, "hits")-num(m0, "hits"), num(m1, "misses")-num(m0, "misses"),
		num(m1, "bytes_from_backend")-num(m0, "bytes_from_backend"), num(m0, "reads"), num(m0, "hits"), num(m0, "misses"))
	fmt.Printf("bytes checked: every file through the mount after `dsmount warm` and again after the passes (size + CRC-32C vs the source)\n")
	if len(logs) > 0 {
		fmt.Printf("daemon WARN/ERROR or non-JSON stderr lines: %d; first ones:\n", len(logs))
		for i, l := range logs {
			if i == 5 {
				break
			}
			fmt.Printf("  %s\n", l)
		}
	} else {
		fmt.Printf("daemon logged no WARN/ERROR\n")
	}

	repo, _ := testenv.RepoRoot()
	args := []string{"go", "run", "./bench", "hot",
		fmt.Sprintf("--files=%d", c.Files), fmt.Sprintf("--file-size=%d", c.FileSize), fmt.Sprintf("--readers=%d", c.readers),
		fmt.Sprintf("--large-mib=%d", c.largeMiB), "--fast-path=" + shellQuote(c.fastPath), fmt.Sprintf("--rounds=%d", c.rounds),
		fmt.Sprintf("--seed=%d", c.seed), "--cache-size=" + shellQuote(c.cacheSize), "--python=" + shellQuote(c.python),
		fmt.Sprintf("--loader-workers=%d", c.workers), fmt.Sprintf("--loader-batch=%d", c.batch), fmt.Sprintf("--loader-unbuffered=%v", c.unbuffered), fmt.Sprintf("--loader-read-bytes=%v", c.readBytes)}
	if c.bin != "" {
		args = append(args, "--bin="+shellQuote(c.bin))
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{c.skipLoader, "--skip-loader"}, {c.skipLS, "--skip-ls"}, {c.skipLarge, "--skip-large"}} {
		if f.on {
			args = append(args, f.name)
		}
	}
	fmt.Printf("\nreproduce: cd %s && %s\n", shellQuote(repo), strings.Join(args, " "))
}
