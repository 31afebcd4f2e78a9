// Command benchorder measures dsmount's readahead (declared epoch orders for
// many small files; sequential prefetch for one large file) against the
// backend's own ceiling, side by side in one run: these machines are shared
// and noisy, so every figure is reported as a ratio to a reference measured
// in the same run, on the same backend.
//
// Small files (--files of --file-size bytes, in MinIO behind a toxiproxy
// adding --latency ms ± --jitter to every answer, like a remote S3):
//
//   - ceiling: plain parallel ranged GetObject calls, 64 in flight, no
//     filesystem (testenv.ParallelGets), in the epoch's shuffled order: what
//     the store gives through the proxy.
//   - cold, not declared: one epoch through a fresh mount and cache dir,
//     --readers goroutines taking the next path of ONE shuffled order from a
//     shared index (like DataLoader workers), each doing open / read-all /
//     close. The daemon only sees the reads: at best --readers GETs in flight.
//   - cold, declared: the same on another fresh mount, after `dsmount order
//     --job bench --epoch 0` with that order (the declaration is inside the
//     timed span). The daemon prefetches ahead of the readers; the target is
//     >= 0.8x the ceiling's files/s.
//   - stall, declared / not declared: the readers also "train": after each
//     sample each sleeps w = readers / (0.6 x ceiling files/s) (--demand
//     0.6), so their aggregate demand is 0.6x what the store can give.
//     Ideally the epoch then takes only the pure work time N*w/readers;
//     stall = (epoch - work) / epoch is the share of the epoch the readers
//     spent waiting for data. Target <= 5% with the order declared; the undeclared figure is
//     for contrast. (Sleeps are compensated: a reader that overslept sleeps
//     that much less next time, so its total sleep is its samples times w.)
//
// Every file read through a mount is checked: size, and a CRC-32C against
// the source file.
//
// Large file (one --large-mib object, behind its own proxy with
// --large-latency ms and, if one connection through it is faster than
// --large-conn-mbs, a bandwidth toxic limiting each connection to that):
//
//   - one connection: a single GetObject of the whole object, MB/s: what a
//     reader gets from the store without parallelism.
//   - dd through the mount: `dd if=MNT/large/large-0.bin of=/dev/null bs=1M`
//     on a fresh mount and cache dir. The daemon sees sequential reads and
//     fetches chunks ahead in parallel; the target is >= 4x one connection.
//   - dd from local disk: the same file from the local source directory, its
//     page cache dropped (fadvise DONTNEED), for context.
//
// Streams (--streams N files of --stream-mib, through the large file's
// proxy; off by default): the store's own 16 ranged GETs over all N files
// (the reference), and one dd per file, all at once, through one cold
// mount, as loader workers that each stream their own shard would. The
// table reports how many chunks fetched ahead were pushed out of the
// staging area unread (dsmount stats' staged_pushed_out).
//
// GETs per pass are MinIO's own count (per-bucket in-flight + finished
// GetObject). While a mount pass runs, the daemon's dsmount_fetches_in_flight
// is scraped every --sample-every (its --metrics-addr) to show how many
// backend fetches it actually keeps going; the job's prefetched /
// prefetch_hits / stalls come from `dsmount stats --json` after the pass.
//
// Two settings shape the machine rather than the measurement:
//
//   - --recycle-memory (on by default): before every timed pass
//     --recycle-mib of fresh memory is touched and freed, untimed
//     (testenv.RecycleMemory), so each pass starts with recently used
//     memory: this VM's host takes back guest memory left free, and
//     whichever pass first fills the page cache otherwise pays for it.
//   - --isolate-backend: MinIO and toxiproxy on CPU 0, everything else on
//     the others (testenv.IsolateBackend): a remote store's CPU is not the
//     node's. Off by default; on a 2-core machine it leaves the daemon,
//     the readers and dd one core.
//
// Before the first round, --warm-store untimed passes of the store's own
// parallel GETs warm MinIO and toxiproxy (see warmStore).
//
// Each round runs every pass; --rounds > 1 reports every round and the
// median ratios. Usage: go run ./test/benchorder [flags]; needs root (FUSE)
// and the MinIO and toxiproxy binaries that test/run.sh installs. It exits 0
// when a target is missed (it is a measurement) and non-zero on errors (a
// wrong byte included).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/test/testenv"
)

