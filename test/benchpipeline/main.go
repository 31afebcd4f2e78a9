// Command benchpipeline runs the experiment dsmount is meant to make
// unnecessary advice for: a real PyTorch image pipeline (torchvision
// ImageFolder, JPEG decode, RandomResizedCrop(224), ToTensor, batches of
// 64) over a Caltech-256-like image folder in S3, read by 1 to 7 loader
// workers, cold and hot, on the local copy and through dsmount with and
// without the sampler declaring its orders.
//
//	go run ./test/benchpipeline [--isolate-backend] [--images 6000] [--workers 1,2,4,7]
//
// The images are real JPEGs (python/tests/gen_images.py: 256 classes,
// 100-600 px a side, tens to hundreds of KB), uploaded to MinIO behind
// toxiproxy adding --latency ms to every answer. Each system runs, per
// worker count, one python/tests/bench_pipeline.py invocation of two
// epochs: the first cold (the page cache dropped; for dsmount a fresh
// cache and mount), the second hot. The reference of every ratio is the
// local copy's rate from the same run; the store's ceiling (its own
// parallel GETs of every image) is measured in the same run.
//
// Needs root (FUSE, drop_caches), Debian's python3-torch,
// python3-torchvision and python3-pil (installed with apt-get if missing),
// and the MinIO and toxiproxy binaries test/run.sh installs.
//
// Not yet here (issue 24): rclone and s3fs, the half-cache epoch series
// and the plot.
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
	"strconv"
	"strings"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

const python = "/usr/bin/python3"

type config struct {
	images, classes, latency, jitter, batch int
	workers                                 []int
	isolate                                 bool
}

func parseFlags(args []string) (config, error) {
	c := config{}
	fs := flag.NewFlagSet("benchpipeline", flag.ContinueOnError)
	fs.IntVar(&c.images, "images", 6000, "images in the generated folder")
	fs.IntVar(&c.classes, "classes", 256, "class directories")
	fs.IntVar(&c.latency, "latency", 20, "ms the proxy adds to every answer")
	fs.IntVar(&c.jitter, "jitter", 5, "± ms of jitter on --latency")
	fs.IntVar(&c.batch, "batch", 64, "DataLoader batch size")
	workers := fs.String("workers", "1,2,4,7", "comma-separated DataLoader num_workers to run")
	fs.BoolVar(&c.isolate, "isolate-backend", false, "MinIO and toxiproxy on CPU 0, everything else on the other CPUs")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, w := range strings.Split(*workers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 0 || n > 64 {
			return c, fmt.Errorf("--workers: %q is not a worker count in [0, 64]", w)
		}
		c.workers = append(c.workers, n)
	}
	switch {
	case c.classes < 1 || c.images < c.classes:
		return c, fmt.Errorf("want 1 <= --classes <= --images, got %d and %d", c.classes, c.images)
	case c.batch < 1:
		return c, fmt.Errorf("--batch %d: want at least 1", c.batch)
	case c.latency < 0 || c.jitter < 0:
		return c, errors.New("--latency and --jitter can't be negative")
	}
	return c, nil
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
	if err := ensurePython(); err != nil {
		t.Fatalf("%v", err)
	}
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatalf("%v", err)
	}
	work := t.TempDir()
	src := filepath.Join(work, "images")
	t0 := time.Now()
	out, err := runPy(repo, "gen_images.py", "--out", src, "--classes", fmt.Sprint(cfg.classes), "--images", fmt.Sprint(cfg.images))
	if err != nil {
		t.Fatalf("%v", err)
	}
	var gen struct{ Images, Bytes int64 }
	if err := json.Unmarshal(out, &gen); err != nil {
		t.Fatalf("gen_images.py: %v: %q", err, out)
	}
	logf("images: %d JPEGs, %.1f MB (mean %.0f KB), in %d classes, made in %v", gen.Images, float64(gen.Bytes)/1e6,
		float64(gen.Bytes)/float64(gen.Images)/1e3, cfg.classes, time.Since(t0).Round(time.Second))

	mc := testenv.StartMinIO(t)
	mc.CreateBucket("bench")
	if err := mc.UploadDirErr(context.Background(), "bench", "caltech", src, 32); err != nil {
		t.Fatalf("upload: %v", err)
	}
	tp := testenv.StartToxiproxy(t)
	proxy := tp.AddProxy("minio", mc.Addr())
	tp.AddLatency("minio", cfg.latency, cfg.jitter)
	endpoint := "http://" + proxy
	cpuNote := "all processes share all CPUs"
	if cfg.isolate {
		if cpuNote, err = testenv.IsolateBackend(mc.Pid(), tp.Pid()); err != nil {
			t.Fatalf("--isolate-backend: %v", err)
		}
	}
	logf("store: MinIO behind toxiproxy (+%d ms ± %d); %s", cfg.latency, cfg.jitter, cpuNote)
	bin, err := testenv.BuildDsmount(filepath.Join(work, "bin"))
	if err != nil {
		t.Fatalf("build: %v", err)
	}

	ceiling := storeCeiling(t, mc, endpoint, src)
	logf("store ceiling: %.0f images/s (64 GETs in flight)", ceiling)

	rows := map[string]map[int]epochs{}
	systems := []string{"local", "dsmount, declared", "dsmount, not declared"}
	for _, sys := range systems {
		rows[sys] = map[int]epochs{}
	}
	for _, w := range cfg.workers {
		for _, sys := range systems {
			var res epochs
			switch sys {
			case "local":
				res = epochsOn(t, repo, src, w, cfg.batch, false)
			default:
				declare := sys == "dsmount, declared"
				dir := filepath.Join(work, fmt.Sprintf("w%d-%v", w, declare))
				mp, cacheDir := filepath.Join(dir, "mnt"), filepath.Join(dir, "cache")
				os.MkdirAll(mp, 0o755)
				os.MkdirAll(cacheDir, 0o755)
				m := testenv.StartMount(t, testenv.MountConfig{Bin: bin, Source: "s3://bench/caltech", Mountpoint: mp, Env: mc.Env(),
					Args: []string{"--cache-dir", cacheDir, "--cache-size", "20G", "--s3-endpoint", endpoint, "--s3-path-style"}})
				res = epochsOn(t, repo, mp, w, cfg.batch, declare)
				m.Stop()
			}
			rows[sys][w] = res
			logf("%s, %d workers: cold %.0f images/s, hot %.0f", sys, w, res.rate(0), res.rate(1))
		}
	}
	report(cfg, gen.Images, gen.Bytes, ceiling, cpuNote, systems, rows)
}

