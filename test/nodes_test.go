package test

import (
	"testing"
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
	out := runBench(t, "nodes", "--files", "1500", "--mean-size", "20000", "--layouts", "2x1", "--epochs", "2",
		"--batch", "32", "--latency", "5", "--jitter", "0", "--json")
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
	benchJSON(t, out, &rows)
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
