package gpu

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dsmount/dsmount/bench/internal/benchenv"
	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/test/testenv"
)

// Summary is the subcommand's line in bench's --help.
const Summary = "a GPU training step fed through StagingLoader: local directory, dsmount from disk, page cache and MinIO"

// The passes, by their --passes names, in the order a sweep runs them.
const (
	passCeiling   = "ceiling"
	passLocal     = "local"
	passDisk      = "disk"
	passDeclared  = "declared"
	passPageCache = "pagecache"
	passMinIO     = "minio"
)

var allPasses = []string{passCeiling, passLocal, passDisk, passDeclared, passPageCache, passMinIO}

// passTitle is each pass's name in the tables.
var passTitle = map[string]string{
	passCeiling:   "GPU alone (synthetic batch on the device)",
	passLocal:     "local directory, page cache dropped",
	passDisk:      "dsmount, cache disk, page cache dropped, not declared",
	passDeclared:  "dsmount, cache disk, page cache dropped, declared",
	passPageCache: "dsmount, page cache",
	passMinIO:     "dsmount, cold, declared, MinIO behind the proxy",
}

type config struct {
	benchenv.Proxy
	images, classes, batch, crop int
	model, device                string
	workers, minioWorkers        []int
	passes                       []string
	seconds                      float64
	warmup                       int // batches; -1: as many as the pass's workers
	genProcs                     int
	check                        bool
	deadline                     time.Duration
	repo, python, dsmount, json  string
}

func parseFlags(args []string) (config, error) {
	c := config{}
	fs := cli.NewFlagSet("gpu", Summary+"\n\nA pass's figures: images/s over its window, and the GPU wait share (the step loop's time in next() over the window's).\nSee docs/gpu.md; bench/gpu/device.sh runs it on a machine without Go.")
	fs.IntVar(&c.images, "images", 16000, "JPEGs in the generated ImageFolder (300-500 px, 60-150 KB)")
	fs.IntVar(&c.classes, "classes", 100, "class directories")
	fs.IntVar(&c.batch, "batch", 256, "batch size")
	fs.IntVar(&c.crop, "crop", 224, "RandomResizedCrop's size")
	fs.StringVar(&c.model, "model", "resnet50", `a torchvision.models constructor, or "tiny" (a small conv net, for CPU smoke runs)`)
	fs.StringVar(&c.device, "device", "auto", `torch device: "auto" (cuda if available, else cpu), "cuda", "cpu"`)
	workers := fs.String("workers", "1,2,4,7,14", "comma-separated DataLoader num_workers of the sweep")
	minioWorkers := fs.String("minio-workers", "14", "comma-separated worker counts of the minio pass (each on a fresh mount and cache)")
	passes := fs.String("passes", strings.Join(allPasses, ","), "comma-separated passes to run, of "+strings.Join(allPasses, ", "))
	fs.Float64Var(&c.seconds, "seconds", 5, "each pass's measured window after its warm-up, in seconds (0: the whole epoch)")
	fs.IntVar(&c.warmup, "warmup", -1, "batches of warm-up before each pass's window (-1: as many as its workers)")
	fs.IntVar(&c.genProcs, "gen-procs", runtime.NumCPU(), "processes generating the images")
	fs.BoolVar(&c.check, "check", false, "after the sweep, one whole declared epoch on the mount (2 workers) whose staged order the JSON carries beside the sampler's")
	fs.DurationVar(&c.deadline, "deadline", 0, "skip the passes that would start after this long from the start (0: none); the JSON says which")
	c.Proxy.AddFlags(fs, 5)
	fs.StringVar(&c.repo, "repo", "", "the checkout (python/ is read from it; default: the directory above the working directory holding go.mod and python/dsmount, else this source's)")
	fs.StringVar(&c.python, "python", envOr("DSMOUNT_PYTHON", "python3"), "the Python with torch and torchvision ($DSMOUNT_PYTHON)")
	fs.StringVar(&c.dsmount, "dsmount", os.Getenv("DSMOUNT_BIN"), "the dsmount binary ($DSMOUNT_BIN; default: build this checkout's)")
	fs.StringVar(&c.json, "json", "", `write the results as JSON to this file ("": none); rewritten after every pass`)
	if err := cli.Parse(fs, args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if c.workers, err = parseWorkers("--workers", *workers); err != nil {
		return c, err
	}
	if c.minioWorkers, err = parseWorkers("--minio-workers", *minioWorkers); err != nil {
		return c, err
	}
	if c.passes, err = parsePasses(*passes); err != nil {
		return c, err
	}
	switch {
	case c.classes < 1 || c.images < c.classes || c.images > 10_000_000:
		return c, fmt.Errorf("want 1 <= --classes <= --images <= 10000000, got %d and %d", c.classes, c.images)
	case c.batch < 1 || c.batch > 65536:
		return c, fmt.Errorf("--batch %d: want 1 to 65536", c.batch)
	case c.crop < 8 || c.crop > 4096:
		return c, fmt.Errorf("--crop %d: want 8 to 4096", c.crop)
	case c.model == "" || strings.ContainsAny(c.model, " ./\\\n"):
		return c, fmt.Errorf("--model %q: want a torchvision.models name or tiny", c.model)
	case c.device != "auto" && c.device != "cpu" && c.device != "cuda" && !strings.HasPrefix(c.device, "cuda:"):
		return c, fmt.Errorf("--device %q: want auto, cpu, cuda or cuda:N", c.device)
	case !(c.seconds >= 0 && c.seconds <= 3600):
		return c, fmt.Errorf("--seconds %v: want 0 to 3600", c.seconds)
	case c.warmup < -1 || c.warmup > 10000:
		return c, fmt.Errorf("--warmup %d: want -1 to 10000", c.warmup)
	case c.genProcs < 1 || c.genProcs > 1024:
		return c, fmt.Errorf("--gen-procs %d: want 1 to 1024", c.genProcs)
	case c.deadline < 0:
		return c, fmt.Errorf("--deadline %v: can't be negative", c.deadline)
	case c.Latency < 0 || c.Jitter < 0:
		return c, errors.New("--latency and --jitter can't be negative")
	}
	return c, nil
}

// parseWorkers reads a comma-separated list of worker counts in [0, 256],
// each once.
func parseWorkers(flag, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n > 256 {
			return nil, fmt.Errorf("%s: %q is not a worker count in [0, 256]", flag, f)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("%s: %d twice", flag, n)
		}
		out = append(out, n)
	}
	return out, nil
}

