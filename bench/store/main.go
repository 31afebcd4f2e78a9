// Command benchstore measures what the benchmarks' local store (MinIO
// behind toxiproxy) costs in CPU per GET, depending on how its client asks,
// with no filesystem involved. On a 2-core machine the store shares the
// cores with dsmount, so every CPU second it spends is one the client
// can't have; this tells the store's share apart from the client's.
//
// Each round runs, over the same --files small files in a shuffled order:
//
//   - sdk: ranged GetObject calls through the AWS SDK, --gets in flight
//     (benchorder's ceiling);
//   - raw: the same GETs through dsmount's S3 backend (its ReadAt, which
//     signs plain HTTP requests and sends If-Match), --gets in flight, flat
//     out;
//   - raw, paced: the same, but started at --pace times raw's rate of the
//     same round, as a loader consuming at that rate would ask (at most
//     --gets in flight);
//   - raw, busy client: raw with one goroutine spinning beside it, a
//     client that keeps one core busy.
//
// For each it reports files/s, and MinIO's and toxiproxy's user and system
// CPU seconds, per 10,000 GETs and against sdk's of the same round. Usage:
// go run ./test/benchstore [flags]; needs the MinIO and toxiproxy binaries
// that test/run.sh installs.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/backend"
	s3backend "github.com/dsmount/dsmount/backend/s3"
	"github.com/dsmount/dsmount/test/testenv"
)

const bucket = "bench"

type config struct {
	files, fileSize, gets, rounds, latency, jitter int
	pace                                           float64
}

