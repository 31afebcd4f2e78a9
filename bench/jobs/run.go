package jobs

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dsmount/dsmount/bench/internal/benchenv"
	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/test/testenv"
)

const bucket = "jobs"

// env is what every configuration shares.
type env struct {
	*benchenv.Run
	cfg      config
	endpoint string // the proxy's
	paths    []string
	sizes    []int64 // by index into paths
	total    int64
}

type runConfig struct {
	jobs     int
	fraction float64
	bounded  bool
	policy   string
}

// row is one configuration's result.
type row struct {
	runConfig
	hit    []float64          // per measured epoch
	oracle []float64          // per measured epoch
	rate   [][]float64        // per measured epoch, files/s of each job
	stats  []control.JobStats // the daemon's figures of the jobs after the last epoch
	err    string
}

func setup(t *testenv.ProgramT, c config) *env {
	e := &env{Run: benchenv.StartRun(t, bucket, c.isolate), cfg: c}
	src := filepath.Join(e.Work, "src")
	// Sizes spread around the mean, so that the oracle's sizes matter.
	spec := benchenv.Dataset{Files: c.files, FileSize: c.meanSize}.Spec(7)
	spec.SmallMin, spec.SmallMax = c.meanSize/2, c.meanSize*3/2
	e.paths = benchenv.Generate(t, src, spec)
	e.sizes, e.total = benchenv.Sizes(t, src, e.paths)
	t0 := time.Now()
	e.Store.Upload(t, bucket, "", src, 32)
	e.endpoint = "http://" + e.Store.AddProxy("s3", c.Proxy)
	var err error
	if e.Bin, err = benchenv.Dsmount(e.Work); err != nil {
		t.Fatalf("%v", err)
	}
	cli.Logf("dataset: %d files, %.2f GB, uploaded in %v; MinIO behind toxiproxy (+%d ms ± %d); %s",
		len(e.paths), float64(e.total)/1e9, time.Since(t0).Round(time.Second), c.Latency, c.Jitter, e.Store.CPUNote)
	return e
}

// job is one running reader process.
type job struct {
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	pid  int
}

func (j *job) send(line string) error {
	_, err := fmt.Fprintln(j.in, line)
	return err
}

func (j *job) expect(word string) (string, error) {
	if !j.out.Scan() {
		return "", fmt.Errorf("%s: reader exited (%v)", j.name, j.out.Err())
	}
	line := j.out.Text()
	if !strings.HasPrefix(line, word) {
		return "", fmt.Errorf("%s: %s", j.name, line)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, word)), nil
}