const bucket = "bench"

type config struct {
	files, fileSize    int
	latency, jitter    int
	readers, getsPar   int
	rounds             int
	skipSmall, skipLrg bool
	skipUndeclared     bool
	chunkSize          string
	prefetchPar        int
	seed               uint64
	largeMiB           int64
	largeLatency       int
	largeConnMBs       float64
	sampleEvery        time.Duration
	profileDir         string
	slowLog            bool
	mountArgs          []string
	daemonEnv          []string
	demand             float64
	cacheSize          string
	isolate            bool
	recycle            bool
	recycleMiB         int64
	warmStore          int
	streams            int
	streamMiB          int64
	tail               bool
	stallPct           float64
	stallDeclaredPct   float64
}

// env is what every pass shares: the servers, the binary, the source data.
type env struct {
	cfg  config
	t    *testenv.ProgramT
	work string
	bin  string
	mc   *testenv.MinIO
	tp   *testenv.Toxiproxy
	// cpuNote says how the CPUs are shared (--isolate-backend).
	cpuNote string

	// small files
	smallSrc      string
	paths         []string
	sizes         map[string]int64
	crcs          map[string]uint32
	smallEndpoint string
	smallClient   *s3.Client

	// large file
	largeSrc      string
	largeRel      string
	largeSize     int64
	largeCRC      uint32
	largeEndpoint string
	largeClient   *s3.Client

	// streams passes (--streams)
	streamFiles []streamFile
}

