package order

import (
	"fmt"
	"runtime"

	"github.com/dsmount/dsmount/bench/internal/measure"
	"github.com/dsmount/dsmount/test/testenv"
)

type roundResult struct {
	round   int
	small   smallRound
	large   largeRound
	streams streamsRound
}

// row is a result as the table shows it, with its ratio to its reference.
type row struct {
	result
	ratio string
}

func report(e *env, rounds []roundResult) {
	c := e.cfg
	var rows []row
	var declRatio, coldRatio, stallDecl, stallCold, ddRatio, storeParRatio, streamsRatio []float64
	for _, rr := range rounds {
		suffix := ""
		if c.rounds > 1 {
			suffix = fmt.Sprintf(" #%d", rr.round)
		}
		add := func(r result, ratio string) {
			r.name += suffix
			rows = append(rows, row{r, ratio})
		}
		if !c.skipSmall {
			s := rr.small
			ref := s.ceiling.FilesPerSec()
			add(s.ceiling, "1.00")
			passes := []result{s.declared, s.cold, s.stallDeclared, s.stallCold}
			if c.skipUndeclared {
				passes = []result{s.declared, s.stallDeclared}
			}
			for _, r := range passes {
				add(r, fmt.Sprintf("%.2f", r.FilesPerSec()/ref))
			}
			declRatio = append(declRatio, s.declared.FilesPerSec()/ref)
			stallDecl = append(stallDecl, s.stallDeclared.stall)
			if !c.skipUndeclared {
				coldRatio = append(coldRatio, s.cold.FilesPerSec()/ref)
				stallCold = append(stallCold, s.stallCold.stall)
			}
		}
		if !c.skipLrg {
			l := rr.large
			ref := l.oneConn.MBPerSec()
			add(l.oneConn, "1.00")
			add(l.storePar, fmt.Sprintf("%.2f", l.storePar.MBPerSec()/ref))
			add(l.ddMount, fmt.Sprintf("%.2f", l.ddMount.MBPerSec()/ref))
			add(l.ddLocal, fmt.Sprintf("%.2f", l.ddLocal.MBPerSec()/ref))
			ddRatio = append(ddRatio, l.ddMount.MBPerSec()/ref)
			storeParRatio = append(storeParRatio, l.storePar.MBPerSec()/ref)
		}
		if c.streams > 0 {
			s := rr.streams
			ref := s.storePar.MBPerSec()
			add(s.storePar, "1.00")
			add(s.dd, fmt.Sprintf("%.2f", s.dd.MBPerSec()/ref))
			streamsRatio = append(streamsRatio, s.dd.MBPerSec()/ref)
		}
	}

	fmt.Printf("\n%-24s %7s %8s %8s %9s %8s %7s %6s %9s %8s %9s  %s\n",
		"pass", "files", "MB", "seconds", "files/s", "MB/s", "GETs", "ratio", "cpu busy", "proc cpu", "store cpu", "what")
	for _, r := range rows {
		fps := fmt.Sprintf("%.0f", r.FilesPerSec())
		if r.Files == 1 {
			fps = "-"
		}
		pcpu := "-"
		if r.ProcCPU >= 0 {
			pcpu = fmt.Sprintf("%.1fs", r.ProcCPU)
		}
		scpu := "-"
		if r.StoreCPU > 0 {
			scpu = fmt.Sprintf("%.1fs", r.StoreCPU)
		}
		fmt.Printf("%-24s %7d %8.1f %8.2f %9s %8.1f %7d %6s %9s %8s %9s  %s\n", r.name, r.Files, float64(r.Bytes)/1e6,
			r.Elapsed.Seconds(), fps, r.MBPerSec(), r.GETs, r.ratio,
			fmt.Sprintf("%.2f/%d", r.CPU, runtime.NumCPU()), pcpu, scpu, r.note)
	}
	fmt.Printf("ratio: small files, files/s vs the ceiling of the same round; large file, MB/s vs one connection of the same round; streams, MB/s vs the store's own GETs over the same files in the same round\n")
	fmt.Printf("cpu busy: cores busy on the whole machine (MinIO, toxiproxy, dd included); proc cpu: this program (GETs) or the dsmount daemon (mount passes); store cpu: MinIO and toxiproxy\n")
	fmt.Printf("cpus: %s\n", e.Store.CPUNote)
	if e.cfg.recycle {
		fmt.Printf("memory: before every pass %d MiB of fresh memory was touched and freed (untimed; --recycle-memory)\n", e.cfg.recycleMiB)
	}

	printed := false
	for _, r := range rows {
		if len(r.logs) == 0 {
			continue
		}
		if !printed {
			fmt.Printf("\ndaemon WARN/ERROR (or non-JSON) stderr lines:\n")
			printed = true
		}
		fmt.Printf("  %s: %d line(s)\n", r.name, len(r.logs))
		for i, l := range r.logs {
			if i == 500 {
				fmt.Printf("    ... %d more\n", len(r.logs)-5)
				break
			}
			fmt.Printf("    %s\n", l)
		}
	}
	if !printed {
		fmt.Printf("\ndaemon logs: no WARN/ERROR (or non-JSON) stderr lines in any pass\n")
	}

	fmt.Println()
	if !c.skipSmall {
		fmt.Printf("small files: %d files of %d B; MinIO behind toxiproxy +%d ms ± %d; ceiling %d GETs in flight; %d readers; stall passes: work %.2fms/sample (demand %.2fx the ceiling)\n",
			len(e.paths), c.FileSize, c.Latency, c.Jitter, c.getsPar, c.readers,
			float64(rounds[len(rounds)-1].small.work)/1e6, c.demand)
	}
	if !c.skipLrg {
		fmt.Printf("large file: %d MiB; %s\n", c.largeMiB, e.linkNote)
	}
	if c.streams > 0 {
		fmt.Printf("streams: %d files of %d MiB through the large file's proxy, one dd each, all at once\n", c.streams, c.streamMiB)
	}
	fmt.Printf("dsmount --chunk-size %s --cache-size %s%s\n", c.chunkSize, c.cacheSize, prefetchNote(c))
	fmt.Println()
	if !c.skipSmall {
		verdict("declared epoch / ceiling (files/s)", declRatio, ">=", 0.8, "%.2f")
		verdict("stall, order declared", pct(stallDecl), "<=", 5, "%.1f%%")
		if !c.skipUndeclared {
			fmt.Printf("  context: not declared / ceiling (files/s) %s; stall, not declared %s\n",
				measure.List(coldRatio, "%.2f"), measure.List(pct(stallCold), "%.1f%%"))
		}
	}
	if !c.skipLrg {
		verdict("dd cold mount / one connection (MB/s)", ddRatio, ">=", 4, "%.2f")
		fmt.Printf("  context: the store's own 16 parallel ranged GETs / one connection %s\n", measure.List(storeParRatio, "%.2f"))
	}
	if c.streams > 0 {
		fmt.Printf("  streams: %d dd at once / the store's own 16 GETs over the same files (MB/s) %s (no target)\n", c.streams, measure.List(streamsRatio, "%.2f"))
	}
	fmt.Printf("\nreproduce: %s\n", e.reproduce())
}

func prefetchNote(c config) string {
	if c.prefetchPar > 0 {
		return fmt.Sprintf(" --prefetch-parallel %d", c.prefetchPar)
	}
	return " (--prefetch-parallel: daemon default)"
}

// verdict prints one target's line: every round's value, the median, and
// PASS or MISSES.
func verdict(what string, vals []float64, op string, target float64, format string) {
	med := testenv.Median(vals)
	ok := med >= target
	if op == "<=" {
		ok = med <= target
	}
	word := "MISSES"
	if ok {
		word = "PASS"
	}
	rounds := ""
	if len(vals) > 1 {
		rounds = fmt.Sprintf(" (median of %d rounds: %s)", len(vals), measure.List(vals, format))
	}
	fmt.Printf("%-6s %s: "+format+"%s; target %s "+format+"\n", word, what, med, rounds, op, target)
}

func pct(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = 100 * x
	}
	return out
}
