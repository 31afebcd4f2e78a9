package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// storeCeiling is the store's own rate for these images through the
// proxy: every image fetched once, 64 GETs in flight, by this process.
func storeCeiling(t *testenv.ProgramT, mc *testenv.MinIO, endpoint, src string) float64 {
	var names []string
	var sizes []int64
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		names, sizes = append(names, filepath.ToSlash(rel)), append(sizes, info.Size())
		return nil
	})
	if err != nil {
		t.Fatalf("listing the images: %v", err)
	}
	user, pass := mc.Creds()
	_, took, err := testenv.ParallelGets(context.Background(), testenv.NewS3Client(endpoint, user, pass), "bench", "caltech", names, sizes, 64)
	if err != nil {
		t.Fatalf("store ceiling: %v", err)
	}
	return float64(len(names)) / took.Seconds()
}

// report prints the markdown table: per worker count and system, the cold
// and hot epochs' images/s, each against the local copy's hot epoch of the
// same worker count, and the declared cold epoch against its own hot one.
func report(cfg config, images, bytes int64, ceiling float64, cpuNote string, systems []string, rows map[string]map[int]epochs) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## benchpipeline, %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "- Images: %d JPEGs in %d classes, %.1f MB (mean %.0f KB); ImageFolder + dsmount.pil_loader + RandomResizedCrop(224) + ToTensor, batch %d\n",
		images, cfg.classes, float64(bytes)/1e6, float64(bytes)/float64(images)/1e3, cfg.batch)
	fmt.Fprintf(&b, "- Store: MinIO behind toxiproxy +%d ms ± %d; its ceiling for these images (64 GETs in flight): %.0f images/s\n", cfg.latency, cfg.jitter, ceiling)
	fmt.Fprintf(&b, "- CPUs: %s\n", cpuNote)
	fmt.Fprintf(&b, "- Each row: one invocation of two epochs, the first after drop_caches (dsmount: a fresh cache and mount), the second hot\n")
	fmt.Fprintf(&b, "- Command: `go run ./test/benchpipeline %s`\n\n", strings.Join(os.Args[1:], " "))
	b.WriteString("| workers | system | cold images/s | hot images/s | cold / local cold | hot / local hot | cold / own hot |\n|---|---|---|---|---|---|---|\n")
	for _, w := range cfg.workers {
		local := rows["local"][w]
		for _, sys := range systems {
			e := rows[sys][w]
			fmt.Fprintf(&b, "| %d | %s | %.0f | %.0f | %.2f× | %.2f× | %.2f× |\n", w, sys, e.rate(0), e.rate(1),
				e.rate(0)/local.rate(0), e.rate(1)/local.rate(1), e.rate(0)/e.rate(1))
		}
	}
	b.WriteString("\nTargets (issue 24): hot through dsmount ≥ 0.9× local at every worker count; with 4 workers a cold declared epoch ≥ 0.9× its hot rate when the ceiling is above the demand.\n")
	fmt.Print(b.String())
}