// parsePasses reads --passes: allPasses' names, each once, at least one;
// it returns them in allPasses' order.
func parsePasses(s string) ([]string, error) {
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(allPasses, f) {
			return nil, fmt.Errorf("--passes: unknown pass %q (want a comma-separated list of %s)", f, strings.Join(allPasses, ", "))
		}
		if seen[f] {
			return nil, fmt.Errorf("--passes: %q twice", f)
		}
		seen[f] = true
	}
	var out []string
	for _, p := range allPasses {
		if seen[p] {
			out = append(out, p)
		}
	}
	return out, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// findRepo is --repo, or the nearest directory at or above the working
// directory holding go.mod and python/dsmount (a binary built elsewhere,
// run in a copy of the checkout), else this source's checkout.
func findRepo(flag string) (string, error) {
	isRepo := func(d string) bool {
		_, e1 := os.Stat(filepath.Join(d, "go.mod"))
		_, e2 := os.Stat(filepath.Join(d, "python", "dsmount", "__init__.py"))
		return e1 == nil && e2 == nil
	}
	if flag != "" {
		if !isRepo(flag) {
			return "", fmt.Errorf("--repo %s: no go.mod and python/dsmount there", flag)
		}
		return filepath.Abs(flag)
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if isRepo(d) {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return testenv.RepoRoot()
}

// Main runs the benchmark with the command line args (after "gpu").
func Main(args []string) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return cli.Refused(err)
	}
	start := time.Now()
	t := testenv.NewProgramT("dsmount-benchgpu")
	defer t.Close()
	stopSignals := t.CloseOnSignal()
	defer stopSignals()
	repo, err := findRepo(cfg.repo)
	if err != nil {
		t.Fatalf("%v", err)
	}
	b := &bench{t: t, cfg: cfg, repo: repo, work: t.TempDir(), start: start}
	b.res = &results{Date: start.UTC().Format("2006-01-02 15:04 UTC"), Command: commandLine(args), Workers: cfg.workers,
		Batch: cfg.batch, Crop: cfg.crop, Model: cfg.model, Seconds: cfg.seconds, Latency: cfg.Latency, Jitter: cfg.Jitter}
	b.res.Probe = probe(b.work)
	for _, line := range b.res.Probe.lines() {
		cli.Logf("probe: %s", line)
	}
	b.src = filepath.Join(b.work, "images")
	t0 := time.Now()
	out, err := runPy(cfg.python, repo, "gen", "--out", b.src, "--images", fmt.Sprint(cfg.images), "--classes", fmt.Sprint(cfg.classes),
		"--procs", fmt.Sprint(cfg.genProcs))
	if err != nil {
		t.Fatalf("%v", err)
	}
	var gen struct{ Images, Bytes int64 }
	if err := json.Unmarshal(out, &gen); err != nil || gen.Images != int64(cfg.images) {
		t.Fatalf("bench_gpu.py gen: %v: %q", err, out)
	}
	b.res.Images, b.res.Bytes, b.res.GenSeconds = gen.Images, gen.Bytes, time.Since(t0).Seconds()
	cli.Logf("images: %d JPEGs, %.1f MB (mean %.0f KB), in %d classes, made by %d processes in %v", gen.Images, float64(gen.Bytes)/1e6,
		float64(gen.Bytes)/float64(gen.Images)/1e3, cfg.classes, cfg.genProcs, cli.Since(t0))
	if b.paths, err = listFiles(b.src); err != nil {
		t.Fatalf("%v", err)
	}
	b.drop = newDropper(b.res.Probe.DropMethod, b.src)

	if b.py, err = startServer(cfg, repo); err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(b.py.close)
	b.res.Python = b.py.hello
	cli.Logf("python: %s", b.py.hello)
	b.sweep()
	b.finish()
	return nil
}

// commandLine is how this program was run, for the report.
func commandLine(args []string) string {
	words := []string{"go", "run", "./bench", "gpu"}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$") {
			a = strconv.Quote(a)
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

// listFiles is every regular file under root, relative, '/'-separated.
func listFiles(root string) ([]string, error) {
	var paths []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		paths = append(paths, filepath.ToSlash(rel))
		return err
	})
	return paths, err
}

// dsmountBin is --dsmount, or this checkout built into the work directory
// (which needs Go: a machine without it is given the binary).
func (b *bench) dsmountBin() (string, error) {
	if b.bin != "" {
		return b.bin, nil
	}
	if b.cfg.dsmount != "" {
		if _, err := exec.LookPath(b.cfg.dsmount); err != nil {
			return "", fmt.Errorf("--dsmount: %w", err)
		}
		b.bin = b.cfg.dsmount
		return b.bin, nil
	}
	bin, err := testenv.BuildDsmount(filepath.Join(b.work, "bin"))
	if err != nil {
		return "", fmt.Errorf("no --dsmount, and building it failed: %w", err)
	}
	b.bin = bin
	return bin, nil
}
