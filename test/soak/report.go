package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// python draws the plot (Debian's, with python3-matplotlib).
const python = "/usr/bin/python3"

// writeOutputs prints the tables to tables and writes OUT.csv, OUT.json
// and (with --plot) OUT.png.
func writeOutputs(cfg config, res *result, tables io.Writer, log *slog.Logger) error {
	printTables(tables, res)
	if cfg.out == "" {
		return nil
	}
	if dir := filepath.Dir(cfg.out); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if err := writeCSV(cfg.out+".csv", res.Samples); err != nil {
		return err
	}
	data, err := json.MarshalIndent(res, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(cfg.out+".json", append(data, '\n'), 0o644); err != nil {
		return err
	}
	log.Info("wrote", "csv", cfg.out+".csv", "json", cfg.out+".json")
	if !cfg.plot {
		return nil
	}
	script, err := plotScript()
	if err != nil {
		return err
	}
	cmd := exec.Command(python, script, "--in", cfg.out+".json", "--out", cfg.out+".png")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("plotting: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	log.Info("wrote", "plot", cfg.out+".png")
	return nil
}

// plotScript finds plot_soak.py beside this program's source.
func plotScript() (string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", fmt.Errorf("finding plot_soak.py: %w", err)
	}
	return filepath.Join(root, "test", "soak", "plot_soak.py"), nil
}

var csvColumns = []string{"t", "time", "generation", "pid", "up", "rss_bytes", "go_heap_bytes", "goroutines", "threads",
	"fds", "badger_bytes", "cache_bytes", "cache_used_bytes", "jobs", "verify_failures", "read_errors", "verified_reads", "faults"}

func writeCSV(path string, samples []sample) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write(csvColumns)
	for _, s := range samples {
		i := func(v int64) string { return strconv.FormatInt(v, 10) }
		w.Write([]string{strconv.FormatFloat(s.T, 'f', 1, 64), s.Time.Format(time.RFC3339), strconv.Itoa(s.Gen), strconv.Itoa(s.PID),
			strconv.FormatBool(s.Up), i(s.RSS), i(s.Heap), strconv.Itoa(s.Goroutines), strconv.Itoa(s.Threads), strconv.Itoa(s.FDs),
			i(s.Badger), i(s.Cache), i(s.Used), strconv.Itoa(s.Jobs), i(s.VerifyFailures), i(s.ReadErrors), i(s.Verified), s.Faults})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// printTables prints the activities and reads, the fault table, the
// growth table and the checks.
func printTables(w io.Writer, res *result) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nactivities %v; reader processes %d; reads verified %d (%.2f GB); events %v; daemon %+v\n",
		res.Activities, res.Reads.Started, res.Reads.Files, float64(res.Reads.Bytes)/1e9, res.Reads.Events, res.Daemon)
	fmt.Fprintf(&b, "\n%-11s %8s %11s %12s %10s %11s %9s %11s  %s\n", "fault", "injected", "read errors", "other errors",
		"slow reads", "slowest (s)", "lift (s)", "lift errors", "example")
	for _, f := range res.Judgement.PerFault {
		fmt.Fprintf(&b, "%-11s %8d %11d %12d %10d %11.1f %9.1f %11d  %s\n", f.Kind, f.Injected, f.ReadErrors, f.OtherErrors,
			f.SlowReads, f.MaxReadS, f.LiftMaxS, f.LiftErrors, f.Example)
	}
	fmt.Fprintf(&b, "%-11s %8s %11s %12s %10d %11.1f\n", "(none)", "", "", "", res.Judgement.HealthySlow, res.Judgement.HealthyMaxS)
	if n := len(res.RemountRaces); n > 0 {
		fmt.Fprintf(&b, "\nremounts refused as \"already mounted by this daemon\" right after the unmount: %d, waits (s): %.1f\n", n, res.RemountRaces)
	}
	if res.ProxyRestarts > 0 {
		fmt.Fprintf(&b, "\ntoxiproxy wedged undoing a fault and was replaced %d times (Shopify/toxiproxy#558)\n", res.ProxyRestarts)
	}
	fmt.Fprintf(&b, "\n%-15s %-18s %12s %12s %12s %s\n", "series", "span", "first third", "last third", "limit", "ok")
	for _, g := range res.Growth {
		lim := "-"
		if g.Limit > 0 {
			lim = fmtSeries(g.Series, g.Limit)
		}
		fmt.Fprintf(&b, "%-15s %-18s %12s %12s %12s %v\n", g.Series, g.Span, fmtSeries(g.Series, g.First), fmtSeries(g.Series, g.Last), lim, g.OK)
	}
	fmt.Fprintln(&b)
	for _, c := range res.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "%s %s: %s\n", mark, c.Name, c.Detail)
	}
	io.WriteString(w, b.String())
}
