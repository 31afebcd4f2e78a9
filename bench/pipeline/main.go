// Command benchpipeline runs the experiment dsmount is meant to make
// unnecessary advice for: a real PyTorch image pipeline (torchvision
// ImageFolder, JPEG decode, RandomResizedCrop(224), ToTensor, batches of
// 64) over a Caltech-256-like image folder in S3, read by 1 to 7 loader
// workers, cold and hot, on the local copy, through dsmount with and
// without the sampler declaring its orders, through rclone's mount with
// its full VFS cache and through s3fs with its cache; then an epoch series
// with a cache of half the dataset.
//
//	go run ./test/benchpipeline [--isolate-backend] [--images 6000] [--workers 1,2,4,7]
//	    [--systems local,declared,undeclared,rclone,s3fs] [--series-epochs 4] [--series-workers 4]
//	    [--plot docs/pipeline.png] [--json docs/pipeline.json]
//
// The images are real JPEGs (python/tests/gen_images.py: 256 classes,
// 100-600 px a side, tens to hundreds of KB), uploaded to MinIO behind
// toxiproxy adding --latency ms to every answer; every mount reads the
// bucket through that proxy. Each system runs, per worker count, one
// python/tests/bench_pipeline.py invocation of two epochs: the first cold
// (the page cache dropped; for a mount a fresh cache and mount), the
// second hot. The reference of every ratio is the local copy's rate from
// the same run; the store's ceiling (its own parallel GETs of every image)
// is measured in the same run.
//
// The series (series.go) runs --series-epochs epochs, one invocation each,
// with --series-workers workers on one mount per system whose cache holds
// half the images' bytes, the pipeline in a memory cgroup (what it needs
// and a quarter of the images) whose page cache is emptied between
// epochs; per epoch it reports images/s and the hit rate, 1 - (bytes MinIO
// sent during the epoch / the images' bytes).
//
// The tables go to stdout; the results as JSON to --json, and a plot of
// them (python/tests/plot_pipeline.py) to --plot, both relative to the
// repository root unless absolute ("" skips either).
//
// Needs root (FUSE, drop_caches, cgroups), Debian's python3-torch,
// python3-torchvision, python3-pil, python3-matplotlib, rclone and s3fs
// (installed with apt-get if missing), and the MinIO and toxiproxy
// binaries test/run.sh installs.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

const python = "/usr/bin/python3"

type config struct {
	images, classes, latency, jitter, batch int
	workers                                 []int
	isolate                                 bool
	systems                                 []string // table names, in systemFlags' order
	seriesEpochs, seriesWorkers             int
	plot, json                              string
}

func parseFlags(args []string) (config, error) {
	c := config{}
	fs := flag.NewFlagSet("benchpipeline", flag.ContinueOnError)
	fs.IntVar(&c.images, "images", 6000, "images in the generated folder")
	fs.IntVar(&c.classes, "classes", 256, "class directories")
	fs.IntVar(&c.latency, "latency", 20, "ms the proxy adds to every answer")
	fs.IntVar(&c.jitter, "jitter", 5, "± ms of jitter on --latency")
	fs.IntVar(&c.batch, "batch", 64, "DataLoader batch size")
	workers := fs.String("workers", "1,2,4,7", `comma-separated DataLoader num_workers of the cold/hot table ("none": no table)`)
	fs.BoolVar(&c.isolate, "isolate-backend", false, "MinIO and toxiproxy on CPU 0, everything else on the other CPUs")
	var names []string
	for _, s := range systemFlags {
		names = append(names, s.flag)
	}
	systems := fs.String("systems", strings.Join(names, ","), "comma-separated systems to run, of "+strings.Join(names, ", "))
	fs.IntVar(&c.seriesEpochs, "series-epochs", 4, "epochs of the half-cache series (0: no series)")
	fs.IntVar(&c.seriesWorkers, "series-workers", 4, "DataLoader num_workers of the half-cache series")
	fs.StringVar(&c.plot, "plot", "docs/pipeline.png", `PNG plot of the results, relative to the repository root ("": none)`)
	fs.StringVar(&c.json, "json", "docs/pipeline.json", `the results as JSON, relative to the repository root ("": none)`)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if w := strings.TrimSpace(*workers); w != "none" && w != "" {
		for _, w := range strings.Split(w, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(w))
			if err != nil || n < 0 || n > 64 {
				return c, fmt.Errorf("--workers: %q is not a worker count in [0, 64]", w)
			}
			c.workers = append(c.workers, n)
		}
	}
	var err error
	if c.systems, err = parseSystems(*systems); err != nil {
		return c, err
	}
	series := false
	for _, s := range c.systems {
		series = series || inSeries(s)
	}
	switch {
	case c.classes < 1 || c.images < c.classes:
		return c, fmt.Errorf("want 1 <= --classes <= --images, got %d and %d", c.classes, c.images)
	case c.batch < 1:
		return c, fmt.Errorf("--batch %d: want at least 1", c.batch)
	case c.latency < 0 || c.jitter < 0:
		return c, errors.New("--latency and --jitter can't be negative")
	case c.seriesEpochs < 0 || c.seriesEpochs > 100:
		return c, fmt.Errorf("--series-epochs %d: want 0 to 100", c.seriesEpochs)
	case c.seriesWorkers < 0 || c.seriesWorkers > 64:
		return c, fmt.Errorf("--series-workers %d: want 0 to 64", c.seriesWorkers)
	case len(c.workers) == 0 && (c.seriesEpochs == 0 || !series):
		return c, errors.New("nothing to run: no --workers, and no series (--series-epochs 0, or none of declared, undeclared, rclone in --systems)")
	}
	return c, nil
}

