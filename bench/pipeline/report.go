package pipeline

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/bench/internal/measure"
	"github.com/dsmount/dsmount/test/testenv"
)

// storeCeiling is the store's own rate for these images through client
// (the proxy): every image fetched once, 64 GETs in flight, by this
// process.
func storeCeiling(t *testenv.ProgramT, client *s3.Client, src string) float64 {
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
	p, err := measure.RawGets(client, "bench", "caltech", names, sizes, 64)
	if err != nil {
		t.Fatalf("store ceiling: %v", err)
	}
	return p.FilesPerSec()
}

// report prints the markdown tables: per worker count and system, the
// cold and hot epochs' images/s, each against the local copy's epoch of
// the same worker count, and the cold epoch against its own hot one; then
// the half-cache series, per system and epoch.
func report(r *results) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## benchpipeline, %s\n\n", r.Date)
	fmt.Fprintf(&b, "- Images: %d JPEGs in %d classes, %.1f MB (mean %.0f KB); ImageFolder + dsmount.pil_loader + RandomResizedCrop(224) + ToTensor, batch %d\n",
		r.Images, r.Classes, float64(r.Bytes)/1e6, float64(r.Bytes)/float64(r.Images)/1e3, r.Batch)
	fmt.Fprintf(&b, "- Store: MinIO behind toxiproxy +%d ms ± %d; its ceiling for these images (64 GETs in flight): %.0f images/s\n", r.Latency, r.Jitter, r.Ceiling)
	fmt.Fprintf(&b, "- CPUs: %s\n", r.CPUs)
	fmt.Fprintf(&b, "- Command: `%s`\n", r.Command)
	if len(r.Table) > 0 {
		b.WriteString("\nEach row: one invocation of two epochs, the first after drop_caches on a fresh mount and cache, the second hot.\n\n")
		b.WriteString("| workers | system | cold images/s | hot images/s | cold / local cold | hot / local hot | cold / own hot |\n|---|---|---|---|---|---|---|\n")
		for _, row := range r.Table {
			vsLocal := func(v float64, hot bool) string {
				l, ok := r.row(sysLocal, row.Workers)
				if !ok {
					return "–"
				}
				if hot {
					return fmt.Sprintf("%.2f×", v/l.Hot)
				}
				return fmt.Sprintf("%.2f×", v/l.Cold)
			}
			fmt.Fprintf(&b, "| %d | %s | %.0f | %.0f | %s | %s | %.2f× |\n", row.Workers, row.System, row.Cold, row.Hot,
				vsLocal(row.Cold, false), vsLocal(row.Hot, true), row.Cold/row.Hot)
		}
		b.WriteString("\nTargets (issue 24): hot through dsmount ≥ 0.9× local at every worker count; with 4 workers a cold declared epoch ≥ 0.9× its hot rate when the ceiling is above the demand, and ≥ 5× rclone's cold epoch.\n")
		if d, ok := r.row(sysDeclared, 4); ok {
			if rc, ok := r.row(sysRclone, 4); ok {
				fmt.Fprintf(&b, "With 4 workers, declared cold / rclone cold: %.1f×.\n", d.Cold/rc.Cold)
			}
		}
	}
	if s := r.Series; s != nil {
		fmt.Fprintf(&b, "\nHalf-cache series: %d workers, caches of %.1f MB (half the images), one invocation per epoch on one mount; the pipeline in a memory cgroup of %.0f MB (its measured peaks of %.0f MB of anonymous memory and %.0f MB of mapped files, and a quarter of the images), its page cache emptied between epochs. Hit rate: 1 - bytes MinIO sent in the epoch / the images' bytes; dsmount's own: of the bytes its reads served, the share its cache held (prefetched included).\n\n",
			s.Workers, float64(s.CacheBytes)/1e6, float64(s.MemLimit)/1e6, float64(s.AnonPeak)/1e6, float64(s.MappedPeak)/1e6)
		b.WriteString("| system | epoch | images/s | MB from the store | GETs | hit rate | dsmount's own hit rate |\n|---|---|---|---|---|---|---|\n")
		for _, run := range s.Runs {
			for _, e := range run.Epochs {
				own := "–"
				if e.OwnHitRate != nil {
					own = fmt.Sprintf("%.2f", *e.OwnHitRate)
				}
				fmt.Fprintf(&b, "| %s | %d | %.0f | %.1f | %d | %s | %s |\n", run.System, e.Epoch, e.Rate, float64(e.StoreBytes)/1e6, e.StoreGETs, fmtHit(e.HitRate), own)
			}
		}
	}
	if d := r.Disk; d != nil {
		fmt.Fprintf(&b, "\nCache-disk pass: %d workers; every image cached (dsmount warm) before the first round; every image stat'ed once; each epoch one invocation after drop_caches 1 (pages, not inodes), the pipeline in a memory cgroup of %.0f MB (its need and a quarter of the images); each ratio against the local copy's epoch of the same round.\n\n",
			d.Workers, float64(d.MemLimit)/1e6)
		b.WriteString("| round | system | images/s | / local | READs per image | batched per image | GETs |\n|---|---|---|---|---|---|---|\n")
		for i, round := range d.Rounds {
			for _, e := range round {
				fmt.Fprintf(&b, "| %d | %s | %.0f | %.2f× | %.2f | %.2f | %d |\n", i+1, e.System, e.Rate, e.Ratio, e.ReadsPerImage, e.BatchedPerImage, e.StoreGETs)
			}
		}
		for _, e := range d.Means {
			fmt.Fprintf(&b, "| mean | %s | %.0f | %.2f× | %.2f | %.2f | %d |\n", e.System, e.Rate, e.Ratio, e.ReadsPerImage, e.BatchedPerImage, e.StoreGETs)
		}
		b.WriteString("\nTarget (issue 37, item 4): declared ≥ 0.95× the local copy under the same bound.\n")
	}
	fmt.Print(b.String())
}
