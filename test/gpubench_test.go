package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// gpuBenchResults is what `bench gpu --json` writes, the parts this test
// reads.
type gpuBenchResults struct {
	Images int64 `json:"images"`
	Probe  struct {
		FuseOK     bool   `json:"fuse_ok"`
		DropMethod string `json:"drop_method"`
	} `json:"probe"`
	Passes []struct {
		Pass        string  `json:"pass"`
		Workers     int     `json:"workers"`
		Rate        float64 `json:"images_per_s"`
		WaitShare   float64 `json:"gpu_wait_share"`
		Consumed    int     `json:"consumed"`
		OrderOK     bool    `json:"order_ok"`
		Residency   float64 `json:"start_residency"`
		SourceBytes int64   `json:"source_bytes"`
		Error       string  `json:"error"`
	} `json:"passes"`
	Skipped []struct {
		Pass, Reason string
	} `json:"skipped"`
	Check *struct {
		Dataset  int   `json:"dataset"`
		Consumed int   `json:"consumed"`
		Staged   []int `json:"staged_order"`
		Sampler  []int `json:"sampler_order"`
	} `json:"check"`
}

// TestBenchGPUSmoke runs `bench gpu` on the CPU with a tiny model and 48
// images: python/tests/bench_gpu.py's training loop, fed by a DataLoader of
// 2 workers in dsmount.StagingLoader, over the local directory and over a
// real mount (from its cache disk, not declared and declared, and from the
// page cache), each pass a whole epoch. Every pass must consume every image
// and stage them in the sampler's order; the cache-disk passes must start
// with the images' pages dropped and read nothing from the mount's source,
// the page-cache pass must start with them cached; and the --check epoch's
// staged order, as the script reports it, must be the sampler's and hold
// every image exactly once. The GPU's own figures need the GPU machine
// (docs/gpu.md).
func TestBenchGPUSmoke(t *testing.T) {
	pythonEnv(t) // fails, not skips, without torch
	out := filepath.Join(t.TempDir(), "gpu.json")
	runBench(t, "gpu", "--python", systemPython, "--device", "cpu", "--model", "tiny", "--images", "48", "--classes", "4", "--batch", "8",
		"--crop", "32", "--workers", "2", "--passes", "local,disk,declared,pagecache", "--seconds", "0", "--check", "--json", out)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r gpuBenchResults
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("bench gpu --json: %v", err)
	}
	if !r.Probe.FuseOK || len(r.Skipped) > 0 {
		t.Fatalf("FUSE usable %v, skipped %+v; want every pass run", r.Probe.FuseOK, r.Skipped)
	}
	var passes []string
	for _, p := range r.Passes {
		passes = append(passes, p.Pass)
		if p.Error != "" || p.Workers != 2 || p.Consumed != 48 || !p.OrderOK || !(p.Rate > 0) || p.WaitShare < 0 || p.WaitShare > 1 {
			t.Errorf("pass %+v: want no error, 2 workers, all 48 images consumed in the sampler's order, a rate and a wait share in [0, 1]", p)
		}
		switch p.Pass {
		case "disk", "declared":
			if p.SourceBytes != 0 {
				t.Errorf("%s: the cached mount read %d bytes from its source; want 0", p.Pass, p.SourceBytes)
			}
			if r.Probe.DropMethod == "drop_caches" && p.Residency > 0.1 {
				t.Errorf("%s: %.2f of the images' pages cached at the start; want them dropped", p.Pass, p.Residency)
			}
		case "pagecache":
			if p.Residency < 0.9 {
				t.Errorf("pagecache: %.2f of the images' pages cached at the start; want them all", p.Residency)
			}
		}
	}
	slices.Sort(passes)
	if !slices.Equal(passes, []string{"declared", "disk", "local", "pagecache"}) {
		t.Errorf("passes %q; want local, disk, declared and pagecache once each", passes)
	}
	c := r.Check
	if c == nil {
		t.Fatal("no check epoch in the results")
	}
	if c.Dataset != 48 || c.Consumed != 48 || !slices.Equal(c.Staged, c.Sampler) {
		t.Fatalf("check epoch: %d of %d images staged; staged order %v, sampler's %v; want all 48 in the sampler's order", c.Consumed, c.Dataset, c.Staged, c.Sampler)
	}
	once := slices.Sorted(slices.Values(c.Staged))
	for i, v := range once {
		if v != i {
			t.Fatalf("check epoch: staged indices %v are not each of 0..47 once", once)
		}
	}
}
