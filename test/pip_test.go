package test

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// TestPipInstall installs the Python package the way a user does, with no
// index (PyPI is out of reach here: the build backend is Debian's
// python3-setuptools and python3-wheel, which test/run.sh installs):
//
//  1. a virtualenv made with --system-site-packages (so Debian's torch,
//     setuptools, pytest and mypy are visible) gets
//     `pip install --no-index --no-build-isolation './python[torch]'`
//     (from a copy of python/: setuptools builds in the source tree, and
//     build/ and dsmount.egg-info/ must not land in the checkout);
//  2. from outside the checkout, `import dsmount` must load the venv's copy,
//     with py.typed installed, listed in the installed files, and the
//     metadata's version equal to dsmount.__version__;
//  3. `python -m pytest python/tests` runs the package's tests (unittest
//     classes) against that installed copy (--import-mode=append, so the
//     installed dsmount comes before the checkout's; the report header says
//     which one was imported) and must pass;
//  4. a second virtualenv without system site packages, so no torch,
//     installs the wheel built from the same source (it has pip and
//     setuptools but not wheel, so it can't build one offline itself) and
//     must import dsmount and dsmount.control and run an OrderedSampler,
//     and name the missing extra when dsmount.StagingLoader is asked for.
func TestPipInstall(t *testing.T) {
	pyEnv := pythonEnv(t) // fails if /usr/bin/python3 lacks torch
	tmp := t.TempDir()
	env := pipEnv(pyEnv)

	src := filepath.Join(tmp, "src")
	copyPythonPackage(t, pythonDir(t), src)

	venv := filepath.Join(tmp, "venv")
	runIn(t, tmp, env, 2*time.Minute, systemPython, "-m", "venv", "--system-site-packages", venv)
	py := filepath.Join(venv, "bin", "python")
	r := runIn(t, tmp, env, 5*time.Minute, py, "-m", "pip", "install", "--no-index", "--no-build-isolation", src+"[torch]")
	t.Logf("pip install: %s", lastLine(r.Stdout))

	// Imported from outside the checkout: the installed copy.
	r = runIn(t, tmp, env, time.Minute, py, "-c", `
import importlib.metadata as md, json, os, dsmount, dsmount.control
files = [str(f) for f in md.files("dsmount")]
print(json.dumps({"file": os.path.realpath(dsmount.__file__), "version": dsmount.__version__,
    "metadata_version": md.version("dsmount"),
    "py_typed": os.path.isfile(os.path.join(os.path.dirname(dsmount.__file__), "py.typed")),
    "files": files}))
`)
	var inst struct {
		File            string   `json:"file"`
		Version         string   `json:"version"`
		MetadataVersion string   `json:"metadata_version"`
		PyTyped         bool     `json:"py_typed"`
		Files           []string `json:"files"`
	}
	if err := testenv.DecodeJSONObject(r.Stdout, &inst); err != nil {
		t.Fatalf("import dsmount in the venv: %v", err)
	}
	venvReal, err := filepath.EvalSymlinks(venv)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(inst.File, venvReal+string(filepath.Separator)) {
		t.Errorf("import dsmount loaded %s; want the copy installed in %s", inst.File, venvReal)
	}
	if inst.Version == "" || inst.Version != inst.MetadataVersion {
		t.Errorf("dsmount.__version__ %q, installed metadata's version %q; want the same", inst.Version, inst.MetadataVersion)
	}
	if !inst.PyTyped || !slices.Contains(inst.Files, "dsmount/py.typed") {
		t.Errorf("py.typed: next to the installed package %v, in its files %q; want both", inst.PyTyped, inst.Files)
	}
	t.Logf("installed dsmount %s at %s", inst.Version, inst.File)

	// The package's tests, under pytest, against the installed copy.
	tests := filepath.Join(pythonDir(t), "tests")
	r = testenv.RunCLIWith(py, testenv.CLIOptions{Env: env, Dir: tmp}, 10*time.Minute,
		"-m", "pytest", "-p", "no:cacheprovider", "--import-mode=append", "-rs", tests)
	if r.ExitCode != 0 {
		t.Fatalf("pytest %s (exit %d, timed out: %v):\n%s\n%s", tests, r.ExitCode, r.TimedOut, r.Stdout, r.Stderr)
	}
	header := "dsmount " + inst.Version + " from " + filepath.Dir(inst.File)
	if !strings.Contains(r.Stdout, header) {
		t.Errorf("pytest's header does not say %q: the tests did not import the installed copy\n%s", header, r.Stdout)
	}
	if !strings.Contains(r.Stdout, " passed") {
		t.Errorf("pytest reported no passed tests:\n%s", r.Stdout)
	}
	t.Logf("pytest: %s", lastLine(r.Stdout))

	// Without torch: a venv that sees only its own packages.
	wheels := filepath.Join(tmp, "wheels")
	runIn(t, tmp, env, 5*time.Minute, py, "-m", "pip", "wheel", "--no-deps", "--no-index", "--no-build-isolation", "-w", wheels, src)
	whl, err := filepath.Glob(filepath.Join(wheels, "dsmount-*.whl"))
	if err != nil || len(whl) != 1 {
		t.Fatalf("pip wheel built %q (%v); want one dsmount wheel", whl, err)
	}
	bare := filepath.Join(tmp, "bare")
	runIn(t, tmp, env, 2*time.Minute, systemPython, "-m", "venv", bare)
	barePy := filepath.Join(bare, "bin", "python")
	runIn(t, tmp, env, 5*time.Minute, barePy, "-m", "pip", "install", "--no-index", whl[0])
	r = runIn(t, tmp, env, time.Minute, barePy, "-c", `
import importlib.util, logging, os, dsmount, dsmount.control
assert importlib.util.find_spec("torch") is None, "torch is visible"
logging.disable(logging.WARNING)
s = dsmount.OrderedSampler([1, 0], ["a", "b"])
assert list(s) == [1, 0]
try:
    dsmount.StagingLoader
except ModuleNotFoundError as e:
    print(os.path.realpath(dsmount.__file__))
    print(e)
`)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	bareReal, err := filepath.EvalSymlinks(bare)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 || !strings.HasPrefix(lines[0], bareReal+string(filepath.Separator)) || !strings.Contains(lines[1], "dsmount[torch]") {
		t.Errorf("without torch: got %q; want dsmount imported from %s and StagingLoader naming the dsmount[torch] extra", lines, bareReal)
	}
}