func main() {
	var c config
	flag.IntVar(&c.files, "files", 10000, "number of small files")
	flag.IntVar(&c.fileSize, "file-size", 110_000, "size of each small file in bytes")
	flag.IntVar(&c.latency, "latency", 20, "ms the proxy adds to every answer (small files)")
	flag.IntVar(&c.jitter, "jitter", 5, "± ms of jitter on --latency")
	flag.IntVar(&c.readers, "readers", 8, "parallel readers through the mount")
	flag.IntVar(&c.getsPar, "gets", 64, "GETs in flight for the ceiling")
	flag.IntVar(&c.rounds, "rounds", 1, "rounds of every pass; >1 reports each and the median ratios")
	flag.BoolVar(&c.skipSmall, "skip-small", false, "skip the small-file passes")
	flag.BoolVar(&c.skipLrg, "skip-large", false, "skip the large-file passes")
	flag.BoolVar(&c.skipUndeclared, "skip-undeclared", false, "skip the small-file passes without a declared order (context only; they take half a round)")
	flag.StringVar(&c.chunkSize, "chunk-size", "4M", "dsmount --chunk-size")
	flag.IntVar(&c.prefetchPar, "prefetch-parallel", 0, "dsmount --prefetch-parallel (0: the daemon's default)")
	flag.Uint64Var(&c.seed, "seed", 1, "shuffle seed (round r uses seed+r-1)")
	flag.Int64Var(&c.largeMiB, "large-mib", 256, "size of the large file in MiB")
	flag.IntVar(&c.largeLatency, "large-latency", 20, "ms the large file's proxy adds to every answer (no jitter)")
	flag.Float64Var(&c.largeConnMBs, "large-conn-mbs", 100, "MB/s one connection to the large file's proxy should get (bandwidth toxic if it is faster)")
	flag.IntVar(&c.streams, "streams", 0, "also read this many large files at once, one dd each, through one cold mount (0: skip; needs the large-file passes)")
	flag.Int64Var(&c.streamMiB, "stream-mib", 128, "size of each --streams file in MiB")
	flag.BoolVar(&c.tail, "tail", false, "run the tail passes (tail.go) instead of the small-file passes: each healthy and with a share of the store's connections stalled forever")
	flag.Float64Var(&c.stallPct, "stall-pct", 5, "--tail: percent of connections stalled in the cold and warm passes")
	flag.Float64Var(&c.stallDeclaredPct, "stall-declared-pct", 1, "--tail: percent of connections stalled in the declared pass")
	flag.Float64Var(&c.demand, "demand", 0.6, "stall passes: the readers' aggregate demand as a fraction of the ceiling's files/s")
	flag.StringVar(&c.cacheSize, "cache-size", "20G", "dsmount --cache-size")
	flag.BoolVar(&c.recycle, "recycle-memory", true, "before every timed pass, touch --recycle-mib of fresh memory and free it (untimed), so each pass starts with recently used memory (testenv.RecycleMemory)")
	flag.Int64Var(&c.recycleMiB, "recycle-mib", 3072, "MiB that --recycle-memory touches: a pass's page cache (the dataset, through the mount and in MinIO) with room to spare")
	flag.IntVar(&c.warmStore, "warm-store", 4, "untimed passes of the store's own parallel GETs before the first round (0: none): a freshly started MinIO and toxiproxy spend more CPU per byte")
	flag.BoolVar(&c.isolate, "isolate-backend", false, "pin MinIO and toxiproxy to CPU 0, and this program (GETs, readers, dd) and the daemons to the other CPUs: a remote store's CPU is not the node's")
	flag.DurationVar(&c.sampleEvery, "sample-every", 100*time.Millisecond, "scrape each mount's fetches in flight this often (0: off)")
	flag.Func("mount-arg", "one more argument for every dsmount mount (repeatable), e.g. --mount-arg=--log-level=debug", func(v string) error {
		c.mountArgs = append(c.mountArgs, v)
		return nil
	})
	flag.Func("daemon-env", "one more KEY=VALUE in every mount's daemon environment (repeatable), e.g. --daemon-env=GOMAXPROCS=2", func(v string) error {
		if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
			return fmt.Errorf("want KEY=VALUE, got %q", v)
		}
		c.daemonEnv = append(c.daemonEnv, v)
		return nil
	})
	flag.StringVar(&c.profileDir, "cpuprofile-dir", "", "have each mount's daemon write a CPU profile to DIR/<pass>.pprof")
	flag.BoolVar(&c.slowLog, "slow-log", false, "after each small-file mount pass, list its reads over 10 ms (at most 300): when each started (ms into the readers' epoch), its position in the order, and how long it took")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "benchorder takes no arguments, got %q\n", flag.Args())
		os.Exit(2)
	}
	if c.tail && (c.skipSmall || c.stallPct <= 0 || c.stallPct > 100 || c.stallDeclaredPct <= 0 || c.stallDeclaredPct > 100) {
		fmt.Fprintln(os.Stderr, "--tail needs the small files (no --skip-small), and --stall-pct and --stall-declared-pct in (0, 100]")
		os.Exit(2)
	}
	if c.tail {
		c.skipLrg = true
	}
	if c.skipSmall && c.skipLrg {
		fmt.Fprintln(os.Stderr, "--skip-small and --skip-large: nothing to measure")
		os.Exit(2)
	}
	if c.streams < 0 || c.streamMiB < 1 || (c.streams > 0 && c.skipLrg) {
		fmt.Fprintln(os.Stderr, "--streams must be 0 or more, --stream-mib positive, and --streams needs the large-file passes (no --skip-large)")
		os.Exit(2)
	}
	if c.warmStore < 0 {
		fmt.Fprintln(os.Stderr, "--warm-store must be 0 or more")
		os.Exit(2)
	}
	if c.rounds < 1 || c.readers < 1 || c.getsPar < 1 || c.files < 1 || c.fileSize < 1 || c.largeMiB < 1 {
		fmt.Fprintln(os.Stderr, "--rounds, --readers, --gets, --files, --file-size and --large-mib must be positive")
		os.Exit(2)
	}

	if c.profileDir != "" {
		var err error
		if c.profileDir, err = filepath.Abs(c.profileDir); err == nil {
			err = os.MkdirAll(c.profileDir, 0o755)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "--cpuprofile-dir: %v\n", err)
			os.Exit(2)
		}
	}

	t := testenv.NewProgramT("dsmount-benchorder")
	defer t.Close()
	e := &env{cfg: c, t: t, work: t.TempDir()}
	setup(e)
	warmStore(e)

	if c.tail {
		var tails [][]tailPair
		for r := 1; r <= c.rounds; r++ {
			e.recycleMemory()
			ceil := ceiling(e, shuffled(e.paths, c.seed+uint64(r)-1))
			work := time.Duration(float64(c.readers) / (c.demand * ceil.filesPerSec()) * float64(time.Second))
			logf("round %d: ceiling %.0f files/s, work %v per sample", r, ceil.filesPerSec(), work)
			tails = append(tails, runTailRound(e, r, work))
		}
		reportTail(e, tails)
		fmt.Printf("\nreproduce: %s\n", reproduce(e.cfg))
		return
	}

	var rounds []roundResult
	for r := 1; r <= c.rounds; r++ {
		rr := roundResult{round: r}
		if !c.skipSmall {
			rr.small = runSmallRound(e, r)
		}
		if !c.skipLrg {
			rr.large = runLargeRound(e, r)
		}
		if c.streams > 0 {
			rr.streams = runStreamsRound(e, r)
		}
		rounds = append(rounds, rr)
	}
	report(e, rounds)
}

