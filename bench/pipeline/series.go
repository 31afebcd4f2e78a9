package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/test/testenv"
)

// The half-cache series: per system (dsmount declared and not, rclone),
// one mount whose cache holds half the images' bytes, and --series-epochs
// invocations of bench_pipeline.py of one epoch each (--first-epoch 0, 1,
// ...: the same orders one invocation of them all would read; declared,
// the job is kept between them so each declaration's next order stands).
//
// The pipeline runs in a memory cgroup so that the kernel's page cache
// can't hold the dataset in the readers' stead. Its limit is what the
// pipeline itself needs plus a quarter of the images' bytes. The need is
// measured in the same run: one epoch of the pipeline on the local copy
// after drop_caches, in a cgroup without a limit, sampled every 10 ms; it
// is the peak of its anonymous memory and shmem (the workers' heaps and
// the batches in flight: some 500-650 MB with 4 workers, which no reclaim
// can drop without swap) plus the peak of its mapped files (the code of
// Python, torch and their libraries: 100-300 MB). The mapped part is
// reclaimable, so a spike of anonymous memory beyond the sampled peak
// pushes library pages out rather than waking the OOM killer (which
// fails the run).
//
// That limit alone can't hold the page cache to a quarter of the images:
// the pipeline's anonymous memory swings by 50-100 MB within an epoch (the
// batches queued), and what it leaves free the page cache takes; a run of
// 600 images (24 MB) kept all of them, and dsmount then read no byte from
// the store in its third epoch. So between two epochs, with no process in
// it, the cgroup's page cache is emptied (memory.force_empty or
// memory.reclaim): no epoch finds images a previous one left in the
// readers' page cache, and the hit rate is the mounts' own caches'. Within
// an epoch each image is read once, so the page cache can't serve it
// twice there. The mounts' daemons run outside the cgroup: their own
// cache files are the node's disk cache, bounded by the cache size.
//
// Hit rate is the same for every system: 1 - (bytes MinIO sent during
// the epoch / the images' bytes), from MinIO's own counters, read when
// each invocation ends; what a daemon fetches between two invocations
// (prefetch of the next epoch's declared head) counts for the next epoch.
// The count is of every S3 response's bytes (listings included, which
// are about 1% of these small images).

type seriesEpoch struct {
	Epoch      int      `json:"epoch"` // from 1
	Seconds    float64  `json:"seconds"`
	Images     int      `json:"images"`
	Rate       float64  `json:"images_per_s"`
	StoreBytes int64    `json:"store_bytes"`
	StoreGETs  int64    `json:"store_gets"`
	HitRate    float64  `json:"hit_rate"`
	OwnHitRate *float64 `json:"dsmount_hit_rate,omitempty"` // bytes from its cache / bytes it served, per `dsmount stats`
	PageCache  int64    `json:"cgroup_page_cache_bytes"`    // the pipeline's page cache at the epoch's end
	AnonPeak   int64    `json:"cgroup_anon_peak_bytes"`     // the pipeline's anonymous memory at its highest
}

type seriesRun struct {
	System    string        `json:"system"`
	Epochs    []seriesEpoch `json:"epochs"`
	MemPeak   int64         `json:"cgroup_peak_bytes,omitempty"`
	LimitHits int64         `json:"cgroup_limit_hits"`
	Note      string        `json:"note,omitempty"`
}

type seriesResult struct {
	Workers    int         `json:"workers"`
	Epochs     int         `json:"epochs"`
	CacheBytes int64       `json:"cache_bytes"`
	AnonPeak   int64       `json:"pipeline_anon_peak_bytes"`
	MappedPeak int64       `json:"pipeline_mapped_peak_bytes"`
	MemLimit   int64       `json:"cgroup_limit_bytes"`
	Runs       []seriesRun `json:"runs"`
}

// series runs the half-cache series of every chosen system that has one.
func (b *bench) series() *seriesResult {
	c := b.cfg
	res := &seriesResult{Workers: c.seriesWorkers, Epochs: c.seriesEpochs, CacheBytes: b.bytes / 2}
	res.AnonPeak, res.MappedPeak = b.need()
	res.MemLimit = res.AnonPeak + res.MappedPeak + b.bytes/4
	cli.Logf("series: caches of %.1f MB (half the images); the pipeline's anonymous memory peaked at %.0f MB and its mapped files at %.0f MB, so its cgroup's limit is %.0f MB (those and a quarter of the images)",
		float64(res.CacheBytes)/1e6, float64(res.AnonPeak)/1e6, float64(res.MappedPeak)/1e6, float64(res.MemLimit)/1e6)
	for _, sys := range c.systems {
		if inSeries(sys) {
			res.Runs = append(res.Runs, b.seriesOn(sys, res))
		}
	}
	return res
}

// pipelineNeed runs one epoch of the pipeline with the series' workers on
// the local copy after drop_caches, in a cgroup without a limit, and
// returns the peaks of its anonymous memory (shmem included) and of its
// mapped files, sampled every 10 ms.
func (b *bench) pipelineNeed() (anon, mapped int64) {
	cg, err := testenv.NewMemCgroup(b.t, fmt.Sprintf("benchpipeline-%d-need", os.Getpid()), 0)
	if err != nil {
		b.t.Fatalf("%v", err)
	}
	defer cg.Remove()
	if err := testenv.DropCaches(); err != nil {
		b.t.Fatalf("%v", err)
	}
	stop := cg.SamplePeaks(10 * time.Millisecond)
	_, err = runPy(cg, b.repo, "bench_pipeline.py", "--root", b.src, "--workers", fmt.Sprint(b.cfg.seriesWorkers),
		"--epochs", "1", "--batch", fmt.Sprint(b.cfg.batch))
	anon, mapped = stop()
	if err != nil {
		b.t.Fatalf("measuring the pipeline's memory: %v", err)
	}
	return anon, mapped
}

