package pipeline

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/test/testenv"
)

// The cache-disk pass: what a dataset larger than the node's RAM reads
// each epoch once it is cached. Each chosen dsmount system gets one mount
// whose cache holds every image, filled with `dsmount warm`, and every
// image of each tree (the local copy's too) is stat'ed once, as the epoch
// before would have looked it up. Then --disk-epochs rounds, each one
// epoch of the pipeline (--series-workers workers, one invocation) per
// system and one on the local copy, the reference, in turn (the local copy
// first in even rounds, last in odd ones, so that neither always runs on a
// machine the other just warmed). Every epoch runs after drop_caches 1
// (the page cache, not the inodes and dentries: a node that keeps reading
// one tree larger than its memory), in a fresh memory cgroup limited as
// the series' is: what the pipeline needs and a quarter of the images. So
// the images come from the cache disk through the daemon, or from the
// local disk, never from a page cache an earlier epoch left, and the
// kernel can't keep more than a quarter of them within an epoch either.
//
// Declared, the job is kept between rounds, as in the series, so each
// declaration's next order stands. A file the daemon pushes into the
// mount's page cache ahead of the readers is charged to the daemon's
// memory, not the pipeline's cgroup: the push window bounds it.

type diskEpoch struct {
	System string  `json:"system"`
	Rate   float64 `json:"images_per_s"`
	Ratio  float64 `json:"vs_local"` // Rate over the local copy's in the same round
	// READs the daemon served and those of them batched, per image (0 for
	// the local copy).
	ReadsPerImage   float64 `json:"reads_per_image"`
	BatchedPerImage float64 `json:"batched_reads_per_image"`
	StoreGETs       int64   `json:"store_gets"` // a cached mount should make none
}

type diskResult struct {
	Workers  int           `json:"workers"`
	MemLimit int64         `json:"cgroup_limit_bytes"`
	Rounds   [][]diskEpoch `json:"rounds"`
	// Means are each system's images/s over the rounds, and its mean over
	// the local copy's (the rounds' order alternates, so the mean weighs
	// first and last places alike).
	Means []diskEpoch `json:"means"`
}

// inDisk says whether sys runs the cache-disk pass (beside the local copy,
// its reference).
func inDisk(sys string) bool { return sys == sysDeclared || sys == sysUndeclared }

// cachedMount is one warmed mount of the pass.
type cachedMount struct {
	*mount
	job bool // declared: the pipeline declares its orders
}

func (b *bench) disk() *diskResult {
	c := b.cfg
	anon, mapped := b.need()
	res := &diskResult{Workers: c.seriesWorkers, MemLimit: anon + mapped + b.bytes/4}
	var mounts []cachedMount
	for _, sys := range c.systems {
		if !inDisk(sys) {
			continue
		}
		m := b.mount(sys, 0)
		t0 := time.Now()
		rep, _ := testenv.Warm(b.t, b.bin, 30*time.Minute, m.dir)
		if rep.CacheFull || rep.ChunksNotCached > 0 {
			b.t.Fatalf("cache-disk pass, %s: warm left %d chunks uncached (cache full: %v)", sys, rep.ChunksNotCached, rep.CacheFull)
		}
		cli.Logf("cache-disk pass, %s: warmed %d files, %.1f MB, in %v", sys, rep.Files, float64(rep.Bytes)/1e6, time.Since(t0).Round(time.Millisecond))
		mounts = append(mounts, cachedMount{mount: m, job: sys == sysDeclared})
	}
	for _, dir := range append([]string{b.src}, mountDirs(mounts)...) {
		if err := statTree(dir); err != nil {
			b.t.Fatalf("cache-disk pass: %v", err)
		}
	}
	cli.Logf("cache-disk pass: %d workers, every epoch after drop_caches 1 in a memory cgroup of %.0f MB (the pipeline's need and a quarter of the images)",
		c.seriesWorkers, float64(res.MemLimit)/1e6)
	for r := 0; r < c.diskEpochs; r++ {
		order := []cachedMount{{mount: &mount{sys: sysLocal, dir: b.src}}}
		if r%2 == 0 {
			order = append(order, mounts...)
		} else {
			order = append(append([]cachedMount{}, mounts...), order...)
		}
		var round []diskEpoch
		for _, m := range order {
			round = append(round, b.diskEpoch(m, r, r < c.diskEpochs-1, res.MemLimit))
		}
		local := round[0]
		if r%2 == 1 {
			local = round[len(round)-1]
		}
		for i := range round {
			round[i].Ratio = round[i].Rate / local.Rate
			cli.Logf("cache-disk pass, round %d, %s: %.0f images/s, %.2f× the local copy; %.2f READs per image (%.2f batched), %d GETs",
				r+1, round[i].System, round[i].Rate, round[i].Ratio, round[i].ReadsPerImage, round[i].BatchedPerImage, round[i].StoreGETs)
		}
		res.Rounds = append(res.Rounds, round)
	}
	res.Means = diskMeans(res.Rounds)
	for _, m := range res.Means {
		cli.Logf("cache-disk pass, mean of %d rounds, %s: %.0f images/s, %.2f× the local copy's mean", len(res.Rounds), m.System, m.Rate, m.Ratio)
	}
	for _, m := range mounts {
		if err := m.stop(); err != nil {
			b.t.Fatalf("%s: %v", m.sys, err)
		}
	}
	return res
}

