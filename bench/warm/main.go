// Command benchwarm measures `dsmount warm` against the backend's own
// ceiling, side by side in one run (these machines are shared and noisy):
//
//   - raw GETs (the reference): plain parallel ranged GetObject calls
//     (Range bytes=0-(size-1), as the daemon makes them), --parallel in
//     flight, through the same proxy, no filesystem, from a process started
//     for the pass and timed from its start to its exit;
//   - raw GETs from this long-lived process (context): the same, with
//     connections and a heap kept from round to round, which no fresh
//     daemon has (rawchild.go says what that is worth here);
//   - warm: `dsmount warm MOUNTPOINT --parallel N` on a fresh mount and a
//     fresh cache dir, timed from the command's start to its exit (the walk
//     of the tree through the mount included; the mount's own start and
//     listing are not).
//
// The dataset (--files small files of --file-size bytes) lives in MinIO
// behind a toxiproxy adding --latency ms (± --jitter) to every answer, like
// a remote S3. Each round runs the three passes in that order; --rounds > 1
// repeats them and reports every round and the median ratio. Usage:
// go run ./test/benchwarm [flags]; needs root (FUSE) and the MinIO and
// toxiproxy binaries that test/run.sh installs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/test/testenv"
)

type result struct {
	name    string
	files   int64
	bytes   int64
	elapsed time.Duration
	gets    int64
	note    string
	cpu     float64 // machine CPU busy during the pass, in cores (of runtime.NumCPU)
	procCPU float64 // CPU seconds of the process doing the work (this program's raw GETs, or the daemon)
	// storeCPU is the CPU seconds MinIO and toxiproxy spent during the
	// pass: with every process on the same cores, what the store costs
	// is CPU the client can't have.
	storeCPU float64
}

func (r result) filesPerSec() float64 { return float64(r.files) / r.elapsed.Seconds() }
func (r result) mbPerSec() float64    { return float64(r.bytes) / 1e6 / r.elapsed.Seconds() }