// seriesOn runs the series on one fresh mount of sys.
func (b *bench) seriesOn(sys string, sr *seriesResult) seriesRun {
	c := b.cfg
	run := seriesRun{System: sys}
	m := b.mount(sys, sr.CacheBytes)
	cg, err := testenv.NewMemCgroup(b.t, fmt.Sprintf("benchpipeline-%d-%d", os.Getpid(), b.runs), sr.MemLimit)
	if err != nil {
		b.t.Fatalf("%v", err)
	}
	if err := testenv.DropCaches(); err != nil {
		b.t.Fatalf("%v", err)
	}
	gets0, bytes0 := b.storeCounts()
	var own0 *dsmStats
	if m.stats != nil {
		own0 = m.stats()
	}
	for e := 0; e < c.seriesEpochs; e++ {
		args := []string{"--root", m.dir, "--workers", fmt.Sprint(c.seriesWorkers), "--epochs", "1", "--first-epoch", fmt.Sprint(e),
			"--batch", fmt.Sprint(c.batch)}
		if sys == sysDeclared {
			args = append(args, "--declare")
			if e < c.seriesEpochs-1 {
				args = append(args, "--keep-job")
			}
		}
		t0 := time.Now()
		sample := cg.SamplePeaks(10 * time.Millisecond)
		out, err := runPy(cg, b.repo, "bench_pipeline.py", args...)
		anonPeak, _ := sample()
		wall := time.Since(t0)
		if err != nil {
			st, _ := cg.Stats()
			b.t.Fatalf("series, %s, epoch %d (cgroup: %+v): %v", sys, e+1, st, err)
		}
		var pe epochs
		if err := json.Unmarshal(out, &pe); err != nil || len(pe.Epochs) != 1 {
			b.t.Fatalf("bench_pipeline.py over %s: %v: %q", m.dir, err, out)
		}
		gets1, bytes1 := b.storeCounts()
		ep := seriesEpoch{Epoch: e + 1, Seconds: pe.Epochs[0].Seconds, Images: pe.Epochs[0].Images, Rate: pe.rate(0),
			StoreBytes: bytes1 - bytes0, StoreGETs: gets1 - gets0, AnonPeak: anonPeak}
		ep.HitRate = 1 - float64(ep.StoreBytes)/float64(b.bytes)
		bytes0, gets0 = bytes1, gets1
		if m.stats != nil {
			if own1 := m.stats(); own0 != nil && own1 != nil {
				hit, miss := own1.fromCache-own0.fromCache, own1.fromBackend-own0.fromBackend
				if hit+miss > 0 {
					r := float64(hit) / float64(hit+miss)
					ep.OwnHitRate = &r
				}
				own0 = own1
			}
		}
		if st, err := cg.Stats(); err == nil {
			ep.PageCache = st.File
		}
		if err := cg.DropPageCache(); err != nil {
			b.t.Fatalf("emptying the pipeline's page cache: %v", err)
		}
		left, _ := cg.Stats()
		run.Epochs = append(run.Epochs, ep)
		cli.Logf("series, %s, epoch %d: %.0f images/s, %.1f MB from the store in %d GETs, hit rate %s%s; the pipeline's anonymous memory peaked at %.0f MB, its page cache %.0f MB at the end (%.1f MB after emptying); invocation %.1f s",
			sys, e+1, ep.Rate, float64(ep.StoreBytes)/1e6, ep.StoreGETs, fmtHit(ep.HitRate), ownNote(ep.OwnHitRate), float64(anonPeak)/1e6,
			float64(ep.PageCache)/1e6, float64(left.File)/1e6, wall.Seconds())
	}
	if st, err := cg.Stats(); err == nil {
		run.MemPeak, run.LimitHits = st.Peak, st.Limits
		if st.OOMs > 0 {
			b.t.Fatalf("series, %s: the OOM killer killed %d processes in the pipeline's cgroup", sys, st.OOMs)
		}
	}
	if m.note != nil {
		run.Note = m.note()
		cli.Logf("series, %s: %s", sys, run.Note)
	}
	if err := m.stop(); err != nil {
		b.t.Fatalf("%s: %v", sys, err)
	}
	cg.Remove()
	return run
}

// storeCounts is how many GetObject requests MinIO has started serving so
// far, and how many bytes it has sent in S3 responses.
func (b *bench) storeCounts() (gets, bytes int64) {
	gets, bytes, err := b.mc.GetObjectCountErr(context.Background())
	if err != nil {
		b.t.Fatalf("reading MinIO's metrics: %v", err)
	}
	return gets, bytes
}

// fmtHit prints a hit rate; a cold epoch's, a hair under 0 for the
// listing's bytes, as 0.00 rather than -0.00.
func fmtHit(r float64) string {
	if r < 0 && r > -0.005 {
		r = 0
	}
	return fmt.Sprintf("%.2f", r)
}

func ownNote(r *float64) string {
	if r == nil {
		return ""
	}
	return fmt.Sprintf(" (dsmount's own: %.2f)", *r)
}
