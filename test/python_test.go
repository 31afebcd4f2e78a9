package test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/test/testenv"
)

// systemPython is the interpreter the Python tests use: Debian's, which has
// python3-torch (test/run.sh installs it). A python3 earlier on PATH (pyenv,
// a virtualenv) may lack torch, so it is never used.
const systemPython = "/usr/bin/python3"

// pythonSpec is the dataset the Python tests train on: a few hundred small
// files in nested directories plus the odd names (spaces, non-ASCII, a
// 0-byte file). It must hold an even number of files so that two
// DistributedSampler ranks share it without padding.
var pythonSpec = testenv.DatasetSpec{
	Seed:        2024,
	SmallFiles:  300,
	SmallMin:    1 << 10,
	SmallMax:    48 << 10,
	FilesPerDir: 60,
	MaxDepth:    2,
	OddNames:    true,
}

// TestPythonSampler runs python/dsmount's OrderedSampler in a real PyTorch
// training loop over a real mount of a local directory:
//
//   - RandomSampler: one process, a DataLoader with 2 worker processes, 2
//     epochs. The script (python/tests/integration_train.py) checks every
//     file's SHA-256 against the source's, that each epoch yields exactly
//     the order declared for it and that the order declared as "next" is
//     the one the next epoch yields. Then `dsmount stats --json` must show
//     the job at epoch 1 with every file declared for this epoch and the
//     next, and its reads counted (total_reads >= the files read in epoch
//     0, reads in epoch 1 too); dsmount.end_job ends it.
//   - DistributedSampler(num_replicas=2): rank 0 then rank 1, each its own
//     process (torch.distributed not initialised) and its own job (default
//     names ending in -rank0 / -rank1) declaring its half, with the same
//     checks; the halves partition the dataset every epoch.
//
// It fails, rather than skips, when /usr/bin/python3 can't import torch.
func TestPythonSampler(t *testing.T) {
	pyEnv := pythonEnv(t)
	src := t.TempDir()
	rel := testenv.GenerateDataset(t, src, pythonSpec)
	if len(rel)%2 != 0 {
		t.Fatalf("the dataset has %d files; it needs an even number", len(rel))
	}
	manifest, sizes := writeManifest(t, src, rel)

	t.Run("RandomSampler", func(t *testing.T) {
		mp := startPythonMount(t, src)
		out := runTrain(t, pyEnv, mp, manifest)
		if out.Mountpoint != mp || out.Share != len(rel) || len(out.Epochs) != 2 {
			t.Fatalf("script output: mountpoint %s, share %d, %d epochs; want %s, %d, 2", out.Mountpoint, out.Share, len(out.Epochs), mp, len(rel))
		}
		if out.FilesRead != 2*len(rel) {
			t.Errorf("the script read %d files in 2 epochs of %d", out.FilesRead, len(rel))
		}
		if !strings.HasSuffix(out.Job, fmt.Sprintf("-%d", out.Pid)) {
			t.Errorf("default job name %q; want host-pid (pid %d)", out.Job, out.Pid)
		}
		j := checkJob(t, mp, out, sizes)
		t.Logf("job %s after 2 epochs: %+v", out.Job, j)

		// end_job through the Python API forgets it; a second end finds
		// nothing; an order naming no file of the mount is refused.
		r := runPython(t, pyEnv, time.Minute, filepath.Join(pythonDir(t), "tests", "integration_control.py"), mp, out.Job)
		var ctl struct {
			Ended      bool     `json:"ended"`
			EndedAgain bool     `json:"ended_again"`
			Jobs       []string `json:"jobs"`
			Refused    string   `json:"refused"`
		}
		if err := testenv.DecodeJSONObject(r.Stdout, &ctl); err != nil {
			t.Fatalf("integration_control.py: %v", err)
		}
		if !ctl.Ended || ctl.EndedAgain || slices.Contains(ctl.Jobs, out.Job) {
			t.Errorf("end_job(%s): ended %v, then %v, jobs left %q; want true, false, job gone", out.Job, ctl.Ended, ctl.EndedAgain, ctl.Jobs)
		}
		if !strings.Contains(ctl.Refused, "none of the") {
			t.Errorf("declaring a missing file: error %q; want the daemon's \"none of the ... paths\"", ctl.Refused)
		}
		if s := testenv.Stats(t, dsmountBin, mp); len(s.Mount.Jobs) != 0 {
			t.Errorf("dsmount stats after end_job: jobs %+v; want none", s.Mount.Jobs)
		}
	})

	// The ranks run one after the other, each checked in `dsmount stats`
	// as soon as it exits: reads are matched to jobs by file, not by
	// process, so once a rank has read its last epoch, the other rank's
	// reads of files in the first rank's declared next epoch would advance
	// the first rank's job into that epoch.
	t.Run("DistributedSampler", func(t *testing.T) {
		mp := startPythonMount(t, src)
		half := len(rel) / 2
		var outs []trainOutput
		for rank := 0; rank < 2; rank++ {
			out := runTrain(t, pyEnv, mp, manifest, "--rank", fmt.Sprint(rank), "--world-size", "2")
			if want := fmt.Sprintf("-%d-rank%d", out.Pid, rank); !strings.HasSuffix(out.Job, want) {
				t.Errorf("rank %d: default job name %q; want host%s", rank, out.Job, want)
			}
			if out.Share != half || len(out.Epochs) != 2 {
				t.Fatalf("rank %d: share %d, %d epochs; want %d, 2", rank, out.Share, len(out.Epochs), half)
			}
			if slices.Equal(out.Epochs[0], out.Epochs[1]) {
				t.Errorf("rank %d read the same order in both epochs: set_epoch did not reach the DistributedSampler", rank)
			}
			j := checkJob(t, mp, out, sizes)
			t.Logf("rank %d: job %s after 2 epochs: %+v", rank, out.Job, j)
			outs = append(outs, out)
		}
		if outs[0].Job == outs[1].Job {
			t.Errorf("both ranks declared as job %q", outs[0].Job)
		}
		for e := 0; e < 2; e++ {
			all := append(slices.Clone(outs[0].Epochs[e]), outs[1].Epochs[e]...)
			slices.Sort(all)
			if len(all) != len(rel) {
				t.Errorf("epoch %d: the two ranks read %d files together; the dataset has %d", e, len(all), len(rel))
			}
			for i, idx := range all {
				if idx != i {
					t.Errorf("epoch %d: the two ranks' shares do not partition the %d files (sorted union differs at %d: %d)", e, len(rel), i, idx)
					break
				}
			}
		}
		s := testenv.Stats(t, dsmountBin, mp)
		var names []string
		for _, j := range s.Mount.Jobs {
			names = append(names, j.Name)
			if j.Declared != half {
				t.Errorf("job %s: declared %d; want its share, %d", j.Name, j.Declared, half)
			}
		}
		if len(names) != 2 || !slices.Contains(names, outs[0].Job) || !slices.Contains(names, outs[1].Job) {
			t.Errorf("dsmount stats: jobs %q; want the two ranks', %s and %s", names, outs[0].Job, outs[1].Job)
		}
	})
}

