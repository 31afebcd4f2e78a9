package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/backend"
	s3backend "github.com/dsmount/dsmount/backend/s3"
	"github.com/dsmount/dsmount/bench/internal/benchenv"
	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/bench/internal/measure"
	"github.com/dsmount/dsmount/test/testenv"
)

// Summary is the subcommand's line in bench's --help.
const Summary = "what the store (MinIO behind toxiproxy) costs in CPU per GET, by how it is asked"

const bucket = "bench"

type config struct {
	benchenv.Dataset
	benchenv.Proxy
	gets, rounds int
	pace         float64
}

// env is the store and the dataset every pass reads.
type env struct {
	cfg    config
	t      *testenv.ProgramT
	store  *benchenv.Store
	paths  []string
	objs   []backend.Object // paths' objects, in the same order
	sizes  []int64          // paths' sizes, for the SDK loop's ranges
	client *s3.Client       // the SDK loop's
	be     *s3backend.Backend
}

type pass struct {
	name    string
	elapsed time.Duration
	minio   [2]float64 // user, system CPU seconds
	toxi    [2]float64
}

func (p pass) filesPerSec(n int) float64 { return float64(n) / p.elapsed.Seconds() }
func (p pass) store() float64            { return p.minio[0] + p.minio[1] + p.toxi[0] + p.toxi[1] }

// Main runs the benchmark with the command line args (after "store").
func Main(args []string) error {
	var c config
	fs := cli.NewFlagSet("store", Summary)
	c.Dataset.AddFlags(fs)
	fs.IntVar(&c.gets, "gets", 64, "GETs in flight")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds of all passes")
	c.Proxy.AddFlags(fs, 5)
	fs.Float64Var(&c.pace, "pace", 0.6, "the paced pass's rate, as a fraction of raw's rate in the same round")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if c.Files < 1 || c.FileSize < 1 || c.gets < 1 || c.rounds < 1 || c.pace <= 0 || c.pace > 1 {
		return cli.Usagef("--files, --file-size, --gets and --rounds must be positive and --pace in (0, 1]")
	}
	t := testenv.NewProgramT("dsmount-benchstore")
	defer t.Close()
	e := setup(t, c)
	defer e.be.Close()

	var rounds [][]pass
	for r := 1; r <= c.rounds; r++ {
		order := rand.New(rand.NewPCG(uint64(r), 7)).Perm(len(e.paths))
		var ps []pass
		ps = append(ps, e.timed("sdk", func() error { return e.sdkGets(order) }))
		raw := e.timed("raw", func() error { return e.rawGets(order, 0) })
		ps = append(ps, raw)
		rate := c.pace * raw.filesPerSec(len(order))
		ps = append(ps, e.timed(fmt.Sprintf("raw, paced %.1f", c.pace), func() error { return e.rawGets(order, rate) }))
		ps = append(ps, e.timed("raw, busy client", func() error {
			var stop atomic.Bool
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
				}
			}()
			defer wg.Wait()
			defer stop.Store(true)
			return e.rawGets(order, 0)
		}))
		for _, p := range ps {
			cli.Logf("round %d: %-18s %6.0f files/s, store %.2fs", r, p.name, p.filesPerSec(len(order)), p.store())
		}
		rounds = append(rounds, ps)
	}
	report(c, rounds)
	return nil
}

func setup(t *testenv.ProgramT, c config) *env {
	e := &env{cfg: c, t: t}
	e.store = benchenv.StartStore(t, bucket, false)
	src := filepath.Join(t.TempDir(), "src")
	e.paths = benchenv.Generate(t, src, c.Spec(9))
	e.store.Upload(t, bucket, "ds", src, 32)
	proxy := e.store.AddProxy("small", c.Proxy)
	endpoint := "http://" + proxy
	user, pass := e.store.MinIO.Creds()
	e.client = e.store.Client(endpoint)
	e.sizes = make([]int64, len(e.paths))
	for i := range e.sizes {
		e.sizes[i] = int64(c.FileSize)
	}
	// The backend takes its credentials from the standard AWS variables,
	// as the daemon does.
	os.Setenv("AWS_ACCESS_KEY_ID", user)
	os.Setenv("AWS_SECRET_ACCESS_KEY", pass)
	var err error
	e.be, err = s3backend.New(context.Background(), "s3://"+bucket+"/ds", s3backend.Options{Endpoint: endpoint, PathStyle: true, MaxConns: c.gets})
	if err != nil {
		t.Fatalf("S3 backend: %v", err)
	}
	byKey := map[string]backend.Object{}
	if err := e.be.List(context.Background(), func(o backend.Object) error { byKey[o.Key] = o; return nil }); err != nil {
		t.Fatalf("list: %v", err)
	}
	for _, p := range e.paths {
		o, ok := byKey[p]
		if !ok {
			t.Fatalf("%s: not in the listing", p)
		}
		e.objs = append(e.objs, o)
	}
	cli.Logf("%d files of %d B in MinIO %s behind toxiproxy %s (+%d ms ± %d)", c.Files, c.FileSize, e.store.MinIO.Addr(), proxy, c.Latency, c.Jitter)
	return e
}

