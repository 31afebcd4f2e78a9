package scale

import (
	"fmt"
	"strings"
	"time"
)

// row is one line of the report's table.
type row struct {
	step   string // what was measured
	figure string // the measurement, with what explains it
	ref    string // the reference from the same run, if any
	ratio  string // figure / reference
	target string // the target, if any
	result string // PASS, MISS, n/a, WRONG: ..., ERROR: ...
}

func fmtDur(d time.Duration) string {
	s := d.Seconds()
	switch {
	case s < 0.1:
		return fmt.Sprintf("%.1f ms", s*1000)
	case s < 10:
		return fmt.Sprintf("%.2f s", s)
	default:
		return fmt.Sprintf("%.1f s", s)
	}
}

// fmtMB is bytes in MB (10^6 bytes, the unit of the bounds).
func fmtMB(b int64) string {
	if b < 0 {
		return "?"
	}
	return fmt.Sprintf("%.1f MB", float64(b)/1e6)
}

func fmtRatio(a, b time.Duration) string {
	if b <= 0 {
		return ""
	}
	return fmt.Sprintf("%.2f×", a.Seconds()/b.Seconds())
}

func passMiss(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// mdCell makes s safe inside a markdown table cell.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// table formats rows as a markdown table.
func table(rows []row) string {
	var b strings.Builder
	b.WriteString("| Step | Figure | Reference | Ratio | Target | Result |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, r := range rows {
		cells := []string{r.step, r.figure, r.ref, r.ratio, r.target, r.result}
		for i, c := range cells {
			if c == "" {
				c = "–"
			}
			cells[i] = mdCell(c)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	return b.String()
}

// report is the whole markdown report.
func (e *env) report() string {
	c := e.cfg
	var b strings.Builder
	fmt.Fprintf(&b, "\n## dsmount at scale: %d objects of %d bytes in %d directories (issue 23)\n\n", c.objects, c.size, c.dirs)
	fmt.Fprintf(&b, "- Date: %s; run took %s\n", e.started.Format("2006-01-02 15:04 MST"), time.Since(e.started).Round(time.Second))
	fmt.Fprintf(&b, "- Machine: %s\n", machine())
	fmt.Fprintf(&b, "- CPUs: %s\n", e.cpuNote)
	fmt.Fprintf(&b, "- Store: generated S3 server (testenv.GenS3) in its own process, behind toxiproxy adding %d ms (± %d) to every answer\n", c.Latency, c.Jitter)
	fmt.Fprintf(&b, "- Command: `go run ./bench scale %s`\n\n", strings.Join(e.args, " "))
	b.WriteString(table(e.rows))
	passes, misses := 0, 0
	for _, r := range e.rows {
		switch r.result {
		case "PASS":
			passes++
		case "MISS":
			misses++
		}
	}
	fmt.Fprintf(&b, "\nTargets: %d PASS, %d MISS. RSS is VmRSS of the daemon (peak: VmHWM), in MB of 10^6 bytes.\n", passes, misses)
	for _, n := range e.notes {
		b.WriteString("\n- " + n)
	}
	if len(e.notes) > 0 {
		b.WriteString("\n")
	}
	return b.String()
}