// pythonEnv checks that /usr/bin/python3 can import torch and returns the
// environment for running the package's scripts.
func pythonEnv(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command(systemPython, "-c", "import torch; print(torch.__version__)").CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot import torch (%v): %s\n"+
			"The Python tests need Debian's python3-torch, python3-numpy, python3-pil and python3-torchvision: "+
			"test/run.sh installs them (with fuse3, via apt-get); or run: apt-get install -y python3-torch python3-numpy python3-pil python3-torchvision",
			systemPython, err, strings.TrimSpace(string(out)))
	}
	t.Logf("%s: torch %s", systemPython, strings.TrimSpace(string(out)))
	return append(os.Environ(),
		"PYTHONPATH="+pythonDir(t),
		"PYTHONDONTWRITEBYTECODE=1", // leave no __pycache__ in the checkout
		"PYTHONUNBUFFERED=1",
		"OMP_NUM_THREADS=1",
	)
}

// pythonDir is the repository's python/ directory.
func pythonDir(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "python")
}

// writeManifest writes {"paths": rel, "sha256": [...]} of the source files
// to a temp file for the training script, and returns it and the files'
// sizes.
func writeManifest(t *testing.T, src string, rel []string) (string, []int64) {
	t.Helper()
	sums := make([]string, len(rel))
	sizes := make([]int64, len(rel))
	for i, p := range rel {
		data, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(data)
		sums[i], sizes[i] = hex.EncodeToString(h[:]), int64(len(data))
	}
	b, err := json.Marshal(map[string][]string{"paths": rel, "sha256": sums})
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return name, sizes
}

