package pipeline

import (
	"slices"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"--images", "300", "--classes", "10", "--workers", "1, 4", "--isolate-backend"})
	if err != nil || c.images != 300 || c.classes != 10 || len(c.workers) != 2 || c.workers[1] != 4 || !c.isolate {
		t.Fatalf("got %+v, %v", c, err)
	}
	if want := []string{sysLocal, sysDeclared, sysUndeclared, sysRclone, sysS3fs}; !slices.Equal(c.systems, want) {
		t.Errorf("default systems %q, want %q", c.systems, want)
	}
	if c.seriesEpochs != 4 || c.seriesWorkers != 4 || c.diskEpochs != 2 || c.plot != "docs/pipeline.png" || c.json != "docs/pipeline.json" {
		t.Errorf("defaults: %+v", c)
	}
	// --systems keeps the tables' order whatever the flag's.
	c, err = parseFlags([]string{"--systems", "s3fs, local,rclone", "--series-epochs", "2", "--series-workers", "2", "--plot", "", "--json", "/x/r.json"})
	if err != nil || !slices.Equal(c.systems, []string{sysLocal, sysRclone, sysS3fs}) || c.seriesEpochs != 2 || c.seriesWorkers != 2 || c.plot != "" || c.json != "/x/r.json" {
		t.Fatalf("got %+v, %v", c, err)
	}
	// The cache-disk pass alone.
	if c, err = parseFlags([]string{"--workers", "none", "--series-epochs", "0", "--systems", "local,declared", "--disk-epochs", "3"}); err != nil || c.diskEpochs != 3 {
		t.Fatalf("the cache-disk pass alone: %+v, %v", c, err)
	}
	// The series alone.
	if c, err = parseFlags([]string{"--workers", "none", "--systems", "declared"}); err != nil || len(c.workers) != 0 {
		t.Fatalf("--workers none: %+v, %v", c, err)
	}
	for _, bad := range [][]string{{"--workers", "two"}, {"--workers", "-1"}, {"--images", "5", "--classes", "10"}, {"--batch", "0"}, {"extra"}, {"--latency", "-3"},
		{"--systems", "local,nfs"}, {"--systems", ""}, {"--systems", "rclone,rclone"}, {"--systems", "Local"},
		{"--series-epochs", "-1"}, {"--series-workers", "-2"}, {"--disk-epochs", "-1"}, {"--disk-epochs", "101"},
		{"--workers", "none", "--series-epochs", "0", "--disk-epochs", "0"}, {"--workers", "none", "--series-epochs", "0", "--systems", "local,rclone"}, {"--workers", "", "--systems", "local,s3fs"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q: no error", bad)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error of more than one line: %v", bad, err)
		}
	}
	if _, err := parseFlags([]string{"--systems", "local,nfs"}); err == nil || !strings.Contains(err.Error(), `"nfs"`) {
		t.Errorf("--systems local,nfs: %v; want an error naming nfs", err)
	}
}

func FuzzParseFlags(f *testing.F) {
	f.Add("--workers", "1,2,4,7")
	f.Add("--images", "10")
	f.Add("--systems", "declared,rclone")
	f.Add("--systems", "local,,s3fs")
	f.Add("--series-epochs", "0")
	f.Fuzz(func(t *testing.T, a, b string) {
		c, err := parseFlags([]string{a, b})
		if err != nil {
			return
		}
		if c.images < c.classes || c.classes < 1 || c.batch < 1 || len(c.systems) == 0 || c.seriesEpochs < 0 || c.seriesWorkers < 0 || c.diskEpochs < 0 {
			t.Fatalf("%q %q accepted as %+v", a, b, c)
		}
		series, disk := false, false
		for _, s := range c.systems {
			series = series || inSeries(s)
			disk = disk || inDisk(s)
			if !slices.ContainsFunc(systemFlags, func(f struct{ flag, name string }) bool { return f.name == s }) {
				t.Fatalf("%q %q: unknown system %q accepted", a, b, s)
			}
		}
		if len(c.workers) == 0 && (c.seriesEpochs == 0 || !series) && (c.diskEpochs == 0 || !disk) {
			t.Fatalf("%q %q: nothing to run, accepted as %+v", a, b, c)
		}
		for _, w := range c.workers {
			if w < 0 || w > 64 {
				t.Fatalf("%q %q: worker count %d accepted", a, b, w)
			}
		}
	})
}

func TestDiskMeans(t *testing.T) {
	rounds := [][]diskEpoch{
		{{System: sysLocal, Rate: 100}, {System: sysDeclared, Rate: 90, ReadsPerImage: 0.5}},
		{{System: sysDeclared, Rate: 110, ReadsPerImage: 0.5}, {System: sysLocal, Rate: 100}},
	}
	m := diskMeans(rounds)
	if len(m) != 2 || m[0].System != sysLocal || m[1].System != sysDeclared || m[1].Rate != 100 || m[1].Ratio != 1 || m[1].ReadsPerImage != 0.5 {
		t.Fatalf("means %+v", m)
	}
	if diskMeans(nil) != nil {
		t.Fatal("means of no rounds")
	}
}