// parseSystems reads --systems: a comma-separated list of systemFlags'
// names, each once, at least one.
func parseSystems(list string) ([]string, error) {
	seen := map[string]bool{}
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		ok := false
		for _, s := range systemFlags {
			if s.flag == f {
				ok = true
			}
		}
		if !ok {
			var names []string
			for _, s := range systemFlags {
				names = append(names, s.flag)
			}
			return nil, fmt.Errorf("--systems: unknown system %q (want a comma-separated list of %s)", f, strings.Join(names, ", "))
		}
		if seen[f] {
			return nil, fmt.Errorf("--systems: %q twice", f)
		}
		seen[f] = true
	}
	var out []string
	for _, s := range systemFlags {
		if seen[s.flag] {
			out = append(out, s.name)
		}
	}
	return out, nil
}

// epochs is what bench_pipeline.py prints.
type epochs struct {
	Images int `json:"images"`
	Epochs []struct {
		Seconds float64 `json:"seconds"`
		Images  int     `json:"images"`
	} `json:"epochs"`
}

func (e epochs) rate(i int) float64 { return float64(e.Epochs[i].Images) / e.Epochs[i].Seconds }

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchpipeline:", err)
		os.Exit(2)
	}
	t := testenv.NewProgramT("dsmount-benchpipeline")
	defer t.Close()
	stopSignals := t.CloseOnSignal()
	defer stopSignals()
	if err := ensureTools(cfg); err != nil {
		t.Fatalf("%v", err)
	}
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatalf("%v", err)
	}
	b := &bench{t: t, cfg: cfg, repo: repo, work: t.TempDir()}
	b.src = filepath.Join(b.work, "images")
	t0 := time.Now()
	out, err := runPy(nil, repo, "gen_images.py", "--out", b.src, "--classes", fmt.Sprint(cfg.classes), "--images", fmt.Sprint(cfg.images))
	if err != nil {
		t.Fatalf("%v", err)
	}
	var gen struct{ Images, Bytes int64 }
	if err := json.Unmarshal(out, &gen); err != nil {
		t.Fatalf("gen_images.py: %v: %q", err, out)
	}
	b.images, b.bytes = gen.Images, gen.Bytes
	logf("images: %d JPEGs, %.1f MB (mean %.0f KB), in %d classes, made in %v", gen.Images, float64(gen.Bytes)/1e6,
		float64(gen.Bytes)/float64(gen.Images)/1e3, cfg.classes, time.Since(t0).Round(time.Second))

	b.mc = testenv.StartMinIO(t)
	b.mc.CreateBucket("bench")
	if err := b.mc.UploadDirErr(context.Background(), "bench", "caltech", b.src, 32); err != nil {
		t.Fatalf("upload: %v", err)
	}
	tp := testenv.StartToxiproxy(t)
	b.proxy = tp.AddProxy("minio", b.mc.Addr())
	tp.AddLatency("minio", cfg.latency, cfg.jitter)
	cpuNote := "all processes share all CPUs"
	if cfg.isolate {
		if cpuNote, err = testenv.IsolateBackend(b.mc.Pid(), tp.Pid()); err != nil {
			t.Fatalf("--isolate-backend: %v", err)
		}
	}
	logf("store: MinIO behind toxiproxy (+%d ms ± %d); %s", cfg.latency, cfg.jitter, cpuNote)
	if b.bin, err = testenv.BuildDsmount(filepath.Join(b.work, "bin")); err != nil {
		t.Fatalf("build: %v", err)
	}

	res := &results{Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Command: commandLine(), Images: gen.Images, Bytes: gen.Bytes,
		Classes: cfg.classes, Batch: cfg.batch, Latency: cfg.latency, Jitter: cfg.jitter, CPUs: cpuNote, Workers: cfg.workers}
	res.Ceiling = storeCeiling(t, b.mc, "http://"+b.proxy, b.src)
	logf("store ceiling: %.0f images/s (64 GETs in flight)", res.Ceiling)

	for _, w := range cfg.workers {
		for _, sys := range cfg.systems {
			e := b.coldHot(sys, w)
			res.Table = append(res.Table, tableRow{System: sys, Workers: w, Cold: e.rate(0), Hot: e.rate(1)})
			logf("%s, %d workers: cold %.0f images/s, hot %.0f", sys, w, e.rate(0), e.rate(1))
		}
	}
	if cfg.seriesEpochs > 0 && slices.ContainsFunc(cfg.systems, inSeries) {
		res.Series = b.series()
	}
	report(res)
	if err := writeOutputs(repo, b.work, cfg, res); err != nil {
		t.Fatalf("%v", err)
	}
}

