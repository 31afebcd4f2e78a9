package warm

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/bench/internal/benchenv"
	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/bench/internal/measure"
	"github.com/dsmount/dsmount/test/testenv"
)

// Summary is the subcommand's line in bench's --help.
const Summary = "`dsmount warm` of a fresh mount against raw GETs from a fresh process"

const bucket = "bench"

type config struct {
	benchenv.Dataset
	benchenv.Proxy
	parallel  int
	chunkSize string
	rounds    int
	isolate   bool
	profDir   string
	daemonEnv []string
	timeline  bool
}

type result struct {
	name string
	measure.Pass
	measure.Usage
	note string
}

// env is what every round shares: the store, the dataset, the binary.
type env struct {
	*benchenv.Run
	cfg      config
	endpoint string // the proxy's URL
	client   *s3.Client
	paths    []string
	sizes    []int64
	total    int64
}

// Main runs the benchmark with the command line args (after "warm").
func Main(args []string) error {
	if len(args) == 1 && args[0] == rawChildArg {
		return rawChildMain()
	}
	var c config
	fs := cli.NewFlagSet("warm", Summary)
	c.Dataset.AddFlags(fs)
	fs.IntVar(&c.parallel, "parallel", 64, "GETs in flight for raw GETs, and dsmount warm --parallel")
	c.Proxy.AddFlags(fs, 5)
	fs.StringVar(&c.chunkSize, "chunk-size", "4M", "dsmount --chunk-size")
	fs.IntVar(&c.rounds, "rounds", 1, "rounds of (raw GETs, warm)")
	benchenv.IsolateFlag(fs, &c.isolate)
	fs.StringVar(&c.profDir, "cpuprofile-dir", "", "write CPU profiles to DIR: raw<N>.pprof of the raw-GET process, warm<N>.pprof of the daemon during round N")
	cli.DaemonEnv(fs, &c.daemonEnv, "one more KEY=VALUE in the daemon's environment (repeatable), e.g. --daemon-env=GOMAXPROCS=1")
	fs.BoolVar(&c.timeline, "timeline", false, "print, for each pass, when the proxy had passed each tenth of the bytes (its ramp and its tail)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}

	t := testenv.NewProgramT("dsmount-benchwarm")
	defer t.Close()
	if c.profDir != "" {
		if err := os.MkdirAll(c.profDir, 0o755); err != nil {
			t.Fatalf("--cpuprofile-dir: %v", err)
		}
	}
	e := setup(t, c)
	var results []result
	var ratios, ratiosInproc []float64
	var timelines []string
	for round := 1; round <= c.rounds; round++ {
		suffix := ""
		if c.rounds > 1 {
			suffix = fmt.Sprintf(" #%d", round)
		}
		raw, tl := e.rawFresh(round)
		raw.name = "raw GETs, own process" + suffix
		timelines = append(timelines, fmt.Sprintf("raw GETs%s:%s", suffix, tl))
		results = append(results, raw)

		inproc := e.rawInProcess()
		inproc.name = "raw GETs, this process" + suffix
		results = append(results, inproc)

		w, tl := e.warm(round)
		w.name = "dsmount warm" + suffix
		timelines = append(timelines, fmt.Sprintf("dsmount warm%s:%s", suffix, tl))
		results = append(results, w)
		ratios = append(ratios, w.FilesPerSec()/raw.FilesPerSec())
		ratiosInproc = append(ratiosInproc, w.FilesPerSec()/inproc.FilesPerSec())
	}
	e.report(results, ratios, ratiosInproc, timelines)
	return nil
}

// setup generates the dataset, puts it in MinIO behind toxiproxy and
// builds dsmount.
func setup(t *testenv.ProgramT, c config) *env {
	e := &env{Run: benchenv.StartRun(t, bucket, c.isolate), cfg: c}
	src := filepath.Join(e.Work, "src")
	t0 := time.Now()
	e.paths = benchenv.Generate(t, src, c.Spec(9))
	e.sizes, e.total = benchenv.Sizes(t, src, e.paths)
	fmt.Fprintf(os.Stderr, "dataset: %d files of %d B (%.2f GB), generated in %v\n", len(e.paths), c.FileSize, float64(e.total)/1e9, cli.Since(t0))

	t0 = time.Now()
	e.Store.Upload(t, bucket, "ds", src, 32)
	fmt.Fprintf(os.Stderr, "uploaded to MinIO in %v\n", cli.Since(t0))
	proxy := e.Store.AddProxy("minio", c.Proxy)
	e.endpoint = "http://" + proxy
	fmt.Fprintf(os.Stderr, "MinIO %s behind toxiproxy %s (+%d ms ± %d on every answer)\n", e.Store.MinIO.Addr(), proxy, c.Latency, c.Jitter)
	if c.isolate {
		fmt.Fprintln(os.Stderr, e.Store.CPUNote)
	}
	e.Build()
	e.client = e.Store.Client(e.endpoint)
	return e
}

// trace samples the proxy for --timeline from when it is called until the
// func it returns is; without --timeline nothing samples during the
// passes.
func (e *env) trace() (stop func() string) {
	if !e.cfg.timeline {
		return func() string { return "" }
	}
	tl := startTimeline(e.Store.Toxiproxy.Pid(), 20*time.Millisecond)
	return func() string { return tl.deciles(e.total) }
}

// rawFresh is the reference: raw GETs in a process of their own, started
// for the pass as the daemon is (rawchild.go). It also returns the pass's
// --timeline.
func (e *env) rawFresh(round int) (result, string) {
	c := e.cfg
	user, pass := e.Store.MinIO.Creds()
	job := rawJob{Endpoint: e.endpoint, User: user, Pass: pass, Bucket: bucket, Prefix: "ds", Names: e.paths, Sizes: e.sizes, Parallel: c.parallel}
	if c.profDir != "" {
		job.Profile = filepath.Join(c.profDir, fmt.Sprintf("raw%d.pprof", round))
	}
	m := measure.Start(e.Store, nil)
	stopTrace := e.trace()
	n, el, pcpu, err := rawGetsFresh(job)
	if err != nil {
		e.T.Fatalf("%v", err)
	}
	tl := stopTrace()
	r := result{Pass: measure.Pass{Files: int64(len(e.paths)), Bytes: n, Elapsed: el}, Usage: m.Stop(),
		note: fmt.Sprintf("%d GetObject in flight, no filesystem; a new process, timed from start to exit", c.parallel)}
	r.ProcCPU = pcpu
	if n != e.total {
		e.T.Fatalf("raw GETs read %d bytes, want %d", n, e.total)
	}
	return r, tl
}

// rawInProcess is context: the same GETs from this long-lived process,
// whose connections and heap carry over from round to round. Each object
// is fetched whole with a ranged GetObject (bytes=0-(size-1), as the
// daemon does).
func (e *env) rawInProcess() result {
	m := measure.Start(e.Store, measure.Self)
	p, err := measure.RawGets(e.client, bucket, "ds", e.paths, e.sizes, e.cfg.parallel)
	if err != nil {
		e.T.Fatalf("raw GETs: %v", err)
	}
	return result{Pass: p, Usage: m.Stop(), note: fmt.Sprintf("%d GetObject in flight, no filesystem", e.cfg.parallel)}
}

// warm mounts the bucket on a fresh cache dir through the proxy and times
// `dsmount warm MOUNTPOINT --parallel N --json`; it also returns the
// pass's --timeline.
func (e *env) warm(round int) (result, string) {
	c, t := e.cfg, e.T
	dir := filepath.Join(e.Work, fmt.Sprintf("round%d", round))
	daemonEnv := append([]string(nil), c.daemonEnv...)
	if c.profDir != "" {
		daemonEnv = append(daemonEnv, "DSMOUNT_CPUPROFILE="+filepath.Join(c.profDir, fmt.Sprintf("warm%d.pprof", round)))
	}
	mp, cacheDir := filepath.Join(dir, "mnt"), filepath.Join(dir, "cache")
	os.MkdirAll(mp, 0o755)
	os.MkdirAll(cacheDir, 0o755)
	t0 := time.Now()
	m := testenv.StartMount(t, testenv.MountConfig{Bin: e.Bin, Source: "s3://" + bucket + "/ds", Mountpoint: mp, Env: e.Store.MinIO.Env(daemonEnv...),
		Args: []string{"--cache-dir", cacheDir, "--cache-size", "20G", "--chunk-size", c.chunkSize, "--s3-endpoint", e.endpoint, "--s3-path-style"}})
	mountTime := time.Since(t0)
	meter := measure.Start(e.Store, measure.Proc(m.Pid()))
	stopTrace := e.trace()
	r := testenv.RunCLI(e.Bin, nil, 30*time.Minute, "warm", mp, "--parallel", fmt.Sprint(c.parallel), "--json")
	tl := stopTrace()
	usage := meter.Stop()
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
	check, err := testenv.WarmCheckErr(e.Bin, 10*time.Minute, mp)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if check.FilesCached != check.FilesTotal || check.BytesCached != check.BytesTotal {
		t.Fatalf("after warm, warm --check says %+v", check)
	}
	m.Stop()
	// Every round starts from the same machine state: the last round's
	// 1 GB cache leaves the page cache (a page cache growing round by
	// round made each later warm slower here), but its files stay until
	// the end: deleting 10,000 files made the next round's file creation
	// several times slower. Not drop_caches: that would also evict
	// MinIO's data and favour whichever pass runs second.
	if err := testenv.SettleKeeping(dir); err != nil {
		t.Fatalf("settle %s: %v", dir, err)
	}
	if rep.Files != int64(len(e.paths)) || rep.Bytes != e.total {
		t.Fatalf("warm covered %d files, %d bytes; the dataset is %d files, %d bytes", rep.Files, rep.Bytes, len(e.paths), e.total)
	}
	return result{Pass: measure.Pass{Files: rep.Files, Bytes: rep.Bytes, Elapsed: r.Duration}, Usage: usage,
		note: fmt.Sprintf("fresh mount+cache, --parallel %d; wall time of the command (it reports %.2fs; mount start %.2fs not counted)",
			c.parallel, rep.Seconds, mountTime.Seconds())}, tl
}

func (e *env) report(results []result, ratios, ratiosInproc []float64, timelines []string) {
	c := e.cfg
	if c.timeline {
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
			ratio = fmt.Sprintf("%.2f", r.FilesPerSec()/rawRef.FilesPerSec())
		}
		fmt.Printf("%-28s %8d %9.1f %9.2f %10.0f %9.1f %8d %8s %9s %8.1fs %8.1fs  %s\n", r.name, r.Files, float64(r.Bytes)/1e6,
			r.Elapsed.Seconds(), r.FilesPerSec(), r.MBPerSec(), r.GETs, ratio,
			fmt.Sprintf("%.2f/%d", r.CPU, runtime.NumCPU()), r.ProcCPU, r.StoreCPU, r.note)
	}
	med := testenv.Median(ratios)
	verdict := "meets"
	if med < 0.9 {
		verdict = "MISSES"
	}
	fmt.Printf("\nwarm / raw GETs in their own process (files/s): %.2f (median of %d round(s): %s); target >= 0.90: %s\n", med, len(ratios), measure.List(ratios, "%.2f"), verdict)
	fmt.Printf("context, warm / raw GETs from this long-lived process: %.2f (%s)\n", testenv.Median(ratiosInproc), measure.List(ratiosInproc, "%.2f"))
	fmt.Printf("%d files of %d B; MinIO behind toxiproxy +%d ms ± %d; %d in flight; --chunk-size %s\n",
		len(e.paths), c.FileSize, c.Latency, c.Jitter, c.parallel, c.chunkSize)
	fmt.Printf("cpus: %s\n", e.Store.CPUNote)
	if len(c.daemonEnv) > 0 {
		fmt.Printf("daemon environment adds: %s\n", strings.Join(c.daemonEnv, " "))
	}
	fmt.Printf("cpu busy: cores busy on the whole machine during the pass (MinIO and toxiproxy included); proc cpu: CPU time of this program (raw) or of the dsmount daemon (warm); store cpu: CPU time of MinIO and toxiproxy\n")
}
