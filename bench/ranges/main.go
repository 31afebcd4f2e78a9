package ranges

import (
	_ "embed"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/bench/internal/benchenv"
	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/internal/units"
	"github.com/dsmount/dsmount/test/testenv"
)

// Summary is the subcommand's line in bench's --help.
const Summary = "samples that are byte ranges of a big token file (nanoGPT's get_batch) vs ranged GETs and the local file"

const (
	bucket  = "bench"
	prefix  = "tokens"
	fileRel = "train.bin"
	python  = "/usr/bin/python3"
)

//go:embed reader.py
var readerPy []byte

type config struct {
	benchenv.Proxy
	fileSize      int64
	readers       int
	seconds       float64
	batch, block  int
	passes        []string // names from allPasses, in its order
	pageCache     int64    // the readers' page cache bound (bytes)
	cacheSize     int64    // the quarter pass's --cache-size (bytes)
	fullCacheSize string   // the full pass's --cache-size ("": the daemon's default)
	chunkSize     string   // dsmount --chunk-size ("": the daemon's default)
	seed          uint64   // the token file's seed
	rngSeed       int64    // reader r draws its windows from rngSeed*1000+r
	warmStore     float64  // seconds of untimed raw GETs before the first pass
	declaredSteps int      // batches each declared reader declares
	parallel      int      // the raw-parallel pass's GETs in flight
	demand        float64  // the paced declared pass's demand, a fraction of the declared pass's rate
	isolate       bool
	lmdb          lmdbConfig // the LMDB passes' database
	json          string
	mountArgs     []string
	daemonEnv     []string
}

// parseFlags parses the command line (after "ranges").
func parseFlags(args []string) (config, *flag.FlagSet, error) {
	var c config
	fs := cli.NewFlagSet("ranges", Summary)
	c.Proxy.AddFlags(fs, 0)
	fileSize := fs.String("file-size", "2G", "size of the token file (uint16 tokens; K, M, G suffixes in powers of 1024), e.g. 256M for a quick run")
	fs.IntVar(&c.readers, "readers", 8, "reader processes (and raw GETs in flight)")
	fs.Float64Var(&c.seconds, "seconds", 30, "seconds each timed pass reads for")
	fs.IntVar(&c.batch, "batch", 12, "windows per batch (per np.memmap), as nanoGPT's batch_size")
	fs.IntVar(&c.block, "block", 1024, "nanoGPT's block_size: each window is block+1 tokens")
	passes := fs.String("passes", passNames(), "comma-separated passes to run, of "+passHelp())
	pageCache := fs.String("page-cache", "", "the readers' page cache bound: a memory cgroup of this much beyond what the readers hold at start (default: a quarter of --file-size)")
	cacheSize := fs.String("cache-size", "", "dsmount --cache-size of the quarter pass (default: a quarter of --file-size)")
	fs.StringVar(&c.fullCacheSize, "full-cache-size", "", "dsmount --cache-size of the full pass (default: the daemon's own, which holds the file)")
	fs.StringVar(&c.chunkSize, "chunk-size", "", "dsmount --chunk-size (default: the daemon's own)")
	fs.Uint64Var(&c.seed, "seed", 46, "the token file's seed")
	fs.Int64Var(&c.rngSeed, "rng-seed", 1, "the readers' window seed: reader r draws from seed*1000+r in every pass, so each pass reads the same windows in the same order")
	fs.IntVar(&c.parallel, "prefetch-parallel", 64, "GETs in flight of the raw-parallel pass: dsmount's --prefetch-parallel default")
	fs.IntVar(&c.declaredSteps, "declared-steps", 1000, "batches each reader of the declared passes declares (it stops there)")
	fs.Float64Var(&c.demand, "demand", 0.6, "the paced declared pass's demand, as a fraction of the declared pass's windows/s in this run (a fixed sleep per window)")
	fs.Float64Var(&c.warmStore, "warm-store", 5, "seconds of untimed raw GETs before the first pass (0: none): a freshly started MinIO and toxiproxy are slower")
	benchenv.IsolateFlag(fs, &c.isolate)
	c.lmdb.addFlags(fs)
	fs.StringVar(&c.json, "json", "", "also write the results as JSON to this file")
	cli.MountArgs(fs, &c.mountArgs, "one more argument for every dsmount mount (repeatable)")
	cli.DaemonEnv(fs, &c.daemonEnv, "one more KEY=VALUE in every mount's daemon environment (repeatable)")
	if err := cli.Parse(fs, args); err != nil {
		return c, fs, err
	}
	if fs.NArg() > 0 {
		return c, fs, cli.Usagef("ranges takes no arguments, got %q", fs.Args())
	}
	var err error
	if c.fileSize, err = units.ParseSize(*fileSize); err != nil {
		return c, fs, cli.Usagef("--file-size: %v", err)
	}
	if c.batch < 1 || c.block < 1 || c.readers < 1 || c.seconds <= 0 || c.declaredSteps < 1 || c.parallel < 1 || c.warmStore < 0 || c.Latency < 0 || c.Jitter < 0 {
		return c, fs, cli.Usagef("--readers, --batch, --block, --seconds, --prefetch-parallel and --declared-steps must be positive; --warm-store, --latency and --jitter not negative")
	}
	if c.demand <= 0 || c.demand > 1 {
		return c, fs, cli.Usagef("--demand: %g is not in (0, 1]", c.demand)
	}
	if c.fileSize%2 != 0 || c.fileSize < 4*int64(window(c)) {
		return c, fs, cli.Usagef("--file-size: %d bytes is odd or under four windows (%d bytes)", c.fileSize, 4*window(c))
	}
	c.pageCache, c.cacheSize = c.fileSize/4, c.fileSize/4
	for _, s := range []struct {
		flag string
		in   *string
		out  *int64
	}{{"page-cache", pageCache, &c.pageCache}, {"cache-size", cacheSize, &c.cacheSize}} {
		if *s.in == "" {
			continue
		}
		if *s.out, err = units.ParseSize(*s.in); err != nil || *s.out < 1 {
			return c, fs, cli.Usagef("--%s: %q is not a positive size", s.flag, *s.in)
		}
	}
	if c.passes, err = parsePasses(*passes); err != nil {
		return c, fs, cli.Usagef("--passes: %v", err)
	}
	if err := c.lmdb.check(); err != nil {
		return c, fs, cli.Usagef("%v", err)
	}
	return c, fs, nil
}