func main() {
	if len(os.Args) == 2 && os.Args[1] == rawChildArg {
		rawChildMain()
		return
	}
	var (
		nFiles    = flag.Int("files", 10000, "number of small files")
		fileSize  = flag.Int("file-size", 110_000, "size of each file in bytes")
		parallel  = flag.Int("parallel", 64, "GETs in flight for raw GETs, and dsmount warm --parallel")
		latency   = flag.Int("latency", 20, "ms added by the proxy to every answer from MinIO")
		jitter    = flag.Int("jitter", 5, "± ms of jitter on the latency")
		chunkSize = flag.String("chunk-size", "4M", "dsmount --chunk-size")
		rounds    = flag.Int("rounds", 1, "rounds of (raw GETs, warm)")
		isolate   = flag.Bool("isolate-backend", false, "pin MinIO and toxiproxy to CPU 0, and this program (raw GETs), the daemon and warm to the other CPUs: a remote store's CPU is not the node's")
		profDir   = flag.String("cpuprofile-dir", "", "write CPU profiles to DIR: raw<N>.pprof of the raw-GET process, warm<N>.pprof of the daemon during round N")
	)
	var daemonEnv []string
	flag.Func("daemon-env", "one more KEY=VALUE in the daemon's environment (repeatable), e.g. --daemon-env=GOMAXPROCS=1", func(v string) error {
		if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
			return fmt.Errorf("want KEY=VALUE, got %q", v)
		}
		daemonEnv = append(daemonEnv, v)
		return nil
	})
	showTimeline := flag.Bool("timeline", false, "print, for each pass, when the proxy had passed each tenth of the bytes (its ramp and its tail)")
	flag.Parse()

	t := testenv.NewProgramT("dsmount-benchwarm")
	defer t.Close()
	if *profDir != "" {
		if err := os.MkdirAll(*profDir, 0o755); err != nil {
			t.Fatalf("--cpuprofile-dir: %v", err)
		}
	}
	work := t.TempDir()
	src := filepath.Join(work, "src")
	os.MkdirAll(src, 0o755)

	spec := testenv.DatasetSpec{Seed: 9, SmallFiles: *nFiles, SmallMin: *fileSize, SmallMax: *fileSize, FilesPerDir: 500, MaxDepth: 2}
	t0 := time.Now()
	paths := testenv.GenerateDataset(t, src, spec)
	sizes := make([]int64, len(paths))
	var total int64
	for i, p := range paths {
		st, err := os.Stat(filepath.Join(src, filepath.FromSlash(p)))
		if err != nil {
			t.Fatalf("%v", err)
		}
		sizes[i] = st.Size()
		total += st.Size()
	}
	fmt.Fprintf(os.Stderr, "dataset: %d files of %d B (%.2f GB), generated in %v\n", len(paths), *fileSize, float64(total)/1e9, time.Since(t0).Round(time.Millisecond))

	mc := testenv.StartMinIO(t)
	mc.CreateBucket("bench")
	t0 = time.Now()
	if err := mc.UploadDirErr(context.Background(), "bench", "ds", src, 32); err != nil {
		t.Fatalf("upload: %v", err)
	}
	fmt.Fprintf(os.Stderr, "uploaded to MinIO in %v\n", time.Since(t0).Round(time.Millisecond))

	tp := testenv.StartToxiproxy(t)
	proxy := tp.AddProxy("minio", mc.Addr())
	tp.AddLatency("minio", *latency, *jitter)
	endpoint := "http://" + proxy
	fmt.Fprintf(os.Stderr, "MinIO %s behind toxiproxy %s (+%d ms ± %d on every answer)\n", mc.Addr(), proxy, *latency, *jitter)
	cpuNote := "all processes share all CPUs"
	if *isolate {
		var err error
		if cpuNote, err = testenv.IsolateBackend(mc.Pid(), tp.Pid()); err != nil {
			t.Fatalf("--isolate-backend: %v", err)
		}
		fmt.Fprintln(os.Stderr, cpuNote)
	}

	bin, err := testenv.BuildDsmount(filepath.Join(work, "bin"))
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	gets := func() int64 { n, _ := mc.GetObjectCount(); return n }
	storeCPU := func() float64 { return testenv.ProcCPU(mc.Pid()) + testenv.ProcCPU(tp.Pid()) }
	user, pass := mc.Creds()
	client := testenv.NewS3Client(endpoint, user, pass)

	var results []result
	var ratios, ratiosInproc []float64
	var timelines []string
	// trace samples the proxy for --timeline from when it is called until
	// the func it returns is; without --timeline nothing samples during the
	// passes.
	trace := func() (stop func() string) {
		if !*showTimeline {
			return func() string { return "" }
		}
		tl := startTimeline(tp.Pid(), 20*time.Millisecond)
		return func() string { return tl.deciles(total) }
	}
	for round := 1; round <= *rounds; round++ {
		suffix := ""
		if *rounds > 1 {
			suffix = fmt.Sprintf(" #%d", round)
		}
		// The reference: raw GETs in a process of their own, started for
		// the pass as the daemon is (rawchild.go).
		g0 := gets()
		c0, s0 := testenv.MachineCPU(), storeCPU()
		job := rawJob{Endpoint: endpoint, User: user, Pass: pass, Bucket: "bench", Prefix: "ds", Names: paths, Sizes: sizes, Parallel: *parallel}
		if *profDir != "" {
			job.Profile = filepath.Join(*profDir, fmt.Sprintf("raw%d.pprof", round))
		}
		stopTrace := trace()
		n, el, pcpu, err := rawGetsFresh(job)
		if err != nil {
			t.Fatalf("%v", err)
		}
		timelines = append(timelines, fmt.Sprintf("raw GETs%s:%s", suffix, stopTrace()))
		raw := result{name: "raw GETs, own process" + suffix, files: int64(len(paths)), bytes: n, elapsed: el,
			gets: gets() - g0, cpu: testenv.MachineCPU().BusySince(c0), procCPU: pcpu, storeCPU: storeCPU() - s0,
			note: fmt.Sprintf("%d GetObject in flight, no filesystem; a new process, timed from start to exit", *parallel)}
		if n != total {
			t.Fatalf("raw GETs read %d bytes, want %d", n, total)
		}
		results = append(results, raw)

		// Context: the same GETs from this long-lived process, whose
		// connections and heap carry over from round to round.
		g0 = gets()
		c0, self0, s0 := testenv.MachineCPU(), testenv.SelfCPU(), storeCPU()
		inproc := rawGets(t, client, paths, sizes, *parallel)
		inproc.gets = gets() - g0
		inproc.cpu = testenv.MachineCPU().BusySince(c0)
		inproc.procCPU = testenv.SelfCPU() - self0
		inproc.storeCPU = storeCPU() - s0
		inproc.name = "raw GETs, this process" + suffix
		results = append(results, inproc)

		roundDir := filepath.Join(work, fmt.Sprintf("round%d", round))
		profEnv := append([]string(nil), daemonEnv...)
		if *profDir != "" {
			profEnv = append(profEnv, "DSMOUNT_CPUPROFILE="+filepath.Join(*profDir, fmt.Sprintf("warm%d.pprof", round)))
		}
		var wtl string
		w := warm(t, bin, mc, endpoint, roundDir, *chunkSize, *parallel, gets, storeCPU, profEnv, func() func() {
			stopTrace := trace()
			return func() { wtl = stopTrace() }
		})
		timelines = append(timelines, fmt.Sprintf("dsmount warm%s:%s", suffix, wtl))
		w.name = "dsmount warm" + suffix
		// Every round starts from the same machine state: the last round's
		// 1 GB cache leaves the page cache (a page cache growing round by
		// round made each later warm slower here), but its files stay until
		// the end: deleting 10,000 files made the next round's file
		// creation several times slower. Not drop_caches: that would also
		// evict MinIO's data and favour whichever pass runs second.
		if err := testenv.SettleKeeping(roundDir); err != nil {
			t.Fatalf("settle %s: %v", roundDir, err)
		}
		if w.files != int64(len(paths)) || w.bytes != total {
			t.Fatalf("warm covered %d files, %d bytes; the dataset is %d files, %d bytes", w.files, w.bytes, len(paths), total)
		}
		results = append(results, w)
		ratios = append(ratios, w.filesPerSec()/raw.filesPerSec())
		ratiosInproc = append(ratiosInproc, w.filesPerSec()/inproc.filesPerSec())
	}

	if *showTimeline {
		fmt.Println("\nwhen the proxy had passed each tenth of the bytes (seconds from the pass's start):")
		for _, l := range timelines {
			fmt.Println(l)
		}
	}
	fmt.Printf("\n%-28s %8s %9s %9s %10s %9s %8s %8s %9s %9s %9s  %s\n", "pass", "files", "MB", "seconds", "files/s", "MB/s", "GETs", "ratio", "cpu busy", "proc cpu", "store cpu", "what")
	var rawRef result
	for _, r := range results {
		ratio := ""
		switch {
		case strings.HasPrefix(r.name, "raw GETs, own"):
			rawRef = r
		case strings.HasPrefix(r.name, "dsmount"):
			ratio = fmt.Sprintf("%.2f", r.filesPerSec()/rawRef.filesPerSec())
		}
		fmt.Printf("%-28s %8d %9.1f %9.2f %10.0f %9.1f %8d %8s %9s %8.1fs %8.1fs  %s\n", r.name, r.files, float64(r.bytes)/1e6,
			r.elapsed.Seconds(), r.filesPerSec(), r.mbPerSec(), r.gets, ratio,
			fmt.Sprintf("%.2f/%d", r.cpu, runtime.NumCPU()), r.procCPU, r.storeCPU, r.note)
	}
	med := testenv.Median(ratios)
	verdict := "meets"
	if med < 0.9 {
		verdict = "MISSES"
	}
	fmt.Printf("\nwarm / raw GETs in their own process (files/s): %.2f (median of %d round(s): %s); target >= 0.90: %s\n", med, len(ratios), list(ratios), verdict)
	fmt.Printf("context, warm / raw GETs from this long-lived process: %.2f (%s)\n", testenv.Median(ratiosInproc), list(ratiosInproc))
	fmt.Printf("%d files of %d B; MinIO behind toxiproxy +%d ms ± %d; %d in flight; --chunk-size %s\n",
		len(paths), *fileSize, *latency, *jitter, *parallel, *chunkSize)
	fmt.Printf("cpus: %s\n", cpuNote)
	if len(daemonEnv) > 0 {
		fmt.Printf("daemon environment adds: %s\n", strings.Join(daemonEnv, " "))
	}
	fmt.Printf("cpu busy: cores busy on the whole machine during the pass (MinIO and toxiproxy included); proc cpu: CPU time of this program (raw) or of the dsmount daemon (warm); store cpu: CPU time of MinIO and toxiproxy\n")
}

