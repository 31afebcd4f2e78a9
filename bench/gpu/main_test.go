package gpu

import (
	"slices"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags(nil)
	if err != nil || c.images != 16000 || c.batch != 256 || c.crop != 224 || c.model != "resnet50" || c.seconds != 5 || c.warmup != -1 {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	if !slices.Equal(c.workers, []int{1, 2, 4, 7, 14}) || !slices.Equal(c.minioWorkers, []int{14}) || !slices.Equal(c.passes, allPasses) {
		t.Fatalf("default lists: %v %v %v", c.workers, c.minioWorkers, c.passes)
	}
	// --passes keeps the sweep's order whatever the flag's.
	c, err = parseFlags([]string{"--passes", "pagecache, local,ceiling", "--workers", "2, 4", "--model", "tiny", "--deadline", "5m30s"})
	if err != nil || !slices.Equal(c.passes, []string{passCeiling, passLocal, passPageCache}) || !slices.Equal(c.workers, []int{2, 4}) || c.model != "tiny" || c.deadline.Seconds() != 330 {
		t.Fatalf("got %+v, %v", c, err)
	}
	for _, bad := range [][]string{{"--workers", "two"}, {"--workers", "-1"}, {"--workers", "1,1"}, {"--workers", ""}, {"--minio-workers", "300"},
		{"--passes", "local,nfs"}, {"--passes", ""}, {"--passes", "local,local"}, {"--images", "5", "--classes", "10"}, {"--batch", "0"},
		{"--crop", "4"}, {"--model", "../x"}, {"--model", ""}, {"--device", "tpu"}, {"--seconds", "-1"}, {"--seconds", "NaN"}, {"--warmup", "-2"},
		{"--gen-procs", "0"}, {"--deadline", "-1s"}, {"--latency", "-3"}, {"extra"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q: no error", bad)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error of more than one line: %v", bad, err)
		}
	}
	if _, err := parseFlags([]string{"--passes", "local,nfs"}); err == nil || !strings.Contains(err.Error(), `"nfs"`) {
		t.Errorf("--passes local,nfs: %v; want an error naming nfs", err)
	}
}

func FuzzParseFlags(f *testing.F) {
	f.Add("--workers", "1,2,4,7,14")
	f.Add("--passes", "local,,minio")
	f.Add("--minio-workers", "4, 14")
	f.Add("--seconds", "1e309")
	f.Fuzz(func(t *testing.T, a, b string) {
		c, err := parseFlags([]string{a, b})
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("%q %q: error of more than one line: %v", a, b, err)
			}
			return
		}
		if len(c.workers) == 0 || len(c.minioWorkers) == 0 || len(c.passes) == 0 || c.batch < 1 || c.images < c.classes || !(c.seconds >= 0) {
			t.Fatalf("%q %q accepted as %+v", a, b, c)
		}
		for _, w := range append(slices.Clone(c.workers), c.minioWorkers...) {
			if w < 0 || w > 256 {
				t.Fatalf("%q %q: worker count %d accepted", a, b, w)
			}
		}
		for _, p := range c.passes {
			if !slices.Contains(allPasses, p) {
				t.Fatalf("%q %q: unknown pass %q accepted", a, b, p)
			}
		}
	})
}

func TestRatios(t *testing.T) {
	rows := []passRow{
		{Pass: passCeiling, Rate: 3000},
		{Pass: passDisk, Workers: 4, Rate: 900, WaitShare: 0.30},
		{Pass: passLocal, Workers: 4, Rate: 1000, WaitShare: 0.25},
		{Pass: passDeclared, Workers: 7, Rate: 500},                 // no local row at 7
		{Pass: passPageCache, Workers: 4, Rate: 0, Error: "failed"}, // failed: no ratio
	}
	ratios(rows)
	if rows[1].VsLocal != 0.9 || rows[1].WaitVsLocal < 0.0499 || rows[1].WaitVsLocal > 0.0501 {
		t.Errorf("disk at 4: %.3f×, %+.3f; want 0.9×, +0.05", rows[1].VsLocal, rows[1].WaitVsLocal)
	}
	if rows[0].VsLocal != 0 || rows[2].VsLocal != 0 || rows[3].VsLocal != 0 || rows[4].VsLocal != 0 {
		t.Errorf("ratios where there is no reference: %+v", rows)
	}
	out := table(&results{Passes: rows, Skipped: []skipped{{Pass: passMinIO, Reason: "no MinIO\nbinary"}}})
	for _, want := range []string{"| 4 | " + passTitle[passDisk] + " | 900 | 30.0% | **0.90×** | +5.0 pt |", "| 4 | " + passTitle[passLocal] + " | 1000 | 25.0% | reference |",
		"failed: failed", "skipped: no MinIO …"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
