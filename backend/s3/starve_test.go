package s3

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/test/testenv"
)

// TestStarvedReader stops the process that reads (SIGSTOP, as a node
// whose CPUs are taken would) for starvation while GETs of its are in
// flight at a store that throttles, and wants its reads to go on as if it
// had merely been paused: every read succeeds, none waits more than the
// starvation and two seconds, and no GET is abandoned as slow, for the
// store answered each within its delay; the first-byte timeout in force
// afterwards still follows the store's answer times.
//
// The reads run in a child process (the test binary again, see TestMain),
// so that stopping them leaves the store, in this process, answering.
func TestStarvedReader(t *testing.T) {
	const (
		starvation = 5 * time.Second
		storeDelay = 30 * time.Millisecond
		rate       = 200 // object GETs a second the store admits
		burst      = 20
		// inFlight is how many GETs must be at the store, answered
		// while the reader is stopped, when it is stopped.
		inFlight = 6
	)
	isolateEnv(t)
	fake := testenv.StartFakeS3(t, starveBucket)
	r := rand.New(rand.NewPCG(45, 2))
	for i := range starveObjects {
		fake.Put(fmt.Sprintf("o/%04d", i), starveData(i, 4<<10+r.IntN(20<<10)))
	}
	slow := startSlowStore(t, fake.Endpoint(), storeDelay)
	store := testenv.StartThrottleProxy(t, slow.url, rate, burst)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), starveChildEnv+"="+store.Endpoint())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("child said %q (%v); want ready", lines.Text(), lines.Err())
	}
	if err := testenv.WaitFor(10*time.Second, 100*time.Microsecond, fmt.Sprintf("%d GETs in flight", inFlight), func() (bool, error) {
		return slow.inFlight.Load() >= inFlight, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	held := slow.inFlight.Load()
	// The starvation is the fault injected, not a wait for something to
	// happen: the store answers meanwhile.
	<-time.After(starvation)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	done := make(chan starveResult, 1)
	go func() {
		var res starveResult
		for lines.Scan() {
			if js, ok := bytes.CutPrefix(lines.Bytes(), []byte("result ")); ok {
				if err := json.Unmarshal(js, &res); err != nil {
					t.Errorf("the child's result: %v", err)
				}
			}
		}
		done <- res
	}()
	var res starveResult
	select {
	case res = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the reads did not finish within a minute of the starvation")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	admitted, refused := store.Counts()
	t.Logf("stopped with %d GETs at the store; %d reads in %v; slowest %+v; %+v; per second admitted %v, refused %v",
		held, res.Reads, res.Elapsed.Round(time.Millisecond), res.Slowest, res.Stats, admitted, refused)

	if res.Reads != starveObjects || len(res.Errors) > 0 {
		t.Errorf("%d of %d reads done; errors: %q", res.Reads, starveObjects, res.Errors)
	}
	if len(res.Slowest) > 0 && res.Slowest[0].Took > starvation+2*time.Second {
		t.Errorf("read of %s waited %v: more than the starvation (%v) and 2s", res.Slowest[0].Key, res.Slowest[0].Took, starvation)
	}
	if st := res.Stats; st.FirstByteTimeouts+st.BodyTimeouts > 0 {
		t.Errorf("%d GETs abandoned for no answer and %d for a stalled body, though the store answered each within %v: the starvation was taken for the store's slowness",
			st.FirstByteTimeouts, st.BodyTimeouts, storeDelay)
	}
	if to := time.Duration(res.Stats.TimeoutMillis * float64(time.Millisecond)); to > time.Second {
		t.Errorf("first-byte timeout %v after the starvation, for a store that answers in %v", to, storeDelay)
	}
	if !slices.ContainsFunc(refused, func(n int64) bool { return n > 0 }) {
		t.Error("the store refused nothing: the test did not throttle")
	}
}

// slowStore passes requests on to a store after holding each object GET
// for delay, and counts the GETs it holds.
type slowStore struct {
	url      string
	inFlight atomic.Int32
}

func startSlowStore(t *testing.T, upstream string, delay time.Duration) *slowStore {
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &slowStore{url: "http://" + ln.Addr().String()}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host // the client signed the Host it sent
	}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && !r.URL.Query().Has("list-type") {
			s.inFlight.Add(1)
			defer s.inFlight.Add(-1)
			select {
			case <-r.Context().Done():
				return
			case <-time.After(delay):
			}
		}
		rp.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

// starveChildEnv asks the test binary, run as a child, to read every
// object of the store at the endpoint it names (see TestMain).
const starveChildEnv = "DSMOUNT_TEST_STARVE_CHILD"

const (
	starveBucket  = "starve"
	starveObjects = 400
	starveReaders = 12
	// starveReadyAfter is how many reads the child makes before it says
	// it may be stopped: by then the answer times are learnt, and the
	// store has begun refusing.
	starveReadyAfter = 150
)

// starveResult is what the child reports once every read is done.
type starveResult struct {
	Reads   int
	Errors  []string
	Slowest []starveRead // slowest first
	Elapsed time.Duration
	Stats   backend.RequestStats
}

type starveRead struct {
	Key   string
	Start time.Duration // since the child's first read
	Took  time.Duration
}

// starveData is object i's bytes, n of them.
func starveData(i, n int) []byte {
	p := make([]byte, n)
	for j := range p {
		p[j] = byte(i*7 + j%251)
	}
	return p
}

// runStarveChild reads every object at endpoint with starveReaders
// readers, half of them reads someone waits for and half reads ahead,
// checking each object's bytes; it prints "ready" after starveReadyAfter
// reads and, once all are done, "result " and a starveResult in JSON.
func runStarveChild(endpoint string) int {
	ctx := context.Background()
	b, err := New(ctx, "s3://"+starveBucket, Options{Endpoint: endpoint, PathStyle: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer b.Close()
	var objs []backend.Object
	if err := b.List(ctx, func(o backend.Object) error { objs = append(objs, o); return nil }); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var (
		next  atomic.Int64
		ready sync.Once
		mu    sync.Mutex
		res   starveResult
		reads []starveRead
		wg    sync.WaitGroup
	)
	start := time.Now()
	for w := range starveReaders {
		rctx := ctx
		if w%2 == 1 {
			rctx = backend.WithUrgency(ctx, func() bool { return false })
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(objs) {
					return
				}
				o := objs[i]
				p := make([]byte, o.Size)
				t0 := time.Now()
				n, err := b.ReadAt(rctx, o, p, 0)
				took := time.Since(t0)
				var idx int
				fmt.Sscanf(o.Key, "o/%d", &idx)
				if err == nil && (n != len(p) || !bytes.Equal(p, starveData(idx, len(p)))) {
					err = fmt.Errorf("%d bytes, not the object's", n)
				}
				mu.Lock()
				reads = append(reads, starveRead{Key: o.Key, Start: t0.Sub(start), Took: took})
				if err != nil {
					res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", o.Key, err))
				}
				if len(reads) == starveReadyAfter {
					ready.Do(func() { fmt.Println("ready") })
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.Reads = len(reads)
	slices.SortFunc(reads, func(a, b starveRead) int { return int(b.Took - a.Took) })
	res.Slowest = reads[:min(3, len(reads))]
	res.Stats = b.RequestStats()
	js, err := json.Marshal(res)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("result %s\n", js)
	return 0
}
