package order

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/bench/internal/benchenv"
	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/test/testenv"
)

// Summary is the subcommand's line in bench's --help.
const Summary = "readahead: declared orders of small files, one large file; vs the store's GETs"

const bucket = "bench"

type config struct {
	benchenv.Dataset
	benchenv.Proxy
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
	*benchenv.Run
	cfg config
	fs  *flag.FlagSet // the command line, for the report's reproduce line

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
	// linkNote says how the large file's proxy was shaped (shapeLargeLink).
	linkNote string

	// streams passes (--streams)
	streamFiles []streamFile
}

// Main runs the benchmark with the command line args (after "order").
func Main(args []string) error {
	var c config
	fs := cli.NewFlagSet("order", Summary)
	c.Dataset.AddFlags(fs)
	c.Proxy.AddFlags(fs, 5)
	fs.Lookup("latency").Usage += " (small files; the large file's: --large-latency)"
	fs.IntVar(&c.readers, "readers", 8, "parallel readers through the mount")
	fs.IntVar(&c.getsPar, "gets", 64, "GETs in flight for the ceiling")
	fs.IntVar(&c.rounds, "rounds", 1, "rounds of every pass; >1 reports each and the median ratios")
	fs.BoolVar(&c.skipSmall, "skip-small", false, "skip the small-file passes")
	fs.BoolVar(&c.skipLrg, "skip-large", false, "skip the large-file passes")
	fs.BoolVar(&c.skipUndeclared, "skip-undeclared", false, "skip the small-file passes without a declared order (context only; they take half a round)")
	fs.StringVar(&c.chunkSize, "chunk-size", "4M", "dsmount --chunk-size")
	fs.IntVar(&c.prefetchPar, "prefetch-parallel", 0, "dsmount --prefetch-parallel (0: the daemon's default)")
	fs.Uint64Var(&c.seed, "seed", 1, "shuffle seed (round r uses seed+r-1)")
	fs.Int64Var(&c.largeMiB, "large-mib", 256, "size of the large file in MiB")
	fs.IntVar(&c.largeLatency, "large-latency", 20, "ms the large file's proxy adds to every answer (no jitter)")
	fs.Float64Var(&c.largeConnMBs, "large-conn-mbs", 100, "MB/s one connection to the large file's proxy should get (bandwidth toxic if it is faster)")
	fs.IntVar(&c.streams, "streams", 0, "also read this many large files at once, one dd each, through one cold mount (0: skip; needs the large-file passes)")
	fs.Int64Var(&c.streamMiB, "stream-mib", 128, "size of each --streams file in MiB")
	fs.BoolVar(&c.tail, "tail", false, "run the tail passes (tail.go) instead of the small-file passes: each healthy and with a share of the store's connections stalled forever")
	fs.Float64Var(&c.stallPct, "stall-pct", 5, "--tail: percent of connections stalled in the cold and warm passes")
	fs.Float64Var(&c.stallDeclaredPct, "stall-declared-pct", 1, "--tail: percent of connections stalled in the declared pass")
	fs.Float64Var(&c.demand, "demand", 0.6, "stall passes: the readers' aggregate demand as a fraction of the ceiling's files/s")
	fs.StringVar(&c.cacheSize, "cache-size", "20G", "dsmount --cache-size")
	fs.BoolVar(&c.recycle, "recycle-memory", true, "before every timed pass, touch --recycle-mib of fresh memory and free it (untimed), so each pass starts with recently used memory (testenv.RecycleMemory)")
	fs.Int64Var(&c.recycleMiB, "recycle-mib", 3072, "MiB that --recycle-memory touches: a pass's page cache (the dataset, through the mount and in MinIO) with room to spare")
	fs.IntVar(&c.warmStore, "warm-store", 4, "untimed passes of the store's own parallel GETs before the first round (0: none): a freshly started MinIO and toxiproxy spend more CPU per byte")
	benchenv.IsolateFlag(fs, &c.isolate)
	fs.DurationVar(&c.sampleEvery, "sample-every", 100*time.Millisecond, "scrape each mount's fetches in flight this often (0: off)")
	cli.MountArgs(fs, &c.mountArgs, "one more argument for every dsmount mount (repeatable), e.g. --mount-arg=--log-level=debug")
	cli.DaemonEnv(fs, &c.daemonEnv, "one more KEY=VALUE in every mount's daemon environment (repeatable), e.g. --daemon-env=GOMAXPROCS=2")
	fs.StringVar(&c.profileDir, "cpuprofile-dir", "", "have each mount's daemon write a CPU profile to DIR/<pass>.pprof")
	fs.BoolVar(&c.slowLog, "slow-log", false, "after each small-file mount pass, list its reads over 10 ms (at most 300): when each started (ms into the readers' epoch), its position in the order, and how long it took")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("order takes no arguments, got %q", fs.Args())
	}
	if c.tail && (c.skipSmall || c.stallPct <= 0 || c.stallPct > 100 || c.stallDeclaredPct <= 0 || c.stallDeclaredPct > 100) {
		return cli.Usagef("--tail needs the small files (no --skip-small), and --stall-pct and --stall-declared-pct in (0, 100]")
	}
	if c.tail {
		c.skipLrg = true
	}
	if c.skipSmall && c.skipLrg {
		return cli.Usagef("--skip-small and --skip-large: nothing to measure")
	}
	if c.streams < 0 || c.streamMiB < 1 || (c.streams > 0 && c.skipLrg) {
		return cli.Usagef("--streams must be 0 or more, --stream-mib positive, and --streams needs the large-file passes (no --skip-large)")
	}
	if c.warmStore < 0 {
		return cli.Usagef("--warm-store must be 0 or more")
	}
	if c.rounds < 1 || c.readers < 1 || c.getsPar < 1 || c.Files < 1 || c.FileSize < 1 || c.largeMiB < 1 {
		return cli.Usagef("--rounds, --readers, --gets, --files, --file-size and --large-mib must be positive")
	}

	if c.profileDir != "" {
		var err error
		if c.profileDir, err = filepath.Abs(c.profileDir); err == nil {
			err = os.MkdirAll(c.profileDir, 0o755)
		}
		if err != nil {
			return cli.Usagef("--cpuprofile-dir: %v", err)
		}
	}

	t := testenv.NewProgramT("dsmount-benchorder")
	defer t.Close()
	e := &env{Run: benchenv.StartRun(t, bucket, c.isolate), cfg: c, fs: fs}
	setup(e)
	warmStore(e)

	if c.tail {
		var tails [][]tailPair
		for r := 1; r <= c.rounds; r++ {
			e.recycleMemory()
			ceil := ceiling(e, shuffled(e.paths, c.seed+uint64(r)-1))
			work := time.Duration(float64(c.readers) / (c.demand * ceil.FilesPerSec()) * float64(time.Second))
			cli.Logf("round %d: ceiling %.0f files/s, work %v per sample", r, ceil.FilesPerSec(), work)
			tails = append(tails, runTailRound(e, r, work))
		}
		reportTail(e, tails)
		fmt.Printf("\nreproduce: %s\n", e.reproduce())
		return nil
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
	return nil
}