// diskEpoch runs epoch e of the pipeline over m in a fresh cgroup limited
// to limit, after drop_caches 1.
func (b *bench) diskEpoch(m cachedMount, e int, keepJob bool, limit int64) diskEpoch {
	c := b.cfg
	cg, err := testenv.NewMemCgroup(b.t, fmt.Sprintf("benchpipeline-%d-disk-%d", os.Getpid(), b.runs), limit)
	if err != nil {
		b.t.Fatalf("%v", err)
	}
	b.runs++
	defer cg.Remove()
	if err := testenv.DropPages(); err != nil {
		b.t.Fatalf("%v", err)
	}
	args := []string{"--root", m.dir, "--workers", fmt.Sprint(c.seriesWorkers), "--epochs", "1", "--first-epoch", fmt.Sprint(e),
		"--batch", fmt.Sprint(c.batch)}
	if m.job {
		args = append(args, "--declare")
		if keepJob {
			args = append(args, "--keep-job")
		}
	}
	var st0 control.MountStats
	if m.sys != sysLocal {
		st0 = testenv.Stats(b.t, b.bin, m.dir).Mount
	}
	gets0, _ := b.storeCounts()
	out, err := runPy(cg, b.repo, "bench_pipeline.py", args...)
	if err != nil {
		st, _ := cg.Stats()
		b.t.Fatalf("cache-disk pass, %s, epoch %d (cgroup: %+v): %v", m.sys, e+1, st, err)
	}
	gets1, _ := b.storeCounts()
	if st, err := cg.Stats(); err == nil && st.OOMs > 0 {
		b.t.Fatalf("cache-disk pass, %s: the OOM killer killed %d processes in the pipeline's cgroup", m.sys, st.OOMs)
	}
	var pe epochs
	if err := json.Unmarshal(out, &pe); err != nil || len(pe.Epochs) != 1 {
		b.t.Fatalf("bench_pipeline.py over %s: %v: %q", m.dir, err, out)
	}
	de := diskEpoch{System: m.sys, Rate: pe.rate(0), StoreGETs: gets1 - gets0}
	if m.sys != sysLocal {
		st1 := testenv.Stats(b.t, b.bin, m.dir).Mount
		n := float64(max(pe.Epochs[0].Images, 1))
		de.ReadsPerImage = float64(st1.Reads-st0.Reads) / n
		de.BatchedPerImage = float64(st1.BatchedReads-st0.BatchedReads) / n
	}
	return de
}

// need is the pipeline's own memory with the series' workers
// (pipelineNeed), measured once per run.
func (b *bench) need() (anon, mapped int64) {
	if !b.needDone {
		b.needAnon, b.needMapped = b.pipelineNeed()
		b.needDone = true
	}
	return b.needAnon, b.needMapped
}

func mountDirs(ms []cachedMount) []string {
	var dirs []string
	for _, m := range ms {
		dirs = append(dirs, m.dir)
	}
	return dirs
}

// statTree stats every file under root (a mount's: one LOOKUP each).
func statTree(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		_, err = os.Stat(p)
		return err
	})
}

// diskMeans is each system's mean over the rounds (in the first round's
// order of systems), its Ratio the mean over the local copy's mean.
func diskMeans(rounds [][]diskEpoch) []diskEpoch {
	if len(rounds) == 0 {
		return nil
	}
	var means []diskEpoch
	for _, first := range rounds[0] {
		m := diskEpoch{System: first.System}
		for _, round := range rounds {
			for _, e := range round {
				if e.System == m.System {
					m.Rate += e.Rate / float64(len(rounds))
					m.ReadsPerImage += e.ReadsPerImage / float64(len(rounds))
					m.BatchedPerImage += e.BatchedPerImage / float64(len(rounds))
					m.StoreGETs += e.StoreGETs
				}
			}
		}
		means = append(means, m)
	}
	for i := range means {
		if means[0].Rate > 0 {
			means[i].Ratio = means[i].Rate / means[0].Rate // the local copy comes first in round 1
		}
	}
	return means
}
