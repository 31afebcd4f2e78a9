package gpu

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dsmount/dsmount/bench/internal/cli"
)

// results is everything one run measured, as --json writes it.
type results struct {
	Date        string       `json:"date"`
	Command     string       `json:"command"`
	Probe       probeResult  `json:"probe"`
	Python      string       `json:"python"` // the server's ready line: device, GPU, versions
	Images      int64        `json:"images"`
	Bytes       int64        `json:"bytes"`
	GenSeconds  float64      `json:"gen_seconds"`
	WarmSeconds float64      `json:"warm_seconds,omitempty"`
	Model       string       `json:"model"`
	Batch       int          `json:"batch"`
	Crop        int          `json:"crop"`
	Seconds     float64      `json:"window_seconds"`
	Latency     int          `json:"minio_latency_ms"`
	Jitter      int          `json:"minio_jitter_ms"`
	Workers     []int        `json:"workers"`
	Passes      []passRow    `json:"passes"`
	Skipped     []skipped    `json:"skipped"`
	Check       *checkResult `json:"check,omitempty"`
	WallSeconds float64      `json:"wall_seconds"`
}

// passRow is one pass at one worker count.
type passRow struct {
	Pass      string  `json:"pass"`
	Title     string  `json:"title"`
	Workers   int     `json:"workers"`
	Images    int     `json:"images"`  // in the window
	Seconds   float64 `json:"seconds"` // the window
	Rate      float64 `json:"images_per_s"`
	WaitShare float64 `json:"gpu_wait_share"`
	Batches   int     `json:"batches"`
	Warmup    int     `json:"warmup_batches"`
	Consumed  int     `json:"consumed"` // warm-up and window
	OrderOK   bool    `json:"order_ok"`
	// Residency is the mean share of a sample of images' pages cached
	// when the pass started (0 after a drop, 1 for pagecache).
	Residency float64 `json:"start_residency"`
	// SourceBytes is what the mount read from its source during the pass
	// (a cached mount: 0).
	SourceBytes int64 `json:"source_bytes,omitempty"`
	// VsLocal and WaitVsLocal: Rate over the local directory's at the same
	// workers, and WaitShare minus its (0 where there is none).
	VsLocal     float64 `json:"vs_local,omitempty"`
	WaitVsLocal float64 `json:"wait_minus_local,omitempty"`
	Note        string  `json:"note,omitempty"`
	Error       string  `json:"error,omitempty"`
}

type skipped struct {
	Pass    string `json:"pass"`
	Workers int    `json:"workers,omitempty"`
	Reason  string `json:"reason"`
}

// checkResult is --check's whole epoch: the dataset indices in the order
// the staged batches carried them, and the sampler's order.
type checkResult struct {
	Dataset  int   `json:"dataset"`
	Consumed int   `json:"consumed"`
	OrderOK  bool  `json:"order_ok"`
	Staged   []int `json:"staged_order"`
	Sampler  []int `json:"sampler_order"`
}

// record adds row, logs it and rewrites the JSON.
func (b *bench) record(row passRow) {
	b.res.Passes = append(b.res.Passes, row)
	switch {
	case row.Error != "":
		cli.Logf("%s, %d workers: FAILED: %s", row.Pass, row.Workers, row.Error)
	case row.Pass == passCeiling:
		cli.Logf("%s: %.0f images/s (%d images in %.1f s)", row.Pass, row.Rate, row.Images, row.Seconds)
	default:
		cli.Logf("%s, %d workers: %.0f images/s, GPU wait %.1f%% (%d batches in %.1f s after %d of warm-up; pages cached at the start %.2f)",
			row.Pass, row.Workers, row.Rate, 100*row.WaitShare, row.Batches, row.Seconds, row.Warmup, row.Residency)
	}
	b.save()
}

// ratios fills every row's VsLocal and WaitVsLocal from the local row of
// its worker count.
func ratios(rows []passRow) {
	local := map[int]passRow{}
	for _, r := range rows {
		if r.Pass == passLocal && r.Error == "" && r.Rate > 0 {
			local[r.Workers] = r
		}
	}
	for i, r := range rows {
		l, ok := local[r.Workers]
		if r.Pass == passCeiling || r.Pass == passLocal || !ok || r.Error != "" {
			continue
		}
		rows[i].VsLocal = r.Rate / l.Rate
		rows[i].WaitVsLocal = r.WaitShare - l.WaitShare
	}
}

