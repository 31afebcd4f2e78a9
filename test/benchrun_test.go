package test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// runBench builds ./bench and runs it with args against this suite's
// dsmount binary, failing the test if it fails or runs over 10 minutes
// (then interrupted, so that it tears down its mounts, MinIO and cgroup);
// it returns the output.
func runBench(t *testing.T, args ...string) []byte {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "bench")
	build := exec.Command("go", "build", "-o", bin, "./bench")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./bench: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "DSMOUNT_BIN="+dsmountBin)
	done := make(chan struct{})
	var out []byte
	go func() {
		out, err = cmd.CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-done
		}
		t.Fatalf("bench %s ran over 10 minutes:\n%s", args[0], out)
	}
	if err != nil {
		t.Fatalf("bench %s: %v\n%s", args[0], err, out)
	}
	return out
}

// benchJSON decodes into v the line of out after "JSON " (a bench's
// --json results).
func benchJSON(t *testing.T, out []byte, v any) {
	t.Helper()
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "JSON "); ok {
			if err := json.Unmarshal([]byte(rest), v); err != nil {
				t.Fatalf("the bench's JSON: %v: %s", err, rest)
			}
		}
	}
}