// timed runs fn and records its time and the store's CPU.
func (e *env) timed(name string, fn func() error) pass {
	m0u, m0s := testenv.ProcCPUSplit(e.store.MinIO.Pid())
	t0u, t0s := testenv.ProcCPUSplit(e.store.Toxiproxy.Pid())
	start := time.Now()
	if err := fn(); err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	p := pass{name: name, elapsed: time.Since(start)}
	m1u, m1s := testenv.ProcCPUSplit(e.store.MinIO.Pid())
	t1u, t1s := testenv.ProcCPUSplit(e.store.Toxiproxy.Pid())
	p.minio = [2]float64{m1u - m0u, m1s - m0s}
	p.toxi = [2]float64{t1u - t0u, t1s - t0s}
	return p
}

// sdkGets reads every object of order whole through the SDK, cfg.gets in
// flight (measure.RawGets, bench order's ceiling).
func (e *env) sdkGets(order []int) error {
	names := make([]string, len(order))
	for i, j := range order {
		names[i] = e.paths[j]
	}
	_, err := measure.RawGets(e.client, bucket, "ds", names, e.sizes, e.cfg.gets)
	return err
}

// rawGets reads every object of order whole through the S3 backend, with
// cfg.gets in flight; with rate > 0 the i-th GET starts no earlier than
// i/rate seconds after the first.
func (e *env) rawGets(order []int, rate float64) error {
	start := time.Now()
	return testenv.Parallel(len(order), e.cfg.gets, func() func(int) error {
		buf := make([]byte, e.cfg.FileSize)
		return func(i int) error {
			if rate > 0 {
				// Pacing, not synchronisation: a loader asking at rate.
				time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
			}
			obj := e.objs[order[i]]
			n, err := e.be.ReadAt(context.Background(), obj, buf[:obj.Size], 0)
			if n != int(obj.Size) {
				return fmt.Errorf("%s: read %d of %d bytes: %v", obj.Key, n, obj.Size, err)
			}
			return nil
		}
	})
}

func report(c config, rounds [][]pass) {
	fmt.Printf("\n%-18s %8s %10s %10s %10s %10s %10s %12s\n", "pass", "files/s", "minio usr", "minio sys", "toxi usr", "toxi sys", "store/10k", "vs sdk")
	ratios := map[string][]float64{}
	var names []string
	for r, ps := range rounds {
		sdk := ps[0].store()
		for _, p := range ps {
			if r == 0 {
				names = append(names, p.name)
			}
			per := float64(10000) / float64(c.Files)
			ratios[p.name] = append(ratios[p.name], p.store()/sdk)
			fmt.Printf("%-18s %8.0f %10.2f %10.2f %10.2f %10.2f %9.2fs %12.2f\n", fmt.Sprintf("%s #%d", p.name, r+1), p.filesPerSec(c.Files),
				p.minio[0]*per, p.minio[1]*per, p.toxi[0]*per, p.toxi[1]*per, p.store()*per, p.store()/sdk)
		}
	}
	fmt.Println("\nstore CPU per GET against sdk's in the same round (median over rounds):")
	for _, n := range names {
		fmt.Printf("  %-18s %.2f  (%s)\n", n, testenv.Median(ratios[n]), measure.List(ratios[n], "%.2f"))
	}
	fmt.Printf("\nstore: MinIO and toxiproxy (CPU columns in seconds per 10,000 GETs); %d files of %d B; %d in flight; all processes share all CPUs\n", c.Files, c.FileSize, c.gets)
	fmt.Printf("reproduce: go run ./bench store --files=%d --file-size=%d --gets=%d --rounds=%d --latency=%d --jitter=%d --pace=%g\n",
		c.Files, c.FileSize, c.gets, c.rounds, c.Latency, c.Jitter, c.pace)
}
