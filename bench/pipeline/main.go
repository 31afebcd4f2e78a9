package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dsmount/dsmount/bench/internal/benchenv"
	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/test/testenv"
)

// Summary is the subcommand's line in bench's --help.
const Summary = "a PyTorch image pipeline on dsmount, rclone and s3fs against the local copy"

const python = "/usr/bin/python3"

type config struct {
	benchenv.Proxy
	images, classes, batch      int
	workers                     []int
	isolate                     bool
	systems                     []string // table names, in systemFlags' order
	seriesEpochs, seriesWorkers int
	diskEpochs                  int
	plot, json                  string
}

func parseFlags(args []string) (config, error) {
	c := config{}
	fs := cli.NewFlagSet("pipeline", Summary)
	fs.IntVar(&c.images, "images", 6000, "images in the generated folder")
	fs.IntVar(&c.classes, "classes", 256, "class directories")
	c.Proxy.AddFlags(fs, 5)
	fs.IntVar(&c.batch, "batch", 64, "DataLoader batch size")
	workers := fs.String("workers", "1,2,4,7", `comma-separated DataLoader num_workers of the cold/hot table ("none": no table)`)
	benchenv.IsolateFlag(fs, &c.isolate)
	var names []string
	for _, s := range systemFlags {
		names = append(names, s.flag)
	}
	systems := fs.String("systems", strings.Join(names, ","), "comma-separated systems to run, of "+strings.Join(names, ", "))
	fs.IntVar(&c.seriesEpochs, "series-epochs", 4, "epochs of the half-cache series (0: no series)")
	fs.IntVar(&c.seriesWorkers, "series-workers", 4, "DataLoader num_workers of the half-cache series")
	fs.IntVar(&c.diskEpochs, "disk-epochs", 2, "rounds of the cache-disk pass: fully cached mounts, every epoch after drop_caches with the pipeline's page cache bounded to a quarter of the images, beside the local copy under the same bound (0: none)")
	fs.StringVar(&c.plot, "plot", "docs/pipeline.png", `PNG plot of the results, relative to the repository root ("": none)`)
	fs.StringVar(&c.json, "json", "docs/pipeline.json", `the results as JSON, relative to the repository root ("": none)`)
	if err := cli.Parse(fs, args); err != nil {
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
	series, disk := false, false
	for _, s := range c.systems {
		series = series || inSeries(s)
		disk = disk || inDisk(s)
	}
	switch {
	case c.classes < 1 || c.images < c.classes:
		return c, fmt.Errorf("want 1 <= --classes <= --images, got %d and %d", c.classes, c.images)
	case c.batch < 1:
		return c, fmt.Errorf("--batch %d: want at least 1", c.batch)
	case c.Latency < 0 || c.Jitter < 0:
		return c, errors.New("--latency and --jitter can't be negative")
	case c.seriesEpochs < 0 || c.seriesEpochs > 100:
		return c, fmt.Errorf("--series-epochs %d: want 0 to 100", c.seriesEpochs)
	case c.seriesWorkers < 0 || c.seriesWorkers > 64:
		return c, fmt.Errorf("--series-workers %d: want 0 to 64", c.seriesWorkers)
	case c.diskEpochs < 0 || c.diskEpochs > 100:
		return c, fmt.Errorf("--disk-epochs %d: want 0 to 100", c.diskEpochs)
	case len(c.workers) == 0 && (c.seriesEpochs == 0 || !series) && (c.diskEpochs == 0 || !disk):
		return c, errors.New("nothing to run: no --workers, no series (--series-epochs 0, or none of declared, undeclared, rclone in --systems) and no cache-disk pass (--disk-epochs 0, or neither declared nor undeclared in --systems)")
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

// Main runs the benchmark with the command line args (after "pipeline").
func Main(args []string) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return cli.Refused(err)
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
	cli.Logf("images: %d JPEGs, %.1f MB (mean %.0f KB), in %d classes, made in %v", gen.Images, float64(gen.Bytes)/1e6,
		float64(gen.Bytes)/float64(gen.Images)/1e3, cfg.classes, time.Since(t0).Round(time.Second))

	store := benchenv.StartStore(t, "bench", cfg.isolate)
	b.mc = store.MinIO
	store.Upload(t, "bench", "caltech", b.src, 32)
	b.proxy = store.AddProxy("minio", cfg.Proxy)
	cpuNote := store.CPUNote
	cli.Logf("store: MinIO behind toxiproxy (+%d ms ± %d); %s", cfg.Latency, cfg.Jitter, cpuNote)
	if b.bin, err = testenv.BuildDsmount(filepath.Join(b.work, "bin")); err != nil {
		t.Fatalf("build: %v", err)
	}

	res := &results{Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Command: commandLine(args), Images: gen.Images, Bytes: gen.Bytes,
		Classes: cfg.classes, Batch: cfg.batch, Latency: cfg.Latency, Jitter: cfg.Jitter, CPUs: cpuNote, Workers: cfg.workers}
	res.Ceiling = storeCeiling(t, store.Client("http://"+b.proxy), b.src)
	cli.Logf("store ceiling: %.0f images/s (64 GETs in flight)", res.Ceiling)

	for _, w := range cfg.workers {
		for _, sys := range cfg.systems {
			e := b.coldHot(sys, w)
			res.Table = append(res.Table, tableRow{System: sys, Workers: w, Cold: e.rate(0), Hot: e.rate(1)})
			cli.Logf("%s, %d workers: cold %.0f images/s, hot %.0f", sys, w, e.rate(0), e.rate(1))
		}
	}
	if cfg.seriesEpochs > 0 && slices.ContainsFunc(cfg.systems, inSeries) {
		res.Series = b.series()
	}
	if cfg.diskEpochs > 0 && slices.ContainsFunc(cfg.systems, inDisk) {
		res.Disk = b.disk()
	}
	report(res)
	if err := writeOutputs(repo, b.work, cfg, res); err != nil {
		t.Fatalf("%v", err)
	}
	return nil
}

// coldHot runs two epochs of the pipeline with workers on a fresh mount
// of sys (the local copy: as it is) after dropping the page cache: the
// first cold, the second hot.
func (b *bench) coldHot(sys string, workers int) epochs {
	m := b.mount(sys, 0)
	if m.pid != 0 && b.cfg.isolate && workers == b.cfg.workers[0] {
		cli.Logf("%s: daemon pid %d may run on CPUs %s", sys, m.pid, cpusOf(m.pid))
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
		cli.Logf("%s, %d workers: %s", sys, workers, m.note())
	}
	if err := m.stop(); err != nil {
		b.t.Fatalf("%s: %v", sys, err)
	}
	return e
}

// commandLine is how this program was run (args: its flags), for the
// report.
func commandLine(args []string) string {
	words := []string{"go", "run", "./bench", "pipeline"}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$") {
			a = strconv.Quote(a) // an empty --plot "" must survive a copy and paste
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
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