// startPythonMount mounts src on a new mountpoint with its own cache.
func startPythonMount(t *testing.T, src string) string {
	t.Helper()
	m, mp := mountLocal(t, src)
	t.Cleanup(func() {
		if !t.Failed() {
			m.NoErrorLogs()
		}
	})
	return mp
}

// trainOutput is what integration_train.py prints.
type trainOutput struct {
	Job        string  `json:"job"`
	Pid        int     `json:"pid"`
	Mountpoint string  `json:"mountpoint"`
	Share      int     `json:"share"`
	Epochs     [][]int `json:"epochs"`
	FilesRead  int     `json:"files_read"`
	BytesRead  int64   `json:"bytes_read"`
	Results    []struct {
		Job          string `json:"job"`
		Epoch        int    `json:"epoch"`
		Declared     int    `json:"declared"`
		NextDeclared int    `json:"next_declared"`
	} `json:"results"`
}

// runTrain runs integration_train.py for 2 epochs with 2 DataLoader
// workers; extra holds more flags (--rank R --world-size W).
func runTrain(t *testing.T, env []string, mp, manifest string, extra ...string) trainOutput {
	t.Helper()
	args := append([]string{filepath.Join(pythonDir(t), "tests", "integration_train.py"),
		"--mount", mp, "--manifest", manifest, "--epochs", "2", "--workers", "2"}, extra...)
	r := runPython(t, env, 5*time.Minute, args...)
	return decodeTrain(t, r)
}

func decodeTrain(t *testing.T, r testenv.CLIResult) trainOutput {
	t.Helper()
	var out trainOutput
	if err := testenv.DecodeJSONObject(r.Stdout, &out); err != nil {
		t.Fatalf("integration_train.py output: %v\nstderr: %s", err, r.Stderr)
	}
	if len(out.Results) != len(out.Epochs) {
		t.Fatalf("integration_train.py: %d declarations for %d epochs", len(out.Results), len(out.Epochs))
	}
	for e, res := range out.Results {
		if res.Job != out.Job || res.Epoch != e || res.Declared != out.Share || res.NextDeclared != out.Share {
			t.Errorf("declaration of epoch %d: the daemon answered %+v; want job %s, epoch %d, %d declared now and next",
				e, res, out.Job, e, out.Share)
		}
	}
	return out
}

// runPython runs /usr/bin/python3 ARGS and wants exit 0.
func runPython(t *testing.T, env []string, timeout time.Duration, args ...string) testenv.CLIResult {
	t.Helper()
	r := testenv.RunCLIWith(systemPython, testenv.CLIOptions{Env: env}, timeout, args...)
	if r.ExitCode != 0 {
		t.Fatalf("%s %s: exit %d (timed out: %v) after %v\nstdout: %s\nstderr: %s", systemPython,
			strings.Join(args, " "), r.ExitCode, r.TimedOut, r.Duration.Round(time.Millisecond), r.Stdout, r.Stderr)
	}
	return r
}