// setup generates and uploads the data, starts the proxies and builds
// dsmount.
func setup(e *env) {
	c, t := e.cfg, e.t
	e.mc = testenv.StartMinIO(t)
	e.mc.CreateBucket(bucket)
	e.tp = testenv.StartToxiproxy(t)
	e.cpuNote = "all processes share all CPUs"
	if c.isolate {
		var err error
		if e.cpuNote, err = testenv.IsolateBackend(e.mc.Pid(), e.tp.Pid()); err != nil {
			t.Fatalf("--isolate-backend: %v", err)
		}
		logf("%s", e.cpuNote)
	}
	user, pass := e.mc.Creds()

	if !c.skipSmall {
		e.smallSrc = filepath.Join(e.work, "src-small")
		os.MkdirAll(e.smallSrc, 0o755)
		spec := testenv.DatasetSpec{Seed: 9, SmallFiles: c.files, SmallMin: c.fileSize, SmallMax: c.fileSize, FilesPerDir: 500, MaxDepth: 2}
		t0 := time.Now()
		e.paths = testenv.GenerateDataset(t, e.smallSrc, spec)
		var err error
		if e.sizes, e.crcs, err = testenv.Checksums(e.smallSrc, e.paths, 1); err != nil {
			t.Fatalf("checksums: %v", err)
		}
		logf("small dataset: %d files of %d B (%.2f GB), generated and checksummed in %v",
			len(e.paths), c.fileSize, float64(len(e.paths))*float64(c.fileSize)/1e9, since(t0))
		t0 = time.Now()
		if err := e.mc.UploadDirErr(context.Background(), bucket, "ds", e.smallSrc, 32); err != nil {
			t.Fatalf("upload: %v", err)
		}
		logf("uploaded to MinIO in %v", since(t0))
		proxy := e.tp.AddProxy("small", e.mc.Addr())
		e.tp.AddLatency("small", c.latency, c.jitter)
		e.smallEndpoint = "http://" + proxy
		e.smallClient = testenv.NewS3Client(e.smallEndpoint, user, pass)
		logf("small files: MinIO %s behind toxiproxy %s (+%d ms ± %d on every answer)", e.mc.Addr(), proxy, c.latency, c.jitter)
	}

	if !c.skipLrg {
		e.largeSrc = filepath.Join(e.work, "src-large")
		os.MkdirAll(e.largeSrc, 0o755)
		paths := testenv.GenerateDataset(t, e.largeSrc, testenv.DatasetSpec{Seed: 11, LargeFiles: []int64{c.largeMiB << 20}})
		e.largeRel = paths[0]
		var err error
		if e.largeSize, e.largeCRC, err = testenv.CRCFile(filepath.Join(e.largeSrc, filepath.FromSlash(e.largeRel))); err != nil {
			t.Fatalf("checksum: %v", err)
		}
		t0 := time.Now()
		if err := e.mc.UploadDirErr(context.Background(), bucket, "big", e.largeSrc, 4); err != nil {
			t.Fatalf("upload: %v", err)
		}
		logf("large file: %s, %d MiB, uploaded in %v", e.largeRel, c.largeMiB, since(t0))
		proxy := e.tp.AddProxy("large", e.mc.Addr())
		e.tp.AddLatency("large", c.largeLatency, 0)
		e.largeEndpoint = "http://" + proxy
		e.largeClient = testenv.NewS3Client(e.largeEndpoint, user, pass)
		shapeLargeLink(e, proxy)
		if c.streams > 0 {
			setupStreams(e)
		}
	}

	var err error
	if e.bin, err = testenv.BuildDsmount(filepath.Join(e.work, "bin")); err != nil {
		t.Fatalf("build: %v", err)
	}
}

