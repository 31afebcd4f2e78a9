package ranges

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	c, _, err := parseFlags(nil)
	if err != nil || c.fileSize != 2<<30 || c.readers != 8 || c.seconds != 30 || c.batch != 12 || c.block != 1024 || window(c) != 2050 ||
		c.pageCache != 512<<20 || c.cacheSize != 512<<20 || c.fullCacheSize != "" || c.Latency != 20 || c.Jitter != 0 ||
		!slices.Equal(c.passes, []string{"raw", "raw-parallel", "quarter", "quarter-declared", "quarter-paced", "full"}) || c.declaredSteps != 1000 || c.demand != 0.6 || c.parallel != 64 {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	c, _, err = parseFlags([]string{"--file-size", "256M", "--passes", "full, raw", "--page-cache", "32M", "--isolate-backend", "--seconds", "1.5"})
	if err != nil || c.fileSize != 256<<20 || c.pageCache != 32<<20 || c.cacheSize != 64<<20 || !c.isolate || c.seconds != 1.5 ||
		!slices.Equal(c.passes, []string{"raw", "full"}) {
		t.Fatalf("got %+v, %v", c, err)
	}
	for _, bad := range [][]string{{"--file-size", "2X"}, {"--file-size", "1001"}, {"--file-size", "4K"}, {"--passes", "raw,nope"},
		{"--passes", ""}, {"--readers", "0"}, {"--demand", "0"}, {"--demand", "1.5"}, {"--declared-steps", "0"}, {"--prefetch-parallel", "0"}, {"--seconds", "0"}, {"--page-cache", "0"}, {"--cache-size", "x"}, {"--block", "0"}, {"extra"}} {
		if _, _, err := parseFlags(bad); err == nil {
			t.Errorf("%q: no error", bad)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error of more than one line: %v", bad, err)
		}
	}
}

// The file writeTokens writes is what tokenAt says, and checkWindow finds
// a window read from the wrong offset.
func TestTokens(t *testing.T) {
	const seed, size = 46, 3<<20 + 6
	path := filepath.Join(t.TempDir(), "t.bin")
	if err := writeTokens(path, size, seed); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil || len(data) != size {
		t.Fatalf("%d bytes, %v", len(data), err)
	}
	for _, start := range []uint64{0, 1, 1 << 20, size/2 - 1025} {
		if err := checkWindow(seed, start, data[2*start:2*start+2050], 1025); err != nil {
			t.Errorf("start %d: %v", start, err)
		}
	}
	// Off by one token, a 4 KiB page, 2 MiB.
	for _, off := range []uint64{1, 2048, 1 << 20} {
		if err := checkWindow(seed, 0, data[2*off:2*off+2050], 1025); err == nil {
			t.Errorf("a window %d tokens off passed", off)
		}
	}
	if err := checkWindow(seed, 0, data[:2048], 1025); err == nil {
		t.Errorf("a short window passed")
	}
	if err := writeTokens(path, 7, seed); err == nil {
		t.Errorf("an odd size was accepted")
	}
}

// reader.py computes the tokens as tokenAt does: it checks a file
// writeTokens wrote without a wrong window, and finds a changed token.
// Fails without /usr/bin/python3 and numpy (test/run.sh installs
// Debian's python3-numpy).
func TestReaderScript(t *testing.T) {
	if err := exec.Command(python, "-c", "import numpy").Run(); err != nil {
		t.Fatalf("%s with numpy (Debian's python3-numpy): %v", python, err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "reader.py")
	if err := os.WriteFile(script, readerPy, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "t.bin")
	const seed, size = 7, 1 << 20
	if err := writeTokens(path, size, seed); err != nil {
		t.Fatal(err)
	}
	run := func() readerResult {
		t.Helper()
		cmd := exec.Command(python, script, "--path", path, "--seed", fmt.Sprint(seed), "--rng-seed", "3", "--block", "1024", "--batch", "12")
		cmd.Stdin = strings.NewReader("go 0.3\n")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("reader.py: %v: %s", err, out)
		}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		if !sc.Scan() || sc.Text() != "ready" || !sc.Scan() {
			t.Fatalf("reader.py printed %q", out)
		}
		var r readerResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		return r
	}
	if r := run(); r.Windows < 12 || r.Bad != 0 {
		t.Fatalf("good file: %+v, first bad %s", r, r.FirstBad)
	}
	// The first token of every 4 KiB changed: about half the windows cover one.
	data, _ := os.ReadFile(path)
	for off := 0; off < len(data); off += 4096 {
		data[off] ^= 1
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(); r.Bad == 0 {
		t.Fatalf("changed file: no bad window in %+v", r)
	}
}