// pipEnv is env without the caller's pip settings (an index, find-links,
// a config file), so that pip sees only what the test gives it.
func pipEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "PIP_") || strings.HasPrefix(kv, "PYTHONPATH=") || strings.HasPrefix(kv, "VIRTUAL_ENV=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "PIP_CONFIG_FILE="+os.DevNull, "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1")
}

// copyPythonPackage copies python/ to dst, without caches and build outputs.
func copyPythonPackage(t *testing.T, src, dst string) {
	t.Helper()
	skip := map[string]bool{"__pycache__": true, "build": true, "dist": true, ".pytest_cache": true, ".mypy_cache": true}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() && (skip[d.Name()] || strings.HasSuffix(d.Name(), ".egg-info")) {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatalf("copying %s: %v", src, err)
	}
}

// runIn runs bin ARGS in dir and wants exit 0.
func runIn(t *testing.T, dir string, env []string, timeout time.Duration, bin string, args ...string) testenv.CLIResult {
	t.Helper()
	r := testenv.RunCLIWith(bin, testenv.CLIOptions{Env: env, Dir: dir}, timeout, args...)
	if r.ExitCode != 0 {
		t.Fatalf("%s %s: exit %d (timed out: %v) after %v\nstdout: %s\nstderr: %s", bin, strings.Join(args, " "),
			r.ExitCode, r.TimedOut, r.Duration.Round(time.Millisecond), r.Stdout, r.Stderr)
	}
	return r
}
