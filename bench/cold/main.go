package cold

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dsmount/dsmount/bench/internal/benchenv"
	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/bench/internal/measure"
	"github.com/dsmount/dsmount/test/testenv"
)

// Summary is the subcommand's line in bench's --help.
const Summary = "cold and hot reads: direct, raw GETs, a fresh mount, the same mount, a remount"

type result struct {
	name string
	measure.Pass
	refName     string
	gets        int64 // MinIO GETs during the pass (-1: not measured)
	description string
}

// Main runs the benchmark with the command line args (after "cold").
func Main(args []string) error {
	fs := cli.NewFlagSet("cold", Summary)
	var ds benchenv.Dataset
	ds.AddFlags(fs)
	var (
		largeMiB  = fs.Int64("large-mib", 256, "size of the large file in MiB (0: none)")
		readers   = fs.Int("readers", 8, "parallel readers per small-file pass")
		getsPar   = fs.Int("gets", 64, "GETs in flight for the raw-GET reference")
		chunkSize = fs.String("chunk-size", "4M", "dsmount --chunk-size")
		seed      = fs.Int64("seed", 1, "shuffle seed")
		drop      = fs.Bool("drop-caches", os.Geteuid() == 0, "drop the page cache before cold passes (root)")
	)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}

	t := testenv.NewProgramT("dsmount-bench")
	defer t.Close()
	work := t.TempDir()
	src := filepath.Join(work, "src")

	spec := ds.Spec(7)
	if *largeMiB > 0 {
		spec.LargeFiles = []int64{*largeMiB << 20}
	}
	t0 := time.Now()
	paths := benchenv.Generate(t, src, spec)
	var small []string
	var large string
	for _, p := range paths {
		if strings.HasPrefix(p, "large/") {
			large = p
		} else {
			small = append(small, p)
		}
	}
	sort.Strings(small)
	fmt.Fprintf(os.Stderr, "dataset: %d small files of %d B + large %d MiB, generated in %v\n", len(small), ds.FileSize, *largeMiB, time.Since(t0).Round(time.Millisecond))

	mc := testenv.StartMinIO(t)
	mc.CreateBucket("bench")
	t0 = time.Now()
	mc.UploadDir("bench", "ds", src)
	fmt.Fprintf(os.Stderr, "uploaded to MinIO in %v\n", time.Since(t0).Round(time.Millisecond))

	bin, err := testenv.BuildDsmount(filepath.Join(work, "bin"))
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	dropCaches := func() {
		if !*drop {
			return
		}
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
			t.Fatalf("drop caches: %v (run as root or pass --drop-caches=false)", err)
		}
	}
	gets := func() int64 { n, _ := mc.GetObjectCount(); return n }

	var results []result
	smallPass := func(name, root, ref, desc string) {
		before := gets()
		var bytes atomic.Int64
		start := time.Now()
		err := testenv.ReadAllShuffled(root, small, *readers, *seed, func(_ string, data []byte) error {
			bytes.Add(int64(len(data)))
			return nil
		})
		el := time.Since(start)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		results = append(results, result{name: name, Pass: measure.Pass{Files: int64(len(small)), Bytes: bytes.Load(), Elapsed: el},
			refName: ref, gets: gets() - before, description: desc})
	}
	largePass := func(name, root, ref, desc string) {
		if large == "" {
			return
		}
		before := gets()
		start := time.Now()
		n, err := readSequential(filepath.Join(root, large))
		el := time.Since(start)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		results = append(results, result{name: name, Pass: measure.Pass{Files: 1, Bytes: n, Elapsed: el}, refName: ref, gets: gets() - before, description: desc})
	}

	// References: direct local reads, cold and warm.
	dropCaches()
	smallPass("direct cold", src, "", "local dir, page cache dropped")
	smallPass("direct warm", src, "", "local dir, page cache warm")
	dropCaches()
	largePass("large direct cold", src, "", "local file, page cache dropped")
	largePass("large direct warm", src, "", "local file, page cache warm")

	// The backend's own ceiling: parallel GETs, no filesystem.
	results = append(results, rawGets(t, mc, small, *getsPar, *seed))

	// Through the mount.
	mnt := filepath.Join(work, "mnt")
	os.MkdirAll(mnt, 0o755)
	cacheDir := filepath.Join(work, "cache")
	mountArgs := append([]string{"--cache-dir", cacheDir, "--chunk-size", *chunkSize}, mc.MountArgs()...)
	m := testenv.StartMount(t, testenv.MountConfig{Bin: bin, Source: "s3://bench/ds", Mountpoint: mnt, Args: mountArgs, Env: mc.Env()})
	smallPass("mount cold", mnt, "raw GETs", "fresh cache, from MinIO")
	largePass("large mount cold", mnt, "large direct cold", "fresh cache, from MinIO")
	smallPass("mount hot (same mount)", mnt, "direct warm", "kernel page cache")
	largePass("large mount hot (same mount)", mnt, "large direct warm", "kernel page cache")
	m.Stop()

	m = testenv.StartMount(t, testenv.MountConfig{Bin: bin, Source: "s3://bench/ds", Mountpoint: mnt, Args: mountArgs, Env: mc.Env()})
	dropCaches()
	smallPass("mount hot (remount, cold page cache)", mnt, "direct cold", "remount, chunks read from cache files on disk")
	smallPass("mount hot (remount)", mnt, "direct warm", "remount, second pass")
	dropCaches()
	largePass("large mount hot (remount, cold page cache)", mnt, "large direct cold", "remount, cache file on disk")
	m.Stop()
	m = testenv.StartMount(t, testenv.MountConfig{Bin: bin, Source: "s3://bench/ds", Mountpoint: mnt, Args: mountArgs, Env: mc.Env()})
	readSequential(filepath.Join(src, large)) // warm the reference's page cache again
	largePass("large mount hot (remount)", mnt, "large direct warm", "remount, cache file in page cache")
	m.Stop()

	report(results, *readers)
	return nil
}