// coldHot runs two epochs of the pipeline with workers on a fresh mount
// of sys (the local copy: as it is) after dropping the page cache: the
// first cold, the second hot.
func (b *bench) coldHot(sys string, workers int) epochs {
	m := b.mount(sys, 0)
	if m.pid != 0 && b.cfg.isolate && workers == b.cfg.workers[0] {
		logf("%s: daemon pid %d may run on CPUs %s", sys, m.pid, cpusOf(m.pid))
	}
	if err := testenv.DropCaches(); err != nil {
		b.t.Fatalf("%v", err)
	}
	args := []string{"--root", m.dir, "--workers", fmt.Sprint(workers), "--epochs", "2", "--batch", fmt.Sprint(b.cfg.batch)}
	if sys == sysDeclared {
		args = append(args, "--declare")
	}
	out, err := runPy(nil, b.repo, "bench_pipeline.py", args...)
	if err != nil {
		b.t.Fatalf("%s: %v", sys, err)
	}
	var e epochs
	if err := json.Unmarshal(out, &e); err != nil || len(e.Epochs) != 2 {
		b.t.Fatalf("bench_pipeline.py over %s: %v: %q", m.dir, err, out)
	}
	if m.note != nil {
		logf("%s, %d workers: %s", sys, workers, m.note())
	}
	if err := m.stop(); err != nil {
		b.t.Fatalf("%s: %v", sys, err)
	}
	return e
}

// commandLine is how this program was run, for the report.
func commandLine() string {
	args := []string{"go", "run", "./test/benchpipeline"}
	for _, a := range os.Args[1:] {
		if a == "" || strings.ContainsAny(a, " \t'\"$") {
			a = strconv.Quote(a) // an empty --plot "" must survive a copy and paste
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
}

// runPy runs python/tests/<script> with the checkout's python/ package on
// the path, inside cg unless it is nil, and returns its stdout.
func runPy(cg *testenv.MemCgroup, repo, script string, args ...string) ([]byte, error) {
	argv := append([]string{python, filepath.Join(repo, "python", "tests", script)}, args...)
	if cg != nil {
		argv = cg.Wrap(argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	// Killed when this program exits; the signal survives the wrapper's
	// exec. An interrupt's cleanups run before that exit, so the cgroup's
	// Remove kills what still runs in it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(repo, "python"), "PYTHONDONTWRITEBYTECODE=1", "OMP_NUM_THREADS=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %v\nstderr: %s", script, strings.Join(args, " "), err, lastLines(stderr.String(), 20))
	}
	return bytes.TrimSpace(stdout.Bytes()), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