func list(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, ", ")
}

// rawGets fetches every object whole with a ranged GetObject (bytes=0-(size-1),
// as the daemon does), par in flight: what the store gives through the proxy
// with no filesystem in the way.
func rawGets(t *testenv.ProgramT, client *s3.Client, paths []string, sizes []int64, par int) result {
	n, el, err := testenv.ParallelGets(context.Background(), client, "bench", "ds", paths, sizes, par)
	if err != nil {
		t.Fatalf("raw GETs: %v", err)
	}
	return result{files: int64(len(paths)), bytes: n, elapsed: el,
		note: fmt.Sprintf("%d GetObject in flight, no filesystem", par)}
}

// warm mounts the bucket on a fresh cache dir through endpoint and times
// `dsmount warm MOUNTPOINT --parallel par --json`; trace is started with
// the command and its result stopped when it exits.
func warm(t *testenv.ProgramT, bin string, mc *testenv.MinIO, endpoint, dir, chunkSize string, par int, gets func() int64, storeCPU func() float64, env []string, trace func() (stop func())) result {
	mp, cacheDir := filepath.Join(dir, "mnt"), filepath.Join(dir, "cache")
	os.MkdirAll(mp, 0o755)
	os.MkdirAll(cacheDir, 0o755)
	t0 := time.Now()
	m := testenv.StartMount(t, testenv.MountConfig{Bin: bin, Source: "s3://bench/ds", Mountpoint: mp, Env: append(mc.Env(), env...),
		Args: []string{"--cache-dir", cacheDir, "--cache-size", "20G", "--chunk-size", chunkSize, "--s3-endpoint", endpoint, "--s3-path-style"}})
	mountTime := time.Since(t0)
	g0 := gets()
	c0, d0, s0 := testenv.MachineCPU(), testenv.ProcCPU(m.Pid()), storeCPU()
	stopTrace := trace()
	r := testenv.RunCLI(bin, nil, 30*time.Minute, "warm", mp, "--parallel", fmt.Sprint(par), "--json")
	stopTrace()
	cpu, dcpu, scpu := testenv.MachineCPU().BusySince(c0), testenv.ProcCPU(m.Pid())-d0, storeCPU()-s0
	g1 := gets()
	if r.ExitCode != 0 {
		t.Fatalf("dsmount warm: exit %d\nstdout: %s\nstderr: %s", r.ExitCode, r.Stdout, r.Stderr)
	}
	var rep testenv.WarmReport
	if err := testenv.DecodeJSONObject(r.Stdout, &rep); err != nil {
		t.Fatalf("dsmount warm --json: %v", err)
	}
	if rep.ChunksNotCached != 0 || rep.CacheFull || rep.Interrupted || rep.BytesFetched != rep.Bytes {
		t.Fatalf("dsmount warm did not fetch everything: %+v", rep)
	}
	c, err := testenv.WarmCheckErr(bin, 10*time.Minute, mp)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if c.FilesCached != c.FilesTotal || c.BytesCached != c.BytesTotal {
		t.Fatalf("after warm, warm --check says %+v", c)
	}
	m.Stop()
	return result{files: rep.Files, bytes: rep.Bytes, elapsed: r.Duration, gets: g1 - g0, cpu: cpu, procCPU: dcpu, storeCPU: scpu,
		note: fmt.Sprintf("fresh mount+cache, --parallel %d; wall time of the command (it reports %.2fs; mount start %.2fs not counted)",
			par, rep.Seconds, mountTime.Seconds())}
}