// window is a window's size in bytes: block+1 uint16 tokens.
func window(c config) int { return 2 * (c.block + 1) }

// env is what every pass shares.
type env struct {
	*benchenv.Run
	cfg    config
	fs     *flag.FlagSet
	src    string // the token file on local disk: the local passes' file
	script string // reader.py, written out
	repo   string // the repository: reader.py --declare imports its python/dsmount
	// declaredRate is the declared pass's windows/s, once it ran: the
	// paced pass's demand is a fraction of it.
	declaredRate float64
	// parallelRate is the raw-parallel pass's windows/s, once it ran.
	parallelRate float64
	endpoint     string // the proxy in front of MinIO
	client       *s3.Client
	tokens       uint64   // tokens in the file
	runs         int      // reader runs so far, for their cgroups' names
	db           *lmdbSet // the LMDB, once a pass has built it
	warmed       bool     // the store has had its untimed warm-up
}

// Main runs the benchmark with the command line args (after "ranges").
func Main(args []string) error {
	c, fs, err := parseFlags(args)
	if err != nil {
		return err
	}
	if err := exec.Command(python, "-c", "import numpy").Run(); err != nil {
		return fmt.Errorf("%s can't import numpy (Debian's python3-numpy): %v", python, err)
	}
	t := testenv.NewProgramT("dsmount-benchranges")
	defer t.Close()
	defer t.CloseOnSignal()()
	e := setup(t, c, fs)
	var rows []row
	for _, p := range allPasses {
		if !selected(c.passes, p.name) {
			continue
		}
		cli.Logf("pass %s: %s", p.name, p.help)
		rows = append(rows, p.run(e)...)
	}
	res := results(e, rows)
	printTable(os.Stdout, res)
	if c.json != "" {
		if err := writeJSON(c.json, res); err != nil {
			return err
		}
		cli.Logf("wrote %s", c.json)
	}
	return nil
}

// setup starts the store, writes and uploads the token file (unless only
// LMDB passes run: the first of them builds its database), puts the proxy
// in front of MinIO, finds the dsmount binary and writes reader.py.
func setup(t *testenv.ProgramT, c config, fs *flag.FlagSet) *env {
	e := &env{Run: benchenv.StartRun(t, bucket, c.isolate), cfg: c, fs: fs, tokens: uint64(c.fileSize / 2)}
	if c.isolate {
		cli.Logf("%s", e.Store.CPUNote)
	}
	tokens := tokenPasses(c.passes)
	if tokens {
		dir := filepath.Join(e.Work, "src")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("%v", err)
		}
		e.src = filepath.Join(dir, fileRel)
		t0 := time.Now()
		if err := writeTokens(e.src, c.fileSize, c.seed); err != nil {
			t.Fatalf("writing the token file: %v", err)
		}
		cli.Logf("token file: %s (%d tokens, seed %d), written in %v", units.Bytes(c.fileSize), e.tokens, c.seed, cli.Since(t0))
		t0 = time.Now()
		e.Store.Upload(t, bucket, prefix, dir, 1)
		cli.Logf("uploaded to MinIO in %v", cli.Since(t0))
	}
	proxy := e.Store.AddProxy("ranges", c.Proxy)
	e.endpoint = "http://" + proxy
	e.client = e.Store.Client(e.endpoint)
	cli.Logf("MinIO %s behind toxiproxy %s (+%d ms ± %d on every answer)", e.Store.MinIO.Addr(), proxy, c.Latency, c.Jitter)
	bin, err := benchenv.Dsmount(e.Work)
	if err != nil {
		t.Fatalf("%v", err)
	}
	e.Bin = bin
	if e.repo, err = testenv.RepoRoot(); err != nil {
		t.Fatalf("%v", err)
	}
	e.script = filepath.Join(e.Work, "reader.py")
	if err := os.WriteFile(e.script, readerPy, 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	if c.warmStore > 0 && tokens {
		r := rawGets(e, c.warmStore, 1<<20)
		cli.Logf("store warm-up (untimed): %.0f windows/s of raw ranged GETs for %.0f s", r.Rate, c.warmStore)
		e.warmed = true
	}
	return e
}

// reproduce is the command line that repeats this run, every flag spelled
// out.
func (e *env) reproduce() string {
	var b strings.Builder
	b.WriteString("go run ./bench ranges")
	e.fs.VisitAll(func(f *flag.Flag) {
		switch f.Name {
		case "mount-arg":
			for _, v := range e.cfg.mountArgs {
				fmt.Fprintf(&b, " --mount-arg=%s", v)
			}
		case "daemon-env":
			for _, v := range e.cfg.daemonEnv {
				fmt.Fprintf(&b, " --daemon-env=%s", v)
			}
		case "json", "page-cache", "cache-size", "full-cache-size", "chunk-size":
			if v := f.Value.String(); v != "" {
				fmt.Fprintf(&b, " --%s=%s", f.Name, v)
			}
		default:
			fmt.Fprintf(&b, " --%s=%s", f.Name, f.Value.String())
		}
	})
	return b.String()
}