// epochsOn runs two epochs of the pipeline over root after dropping the
// page cache: the first cold, the second hot.
func epochsOn(t *testenv.ProgramT, repo, root string, workers, batch int, declare bool) epochs {
	if err := testenv.DropCaches(); err != nil {
		t.Fatalf("%v", err)
	}
	args := []string{"--root", root, "--workers", fmt.Sprint(workers), "--epochs", "2", "--batch", fmt.Sprint(batch)}
	if declare {
		args = append(args, "--declare")
	}
	out, err := runPy(repo, "bench_pipeline.py", args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	var e epochs
	if err := json.Unmarshal(out, &e); err != nil || len(e.Epochs) != 2 {
		t.Fatalf("bench_pipeline.py over %s: %v: %q", root, err, out)
	}
	return e
}

// runPy runs python/tests/<script> with the checkout's python/ package on
// the path, and returns its stdout.
func runPy(repo, script string, args ...string) ([]byte, error) {
	cmd := exec.Command(python, append([]string{filepath.Join(repo, "python", "tests", script)}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(repo, "python"), "PYTHONDONTWRITEBYTECODE=1", "OMP_NUM_THREADS=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %v\nstderr: %s", script, strings.Join(args, " "), err, lastLines(stderr.String(), 20))
	}
	return bytes.TrimSpace(stdout.Bytes()), nil
}

// ensurePython installs Debian's torch, torchvision and Pillow if the
// system Python lacks them.
func ensurePython() error {
	if exec.Command(python, "-c", "import torch, torchvision, PIL").Run() == nil {
		return nil
	}
	logf("installing python3-torch, python3-torchvision and python3-pil with apt-get")
	for _, args := range [][]string{{"update", "-q"}, {"install", "-y", "-q", "python3-torch", "python3-torchvision", "python3-pil"}} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %v: %s", strings.Join(args, " "), err, lastLines(string(out), 5))
		}
	}
	return exec.Command(python, "-c", "import torch, torchvision, PIL").Run()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