// env is the store and the dataset every pass reads.
type env struct {
	cfg    config
	mc     *testenv.MinIO
	tp     *testenv.Toxiproxy
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

func main() {
	var c config
	flag.IntVar(&c.files, "files", 10000, "number of small files")
	flag.IntVar(&c.fileSize, "file-size", 110_000, "size of each file in bytes")
	flag.IntVar(&c.gets, "gets", 64, "GETs in flight")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds of all passes")
	flag.IntVar(&c.latency, "latency", 20, "ms toxiproxy adds to every answer")
	flag.IntVar(&c.jitter, "jitter", 5, "± ms of jitter on that latency")
	flag.Float64Var(&c.pace, "pace", 0.6, "the paced pass's rate, as a fraction of raw's rate in the same round")
	flag.Parse()
	if c.files < 1 || c.fileSize < 1 || c.gets < 1 || c.rounds < 1 || c.pace <= 0 || c.pace > 1 {
		fmt.Fprintln(os.Stderr, "benchstore: --files, --file-size, --gets and --rounds must be positive and --pace in (0, 1]")
		os.Exit(2)
	}
	t := testenv.NewProgramT("dsmount-benchstore")
	defer t.Close()
	e := setup(t, c)
	defer e.be.Close()

	var rounds [][]pass
	for r := 1; r <= c.rounds; r++ {
		order := rand.New(rand.NewPCG(uint64(r), 7)).Perm(len(e.paths))
		var ps []pass
		ps = append(ps, e.measure("sdk", func() error { return e.sdkGets(order) }))
		raw := e.measure("raw", func() error { return e.rawGets(order, 0) })
		ps = append(ps, raw)
		rate := c.pace * raw.filesPerSec(len(order))
		ps = append(ps, e.measure(fmt.Sprintf("raw, paced %.1f", c.pace), func() error { return e.rawGets(order, rate) }))
		ps = append(ps, e.measure("raw, busy client", func() error {
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
			logf("round %d: %-18s %6.0f files/s, store %.2fs", r, p.name, p.filesPerSec(len(order)), p.store())
		}
		rounds = append(rounds, ps)
	}
	report(c, rounds)
}

func setup(t *testenv.ProgramT, c config) *env {
	e := &env{cfg: c}
	e.mc = testenv.StartMinIO(t)
	e.mc.CreateBucket(bucket)
	e.tp = testenv.StartToxiproxy(t)
	src := filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatalf("%v", err)
	}
	e.paths = testenv.GenerateDataset(t, src, testenv.DatasetSpec{Seed: 9, SmallFiles: c.files, SmallMin: c.fileSize, SmallMax: c.fileSize, FilesPerDir: 500, MaxDepth: 2})
	if err := e.mc.UploadDirErr(context.Background(), bucket, "ds", src, 32); err != nil {
		t.Fatalf("upload: %v", err)
	}
	proxy := e.tp.AddProxy("small", e.mc.Addr())
	e.tp.AddLatency("small", c.latency, c.jitter)
	endpoint := "http://" + proxy
	user, pass := e.mc.Creds()
	e.client = testenv.NewS3Client(endpoint, user, pass)
	e.sizes = make([]int64, len(e.paths))
	for i := range e.sizes {
		e.sizes[i] = int64(c.fileSize)
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
	logf("%d files of %d B in MinIO %s behind toxiproxy %s (+%d ms ± %d)", c.files, c.fileSize, e.mc.Addr(), proxy, c.latency, c.jitter)
	return e
}

// measure runs fn and records its time and the store's CPU.
func (e *env) measure(name string, fn func() error) pass {
	m0u, m0s := testenv.ProcCPUSplit(e.mc.Pid())
	t0u, t0s := testenv.ProcCPUSplit(e.tp.Pid())
	start := time.Now()
	if err := fn(); err != nil {
		fmt.Fprintf(os.Stderr, "benchstore: %s: %v\n", name, err)
		os.Exit(1)
	}
	p := pass{name: name, elapsed: time.Since(start)}
	m1u, m1s := testenv.ProcCPUSplit(e.mc.Pid())
	t1u, t1s := testenv.ProcCPUSplit(e.tp.Pid())
	p.minio = [2]float64{m1u - m0u, m1s - m0s}
	p.toxi = [2]float64{t1u - t0u, t1s - t0s}
	return p
}

// sdkGets reads every object of order whole through the SDK, cfg.gets in
// flight (testenv.ParallelGets, benchorder's ceiling).
func (e *env) sdkGets(order []int) error {
	names := make([]string, len(order))
	for i, j := range order {
		names[i] = e.paths[j]
	}
	_, _, err := testenv.ParallelGets(context.Background(), e.client, bucket, "ds", names, e.sizes, e.cfg.gets)
	return err
}

// rawGets reads every object of order whole through the S3 backend, with
// cfg.gets in flight; with rate > 0 the i-th GET starts no earlier than
// i/rate seconds after the first.
func (e *env) rawGets(order []int, rate float64) error {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range e.cfg.gets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, e.cfg.fileSize)
			for {
				i := next.Add(1) - 1
				if i >= int64(len(order)) {
					return
				}
				if rate > 0 {
					time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
				}
				obj := e.objs[order[i]]
				n, err := e.be.ReadAt(context.Background(), obj, buf[:obj.Size], 0)
				if n != int(obj.Size) {
					once.Do(func() { firstErr = fmt.Errorf("%s: read %d of %d bytes: %v", obj.Key, n, obj.Size, err) })
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
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
			per := float64(10000) / float64(c.files)
			ratios[p.name] = append(ratios[p.name], p.store()/sdk)
			fmt.Printf("%-18s %8.0f %10.2f %10.2f %10.2f %10.2f %9.2fs %12.2f\n", fmt.Sprintf("%s #%d", p.name, r+1), p.filesPerSec(c.files),
				p.minio[0]*per, p.minio[1]*per, p.toxi[0]*per, p.toxi[1]*per, p.store()*per, p.store()/sdk)
		}
	}
	fmt.Println("\nstore CPU per GET against sdk's in the same round (median over rounds):")
	for _, n := range names {
		fmt.Printf("  %-18s %.2f  (%s)\n", n, median(ratios[n]), join(ratios[n]))
	}
	fmt.Printf("\nstore: MinIO and toxiproxy (CPU columns in seconds per 10,000 GETs); %d files of %d B; %d in flight; all processes share all CPUs\n", c.files, c.fileSize, c.gets)
	fmt.Printf("reproduce: go run ./test/benchstore --files=%d --file-size=%d --gets=%d --rounds=%d --latency=%d --jitter=%d --pace=%g\n",
		c.files, c.fileSize, c.gets, c.rounds, c.latency, c.jitter, c.pace)
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func join(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, ", ")
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05")+" "+format+"\n", args...)
}
