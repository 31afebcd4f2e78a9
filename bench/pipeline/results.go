package pipeline

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dsmount/dsmount/bench/internal/cli"
)

// results is everything one run measured, as --json writes it and
// python/tests/plot_pipeline.py reads it.
type results struct {
	Date    string        `json:"date"`
	Command string        `json:"command"`
	Images  int64         `json:"images"`
	Bytes   int64         `json:"bytes"`
	Classes int           `json:"classes"`
	Batch   int           `json:"batch"`
	Latency int           `json:"latency_ms"`
	Jitter  int           `json:"jitter_ms"`
	Ceiling float64       `json:"store_ceiling_images_per_s"`
	CPUs    string        `json:"cpus"`
	Workers []int         `json:"workers"`
	Table   []tableRow    `json:"table"`
	Series  *seriesResult `json:"series,omitempty"`
	Disk    *diskResult   `json:"cache_disk,omitempty"`
}

// tableRow is one system and worker count of the cold/hot table.
type tableRow struct {
	System  string  `json:"system"`
	Workers int     `json:"workers"`
	Cold    float64 `json:"cold_images_per_s"`
	Hot     float64 `json:"hot_images_per_s"`
}

func (r *results) row(sys string, workers int) (tableRow, bool) {
	for _, row := range r.Table {
		if row.System == sys && row.Workers == workers {
			return row, true
		}
	}
	return tableRow{}, false
}

// writeOutputs writes the results as JSON to cfg.json and plots them to
// cfg.plot (paths relative to repo unless absolute; "" skips either). The
// plot is made from the JSON file, or from a copy of it in tmp.
func writeOutputs(repo, tmp string, cfg config, r *results) error {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(repo, p)
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	jsonPath, plotPath := abs(cfg.json), abs(cfg.plot)
	if jsonPath != "" {
		if err := os.WriteFile(jsonPath, data, 0o644); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
		cli.Logf("results written to %s", jsonPath)
	}
	if plotPath == "" {
		return nil
	}
	in := jsonPath
	if in == "" {
		in = filepath.Join(tmp, "results.json")
		if err := os.WriteFile(in, data, 0o644); err != nil {
			return err
		}
	}
	if _, err := runPy(nil, repo, "plot_pipeline.py", "--in", in, "--out", plotPath); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	cli.Logf("plot written to %s", plotPath)
	return nil
}