// run measures one configuration.
func (e *env) run(rc runConfig) (r row) {
	r.runConfig = rc
	c := e.cfg
	defer func() {
		if r.err != "" {
			cli.Logf("%s: %s", rc, r.err)
		}
	}()
	dir := filepath.Join(e.Work, fmt.Sprintf("run-%d-%g-%v-%s", rc.jobs, rc.fraction, rc.bounded, rc.policy))
	cacheDir, mp, lists := filepath.Join(dir, "cache"), filepath.Join(dir, "mnt"), filepath.Join(dir, "lists")
	for _, d := range []string{cacheDir, mp, lists} {
		os.MkdirAll(d, 0o700)
	}
	capacity := int64(float64(e.total) * rc.fraction)
	user, pass := e.Store.MinIO.Creds()
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID="+user, "AWS_SECRET_ACCESS_KEY="+pass, "AWS_REGION="+testenv.MinIORegion, "AWS_EC2_METADATA_DISABLED=true")
	env = append(env, c.daemonEnv...)
	args := append([]string{"--cache-dir", cacheDir, "--cache-size", strconv.FormatInt(capacity, 10), "--cache-policy", rc.policy,
		"--s3-endpoint", e.endpoint, "--s3-path-style"}, c.mountArgs...)
	m, err := testenv.TryStartMount(e.T, testenv.MountConfig{Bin: e.Bin, Source: "s3://" + bucket, Mountpoint: mp, Args: args, Env: env})
	if err != nil {
		r.err = err.Error()
		return r
	}
	defer m.Stop()

	var cg *testenv.MemCgroup
	if rc.bounded {
		// On an interrupt (CloseOnSignal) the defers don't run: the
		// cleanups stop the readers (registered later, run first), then
		// remove the cgroup (NewMemCgroup registers that).
		if cg, err = testenv.NewMemCgroup(e.T, fmt.Sprintf("benchjobs-%d", os.Getpid()), c.pageCache); err != nil {
			r.err = err.Error()
			return r
		}
		defer cg.Remove()
	}
	declare := "none"
	if rc.policy == "order" {
		declare = c.declare
	}
	jobs := make([]*job, rc.jobs)
	for i := range jobs {
		j := &job{name: fmt.Sprintf("job%d", i)}
		j.cmd, err = cli.Child("jobs", readerArg, "--mp", mp, "--bin", e.Bin, "--job", j.name, "--workers", strconv.Itoa(c.workers), "--declare", declare)
		if err != nil {
			r.err = err.Error()
			return r
		}
		j.cmd.Stderr = os.Stderr
		if j.in, err = j.cmd.StdinPipe(); err == nil {
			var out io.ReadCloser
			if out, err = j.cmd.StdoutPipe(); err == nil {
				j.out = bufio.NewScanner(out)
				err = j.cmd.Start()
			}
		}
		if err != nil {
			r.err = err.Error()
			return r
		}
		j.pid = j.cmd.Process.Pid
		defer func() { j.send("quit"); j.in.Close(); j.cmd.Wait() }()
		e.T.Cleanup(func() {
			if j.cmd.ProcessState == nil {
				j.cmd.Process.Kill()
			}
		})
		if cg != nil {
			if err := cg.Add(j.pid); err != nil {
				r.err = err.Error()
				return r
			}
		}
		jobs[i] = j
	}

	var reads []read // every read of every epoch, for the oracle
	var lastGETs int64
	var epochStart []int
	for epoch := 0; epoch <= c.epochs; epoch++ {
		for i, j := range jobs {
			list, err := e.writeOrder(lists, j.name, i, epoch)
			next := "-"
			if err == nil && c.next {
				next, err = e.writeOrder(lists, j.name, i, epoch+1)
			}
			if err != nil {
				r.err = err.Error()
				return r
			}
			if err := j.send(fmt.Sprintf("epoch %d %s %s %s.log", epoch, list, next, list)); err == nil {
				_, err = j.expect("ready")
			}
			if err != nil {
				r.err = err.Error()
				return r
			}
		}
		dropPageCache()
		g0 := e.Store.Gets()
		if epoch > 0 {
			// GETs made between epochs (prefetch of the next epoch's
			// first items while the jobs wait for each other) count for
			// the epoch they were made for.
			g0 = lastGETs
		}
		for _, j := range jobs {
			j.send("go")
		}
		rates := make([]float64, len(jobs))
		for i, j := range jobs {
			secs, err := j.expect("done")
			if err != nil {
				r.err = err.Error()
				return r
			}
			s, _ := strconv.ParseFloat(secs, 64)
			rates[i] = float64(len(e.paths)) / s
		}
		g1 := e.Store.Gets()
		lastGETs = g1
		epochStart = append(epochStart, len(reads))
		for i, j := range jobs {
			rs, err := e.readLog(filepath.Join(lists, fmt.Sprintf("%s-%d.txt.log", j.name, epoch)), orderSeed(c.seed, i, epoch))
			if err != nil {
				r.err = err.Error()
				return r
			}
			reads = append(reads, rs...)
		}
		hit := 1 - float64(g1-g0)/float64(len(jobs)*len(e.paths))
		cli.Logf("%s epoch %d: hit rate %.3f (%d GETs), files/s per job %s", rc, epoch, hit, g1-g0, fmtRates(rates))
		if epoch > 0 {
			r.hit = append(r.hit, hit)
			r.rate = append(r.rate, rates)
		}
	}
	r.oracle = oracle(reads, epochStart, e.sizes, capacity)[1:]
	if st, err := testenv.StatsErr(e.Bin, mp); err == nil {
		r.stats = st.Mount.Jobs
	}
	return r
}

// writeOrder writes job i's order of epoch to a file under dir and
// returns its path.
func (e *env) writeOrder(dir, name string, i, epoch int) (string, error) {
	order := testenv.Shuffled(e.paths, orderSeed(e.cfg.seed, i, epoch))
	list := filepath.Join(dir, fmt.Sprintf("%s-%d.txt", name, epoch))
	return list, os.WriteFile(list, []byte(strings.Join(order, "\n")+"\n"), 0o644)
}

func orderSeed(seed uint64, job, epoch int) int64 {
	return int64(seed)*1000 + int64(job)*100 + int64(epoch)
}

// read is one read a job made: which file (index into env.paths), when.
type read struct {
	item  int
	start int64
}

// readLog reads a job's epoch log back; its positions index the order the
// job read, which seed rebuilds.
func (e *env) readLog(path string, seed int64) ([]read, error) {
	index := make(map[string]int, len(e.paths))
	for i, p := range e.paths {
		index[p] = i
	}
	order := testenv.Shuffled(e.paths, seed)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []read
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s: malformed line %q", path, line)
		}
		pos, err1 := strconv.Atoi(f[0])
		ns, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || pos < 0 || pos >= len(order) {
			return nil, fmt.Errorf("%s: malformed line %q", path, line)
		}
		out = append(out, read{item: index[order[pos]], start: ns})
	}
	return out, nil
}

func (rc runConfig) String() string {
	b := "unbounded"
	if rc.bounded {
		b = "bounded"
	}
	return fmt.Sprintf("%d jobs, cache %.2f, page cache %s, %s", rc.jobs, rc.fraction, b, rc.policy)
}

func fmtRates(rates []float64) string {
	lo, hi := rates[0], rates[0]
	for _, r := range rates {
		lo, hi = min(lo, r), max(hi, r)
	}
	return fmt.Sprintf("%.0f-%.0f", lo, hi)
}

// dropPageCache drops the whole page cache (the readers', the cache
// files', the store's), as before each epoch of the setup.
func dropPageCache() {
	exec.Command("sync").Run()
	os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0o200)
}