// readSequential reads path whole in 1 MiB reads.
func readSequential(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return testenv.Drain(f, make([]byte, 1<<20))
}

// rawGets fetches every small object with plain GetObject calls, par in
// flight, in the same shuffled order: what the store gives with no
// filesystem in the way.
func rawGets(t *testenv.ProgramT, mc *testenv.MinIO, small []string, par int, seed int64) result {
	order := testenv.Shuffled(small, seed)
	p, err := measure.RawGets(mc.Client(), "bench", "ds", order, nil, par)
	if err != nil {
		t.Fatalf("raw GETs: %v", err)
	}
	return result{name: "raw GETs", Pass: p, gets: int64(len(order)), description: fmt.Sprintf("%d GetObject in flight, no filesystem", par)}
}

func report(results []result, readers int) {
	byName := map[string]result{}
	for _, r := range results {
		byName[r.name] = r
	}
	fmt.Printf("\n%-44s %10s %10s %8s %-22s %8s  %s\n", "pass", "files/s", "MB/s", "GETs", "vs reference", "ratio", "what")
	for _, r := range results {
		ratio, ref := "", ""
		if r.refName != "" {
			if b, ok := byName[r.refName]; ok {
				ref = r.refName
				if r.Files > 1 {
					ratio = fmt.Sprintf("%.2fx", r.FilesPerSec()/b.FilesPerSec())
				} else {
					ratio = fmt.Sprintf("%.2fx", r.MBPerSec()/b.MBPerSec())
				}
			}
		}
		fps := fmt.Sprintf("%.0f", r.FilesPerSec())
		if r.Files == 1 {
			fps = "-"
		}
		fmt.Printf("%-44s %10s %10.0f %8d %-22s %8s  %s\n", r.name, fps, r.MBPerSec(), r.gets, ref, ratio, r.description)
	}
	fmt.Printf("\nsmall-file passes: %d readers, shuffled; large file: one sequential reader, 1 MiB reads\n", readers)
}