// warmStore runs --warm-store untimed passes of the store's own parallel
// GETs before the first round. MinIO and toxiproxy seconds after their
// start still grow their heaps and fault in fresh memory. Serving the
// large file with 16 ranged GETs in flight, their first pass cost them
// a median 4.5 s of CPU per GB (24 runs), the fourth 3.3 s and the
// measured rounds after those 2.2 s (93 rounds); without warm-up the
// rounds' own parallel rate went 200, 280, then 400 MB/s. A remote store is a long-running service: every
// round, references included, then meets a warm one.
func warmStore(e *env) {
	c := e.cfg
	for i := 1; i <= c.warmStore; i++ {
		if !c.skipSmall {
			r := ceiling(e, shuffled(e.paths, c.seed+uint64(1000+i)))
			logf("store warm-up %d/%d (untimed): small files, %d GETs in flight: %.0f files/s, store cpu %.2fs per GB",
				i, c.warmStore, c.getsPar, r.filesPerSec(), r.storeCPU/(float64(r.bytes)/1e9))
		}
		if !c.skipLrg {
			r := parallelRanges(e, 16)
			logf("store warm-up %d/%d (untimed): large file, 16 ranged GETs in flight: %.1f MB/s, store cpu %.2fs per GB",
				i, c.warmStore, r.mbPerSec(), r.storeCPU/(float64(r.bytes)/1e9))
		}
	}
}

// recycleMemory runs testenv.RecycleMemory (--recycle-memory), untimed,
// before a timed pass.
func (e *env) recycleMemory() {
	if !e.cfg.recycle {
		return
	}
	took, err := testenv.RecycleMemory(e.cfg.recycleMiB << 20)
	if err != nil {
		e.t.Fatalf("%v", err)
	}
	logf("touched and freed %d MiB of memory (untimed) in %v", e.cfg.recycleMiB, took.Round(time.Millisecond))
}

// storeCPU is the CPU seconds MinIO and toxiproxy have used so far.
func (e *env) storeCPU() float64 { return testenv.ProcCPU(e.mc.Pid()) + testenv.ProcCPU(e.tp.Pid()) }

// gets is MinIO's GetObject count so far.
func (e *env) gets() int64 { n, _ := e.mc.GetObjectCount(); return n }

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func since(t0 time.Time) time.Duration { return time.Since(t0).Round(time.Millisecond) }

// reproduce is the command line that repeats this run, every flag spelled
// out (so changed defaults don't change what it measures); the lists
// (--mount-arg, --daemon-env) come from c.
func reproduce(c config) string {
	var b strings.Builder
	b.WriteString("go run ./test/benchorder")
	flag.VisitAll(func(f *flag.Flag) {
		switch f.Name {
		case "mount-arg":
			// A list: repeat the flag per value.
			for _, v := range c.mountArgs {
				fmt.Fprintf(&b, " --mount-arg=%s", v)
			}
		case "daemon-env":
			for _, v := range c.daemonEnv {
				fmt.Fprintf(&b, " --daemon-env=%s", v)
			}
		case "cpuprofile-dir":
			if f.Value.String() != "" {
				fmt.Fprintf(&b, " --%s=%s", f.Name, f.Value.String())
			}
		default:
			fmt.Fprintf(&b, " --%s=%s", f.Name, f.Value.String())
		}
	})
	return b.String()
}