// save rewrites --json (write and rename: a run killed midway leaves the
// last whole file).
func (b *bench) save() {
	if b.cfg.json == "" {
		return
	}
	ratios(b.res.Passes)
	b.res.WallSeconds = math.Round(time.Since(b.start).Seconds()*10) / 10
	data, err := json.MarshalIndent(b.res, "", "  ")
	if err != nil {
		b.t.Fatalf("%v", err)
	}
	tmp := b.cfg.json + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		b.t.Fatalf("--json: %v", err)
	}
	if err := os.Rename(tmp, b.cfg.json); err != nil {
		b.t.Fatalf("--json: %v", err)
	}
}

// finish prints the table and writes the JSON a last time.
func (b *bench) finish() {
	b.save()
	ratios(b.res.Passes)
	fmt.Print(table(b.res))
	if b.cfg.json != "" {
		abs, _ := filepath.Abs(b.cfg.json)
		cli.Logf("results written to %s", abs)
	}
}

// table is the readable report: per worker count, each pass's images/s and
// GPU wait share beside the local directory's.
func table(r *results) string {
	var s strings.Builder
	fmt.Fprintf(&s, "\n## bench gpu, %s\n\n", r.Date)
	fmt.Fprintf(&s, "- Python: %s\n", r.Python)
	fmt.Fprintf(&s, "- Images: %d JPEGs, %.1f MB (mean %.0f KB); %s, batch %d, RandomResizedCrop(%d) + flip + PILToTensor, uint8 to the device; DataLoader(pin_memory) in dsmount.StagingLoader\n",
		r.Images, float64(r.Bytes)/1e6, float64(r.Bytes)/float64(max(r.Images, 1))/1e3, r.Model, r.Batch, r.Crop)
	fmt.Fprintf(&s, "- Each pass: a warm-up of as many batches as workers, then a window of %.0f s (or the epoch's end); GPU wait: the share of the window spent waiting for the next batch\n", r.Seconds)
	for _, l := range r.Probe.lines() {
		fmt.Fprintf(&s, "- %s\n", l)
	}
	fmt.Fprintf(&s, "- Command: `%s`\n\n", r.Command)
	s.WriteString("| workers | pass | images/s | GPU wait | vs local | wait − local's |\n|---|---|---|---|---|---|\n")
	for _, p := range r.Passes {
		w := fmt.Sprint(p.Workers)
		if p.Title == "" {
			p.Title = passTitle[p.Pass]
		}
		if p.Pass == passCeiling {
			w = "–"
		}
		if p.Error != "" {
			fmt.Fprintf(&s, "| %s | %s | failed: %s | | | |\n", w, p.Title, oneLine(p.Error))
			continue
		}
		vs, dw := "–", "–"
		if p.VsLocal > 0 {
			vs, dw = fmt.Sprintf("**%.2f×**", p.VsLocal), fmt.Sprintf("%+.1f pt", 100*p.WaitVsLocal)
		} else if p.Pass == passLocal {
			vs = "reference"
		}
		wait := fmt.Sprintf("%.1f%%", 100*p.WaitShare)
		if p.Pass == passCeiling {
			wait = "0 (no loader)"
		}
		fmt.Fprintf(&s, "| %s | %s | %.0f | %s | %s | %s |\n", w, p.Title, p.Rate, wait, vs, dw)
	}
	for _, k := range r.Skipped {
		w := fmt.Sprint(k.Workers)
		if k.Workers == 0 {
			w = "all"
		}
		fmt.Fprintf(&s, "| %s | %s | skipped: %s | | | |\n", w, k.Pass, oneLine(k.Reason))
	}
	s.WriteString("\nTargets (issue 47): dsmount from the cache disk and from the page cache ≥ 0.95× the local directory and GPU wait ≤ local's + 2 points, at every worker count; declared from the cache disk ≥ 1.0×.\n")
	return s.String()
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "|", "/")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	return s
}