// setup generates and uploads the data, starts the proxies and builds
// dsmount.
func setup(e *env) {
	c, t := e.cfg, e.T
	if c.isolate {
		cli.Logf("%s", e.Store.CPUNote)
	}

	if !c.skipSmall {
		e.smallSrc = filepath.Join(e.Work, "src-small")
		t0 := time.Now()
		e.paths = benchenv.Generate(t, e.smallSrc, c.Spec(9))
		var err error
		if e.sizes, e.crcs, err = testenv.Checksums(e.smallSrc, e.paths, 1); err != nil {
			t.Fatalf("checksums: %v", err)
		}
		cli.Logf("small dataset: %d files of %d B (%.2f GB), generated and checksummed in %v",
			len(e.paths), c.FileSize, float64(len(e.paths))*float64(c.FileSize)/1e9, cli.Since(t0))
		t0 = time.Now()
		e.Store.Upload(t, bucket, "ds", e.smallSrc, 32)
		cli.Logf("uploaded to MinIO in %v", cli.Since(t0))
		proxy := e.Store.AddProxy("small", c.Proxy)
		e.smallEndpoint = "http://" + proxy
		e.smallClient = e.Store.Client(e.smallEndpoint)
		cli.Logf("small files: MinIO %s behind toxiproxy %s (+%d ms ± %d on every answer)", e.Store.MinIO.Addr(), proxy, c.Latency, c.Jitter)
	}

	if !c.skipLrg {
		e.largeSrc = filepath.Join(e.Work, "src-large")
		paths := benchenv.Generate(t, e.largeSrc, testenv.DatasetSpec{Seed: 11, LargeFiles: []int64{c.largeMiB << 20}})
		e.largeRel = paths[0]
		var err error
		if e.largeSize, e.largeCRC, err = testenv.CRCFile(filepath.Join(e.largeSrc, filepath.FromSlash(e.largeRel))); err != nil {
			t.Fatalf("checksum: %v", err)
		}
		t0 := time.Now()
		e.Store.Upload(t, bucket, "big", e.largeSrc, 4)
		cli.Logf("large file: %s, %d MiB, uploaded in %v", e.largeRel, c.largeMiB, cli.Since(t0))
		proxy := e.Store.AddProxy("large", benchenv.Proxy{Latency: c.largeLatency})
		e.largeEndpoint = "http://" + proxy
		e.largeClient = e.Store.Client(e.largeEndpoint)
		shapeLargeLink(e, proxy)
		if c.streams > 0 {
			setupStreams(e)
		}
	}

	e.Build()
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
			cli.Logf("store warm-up %d/%d (untimed): small files, %d GETs in flight: %.0f files/s, store cpu %.2fs per GB",
				i, c.warmStore, c.getsPar, r.FilesPerSec(), r.StoreCPU/(float64(r.Bytes)/1e9))
		}
		if !c.skipLrg {
			r := parallelRanges(e, 16)
			cli.Logf("store warm-up %d/%d (untimed): large file, 16 ranged GETs in flight: %.1f MB/s, store cpu %.2fs per GB",
				i, c.warmStore, r.MBPerSec(), r.StoreCPU/(float64(r.Bytes)/1e9))
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
		e.T.Fatalf("%v", err)
	}
	cli.Logf("touched and freed %d MiB of memory (untimed) in %v", e.cfg.recycleMiB, took.Round(time.Millisecond))
}

// reproduce is the command line that repeats this run, every flag spelled
// out (so changed defaults don't change what it measures); the lists
// (--mount-arg, --daemon-env) come from the config.
func (e *env) reproduce() string {
	c := e.cfg
	var b strings.Builder
	b.WriteString("go run ./bench order")
	e.fs.VisitAll(func(f *flag.Flag) {
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
