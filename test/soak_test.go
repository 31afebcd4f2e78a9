package test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// TestSoak runs the soak (test/soak, docs/soak.md) for two minutes: one
// daemon over MinIO behind toxiproxy, declared epochs of 2 reader
// processes checking every byte, warms, job churn and remounts in a loop,
// a fault every 15 s (the six kinds once each, and two more), the daemon
// sampled every 5 s. The soak itself checks that no byte was wrong, that
// every failed read or operation falls in the window of a fault that
// explains it, that the abandoned jobs expired, that no mount and no
// process of the run is left, and that RSS, goroutines and fds stayed
// within their growth bounds; this test wants its verdict PASS and logs
// its tables. The samples, fault windows and checks are kept in
// t.TempDir() (no plot).
func TestSoak(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "soak")
	build := exec.Command("go", "build", "-o", bin, "./test/soak")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./test/soak: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "soak")
	cmd := exec.Command(bin, "--duration", "2m", "--fault-interval", "15s", "--sample", "5s", "--warmup", "20s",
		"--files", "1000", "--large-files", "4", "--job-timeout", "20s", "--out", out, "--plot=false")
	cmd.Env = append(os.Environ(), "DSMOUNT_BIN="+dsmountBin)
	// Killed if the test binary dies; an interrupt (below) lets it clean up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var output strings.Builder
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(6 * time.Minute):
		cmd.Process.Signal(os.Interrupt)
		select {
		case err = <-done:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			err = <-done
		}
		t.Fatalf("the soak ran over 6 minutes:\n%s", output.String())
	}
	text := output.String()
	verdict := lastLine(text)
	t.Logf("%s", tablesOf(text))
	if err != nil || !strings.HasPrefix(verdict, "soak: PASS") {
		t.Fatalf("soak: %v; verdict: %s\noutput:\n%s", err, verdict, text)
	}

	var res struct {
		Pass  bool `json:"pass"`
		Reads struct {
			Files int64 `json:"verified_reads"`
		} `json:"reads"`
		Faults []struct {
			Kind string `json:"kind"`
		} `json:"faults"`
		Samples []struct {
			Up bool `json:"up"`
		} `json:"samples"`
	}
	data, err := os.ReadFile(out + ".json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatalf("%s.json: %v", out, err)
	}
	kinds := map[string]bool{}
	for _, f := range res.Faults {
		kinds[f.Kind] = true
	}
	up := 0
	for _, s := range res.Samples {
		if s.Up {
			up++
		}
	}
	if !res.Pass || res.Reads.Files == 0 || len(kinds) != 6 || up < 15 {
		t.Errorf("soak result: pass %v, %d reads verified, fault kinds %v, %d samples of a running daemon; want a pass, reads, all 6 kinds, at least 15 samples",
			res.Pass, res.Reads.Files, kinds, up)
	}
}

// tablesOf is the soak's output from its tables on (what it prints after
// the run), or all of it.
func tablesOf(out string) string {
	if i := strings.Index(out, "\nactivities "); i >= 0 {
		return out[i:]
	}
	return out
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