// checkJob wants out's job in `dsmount stats --json` of mp at the last
// epoch, with the last epoch's share declared and the next epoch's too, and
// its reads counted: every non-empty file of epoch 0 (cold: each read reached
// the daemon) and some of epoch 1 (the script drops each file from the page
// cache after reading it, so re-reads reach the daemon too). 0-byte files
// are never read from the daemon.
func checkJob(t *testing.T, mp string, out trainOutput, sizes []int64) control.JobStats {
	t.Helper()
	s := testenv.Stats(t, dsmountBin, mp)
	if s.Mount.Mountpoint != mp || s.Mount.Reads <= 0 {
		t.Errorf("dsmount stats: mount %s with %d reads; want %s with reads", s.Mount.Mountpoint, s.Mount.Reads, mp)
	}
	j, ok := testenv.Job(s.Mount, out.Job)
	if !ok {
		t.Fatalf("dsmount stats: no job %q among %+v", out.Job, s.Mount.Jobs)
	}
	last := len(out.Epochs) - 1
	if j.Mount != mp || j.Epoch != last || j.Declared != out.Share || j.NextDeclared != out.Share {
		t.Errorf("job %s: mount %s, epoch %d, declared %d, next_declared %d; want %s, %d, %d, %d",
			j.Name, j.Mount, j.Epoch, j.Declared, j.NextDeclared, mp, last, out.Share, out.Share)
	}
	nonEmpty := 0
	for _, idx := range out.Epochs[0] {
		if sizes[idx] > 0 {
			nonEmpty++
		}
	}
	// A file the daemon pushed into the page cache before its read is
	// read without the daemon seeing it: it counts in pushed instead.
	if j.TotalReads+j.Pushed < int64(nonEmpty) || j.TotalReads > int64(len(out.Epochs)*out.Share) {
		t.Errorf("job %s: total_reads %d, pushed %d; want reads and pushes together at least the %d non-empty files of epoch 0, and reads at most the %d files of all epochs",
			j.Name, j.TotalReads, j.Pushed, nonEmpty, len(out.Epochs)*out.Share)
	}
	if j.Read <= 0 || j.Read > out.Share {
		t.Errorf("job %s: read %d of epoch %d; want some of its %d files counted", j.Name, j.Read, last, out.Share)
	}
	return j
}

// TestPythonUnitTests runs the Python package's own unit tests
// (python/tests/test_*.py: the control protocol and the sampler against a
// fake daemon), which need no mount and no torch.
func TestPythonUnitTests(t *testing.T) {
	dir := pythonDir(t)
	cmd := exec.Command(systemPython, "-m", "unittest", "discover", "-t", ".", "-s", "tests", "-p", "test_*.py")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python unit tests in %s: %v\n%s", dir, err, out)
	}
	if !strings.Contains(string(out), "\nOK") {
		t.Fatalf("python unit tests in %s did not report OK:\n%s", dir, out)
	}
}

// TestPythonLoaders: dsmount.pil_loader and dsmount.read_bytes in a real
// DataLoader (2 worker processes) over a real mount give, image for image,
// what Pillow decodes from the local files (JPEG and PNG of several modes
// and sizes), read cold through the daemon; then the short image pipeline
// (torchvision ImageFolder with pil_loader, RandomResizedCrop, ToTensor)
// runs over the mount and sees the local copy's classes and samples.
func TestPythonLoaders(t *testing.T) {
	env := pythonEnv(t)
	script := filepath.Join(pythonDir(t), "tests", "integration_loaders.py")
	src := t.TempDir()
	runPython(t, env, 2*time.Minute, script, "--make", "--local", src, "--count", "200")
	mp := startPythonMount(t, src)
	r := runPython(t, env, 5*time.Minute, script, "--local", src, "--mount", mp, "--workers", "2")
	var out struct {
		Images   int `json:"images"`
		Checked  int `json:"checked"`
		Pipeline int `json:"pipeline_images"`
		Classes  int `json:"classes"`
	}
	if err := testenv.DecodeJSONObject(r.Stdout, &out); err != nil {
		t.Fatalf("integration_loaders.py output: %v\nstderr: %s", err, r.Stderr)
	}
	if out.Images != 200 || out.Checked != 200 || out.Pipeline != 200 || out.Classes != 7 {
		t.Fatalf("checked %d of %d images, the pipeline saw %d in %d classes; want 200 of 200, 200 in 7", out.Checked, out.Images, out.Pipeline, out.Classes)
	}
	if s := testenv.Stats(t, dsmountBin, mp); s.Mount.Reads == 0 {
		t.Error("the mount served no reads: the images were not read through it")
	}
}
