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

// TestLocalitySamplerReadsEachNodesShare runs the cheap case of `go run
// ./bench nodes` in the suite: two "nodes" (a daemon, cache dir and mount
// each, every cache half the dataset's bytes) reading 1,500 files from
// MinIO behind a +5 ms proxy, one torch.distributed rank each (gloo on
// 127.0.0.1) through a real DataLoader, the ranks' page cache bounded and
// emptied between epochs. With the locality sampler the second epoch
// reads nearly everything from the nodes' own caches; with today's
// DistributedOrderedSampler about half as much. After the epochs the
// nodes' caches (asked with the control protocol's "cached" request) hold
// disjoint shares.
func TestLocalitySamplerReadsEachNodesShare(t *testing.T) {
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
	cmd := exec.Command(bin, "nodes", "--files", "1500", "--mean-size", "20000", "--layouts", "2x1", "--epochs", "2",
		"--batch", "32", "--latency", "5", "--jitter", "0", "--json")
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
		cmd.Process.Signal(os.Interrupt) // it tears down its mounts, MinIO and cgroup
		select {
		case <-done:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-done
		}
		t.Fatalf("bench nodes ran over 10 minutes:\n%s", out)
	}
	if err != nil {
		t.Fatalf("bench nodes: %v\n%s", err, out)
	}
	var rows []struct {
		Locality bool `json:"locality"`
		Epochs   []struct {
			HitRate float64 `json:"hit_rate"`
			Samples int     `json:"samples"`
		} `json:"epochs"`
		Shares *struct {
			None  float64 `json:"none"`
			Many  float64 `json:"more_than_one"`
			Error string  `json:"error"`
		} `json:"shares"`
		Err string `json:"error"`
	}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "JSON "); ok {
			if err := json.Unmarshal([]byte(rest), &rows); err != nil {
				t.Fatalf("bench nodes' JSON: %v: %s", err, rest)
			}
		}
	}
	hit := map[bool]float64{}
	for _, r := range rows {
		if r.Err != "" || len(r.Epochs) != 2 || r.Epochs[1].Samples != 1500 {
			t.Fatalf("locality %v: %+v\n%s", r.Locality, r, out)
		}
		hit[r.Locality] = r.Epochs[1].HitRate
		// What the daemons answer to "cached": with locality the nodes
		// hold disjoint shares, each file on one node.
		if r.Locality && (r.Shares == nil || r.Shares.Error != "" || r.Shares.Many > 0.05 || r.Shares.None > 0.1) {
			t.Errorf("with locality, the files cached on more than one node, and on none: %+v; want at most 5%% and 10%%", r.Shares)
		}
	}
	if len(hit) != 2 {
		t.Fatalf("want a run with locality and one without:\n%s", out)
	}
	t.Logf("second epoch's hit rate: locality %.3f, without %.3f", hit[true], hit[false])
	if hit[true] < 0.85 || hit[true] < hit[false]+0.2 {
		t.Errorf("second epoch's hit rate with locality %.3f, without %.3f: want at least 0.85, and 0.2 above", hit[true], hit[false])
	}
}
