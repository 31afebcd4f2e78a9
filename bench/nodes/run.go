package nodes

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dsmount/dsmount/bench/internal/benchenv"
	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/test/testenv"
)

const (
	bucket = "nodes"
	python = "/usr/bin/python3"
)

// env is what every run shares: the dataset in the store and its list.
type env struct {
	*benchenv.Run
	cfg      config
	endpoint string // the proxy's
	list     string // the dataset's paths, one a line
	files    int
	total    int64
	repo     string
}

// epoch is one epoch's figures of a run.
type epoch struct {
	Epoch   int     `json:"epoch"`
	Seconds float64 `json:"seconds"`
	Samples int     `json:"samples"` // read by all the ranks
	GETs    int64   `json:"gets"`
	HitRate float64 `json:"hit_rate"` // 1 - GETs / Samples
	GETFrac float64 `json:"gets_per_file"`
}

// shares is how many nodes cache each file, as fractions of the files.
type shares struct {
	None     float64 `json:"none"`
	One      float64 `json:"one"`
	Many     float64 `json:"more_than_one"`
	PerNode  []int   `json:"cached_per_node"`
	QueryErr string  `json:"error,omitempty"`
}

// row is one layout and sampler.
type row struct {
	Layout   string  `json:"layout"`
	Locality bool    `json:"locality"`
	Epochs   []epoch `json:"epochs"`
	PageMax  int64   `json:"cgroup_page_cache_max_bytes"` // the ranks' page cache at an epoch's end, at most
	// Shares: after the last epoch, the files cached on no node, on one
	// and on more than one, as fractions of the files (a "cached"
	// request to every node's daemon).
	Shares *shares `json:"shares,omitempty"`
	Err    string  `json:"error,omitempty"`
}

func setup(t *testenv.ProgramT, c config) *env {
	e := &env{Run: benchenv.StartRun(t, bucket, c.isolate), cfg: c}
	var err error
	if e.repo, err = testenv.RepoRoot(); err != nil {
		t.Fatalf("%v", err)
	}
	if err := exec.Command(python, "-c", "import torch, numpy").Run(); err != nil {
		t.Fatalf("%s can't import torch and numpy (Debian's python3-torch): %v", python, err)
	}
	src := filepath.Join(e.Work, "src")
	spec := benchenv.Dataset{Files: c.files, FileSize: c.meanSize}.Spec(7)
	spec.SmallMin, spec.SmallMax = c.meanSize/2, c.meanSize*3/2
	paths := benchenv.Generate(t, src, spec)
	_, e.total = benchenv.Sizes(t, src, paths)
	e.files = len(paths)
	e.list = filepath.Join(e.Work, "files.txt")
	if err := os.WriteFile(e.list, []byte(strings.Join(paths, "\n")+"\n"), 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	t0 := time.Now()
	e.Store.Upload(t, bucket, "", src, 32)
	e.endpoint = "http://" + e.Store.AddProxy("s3", c.Proxy)
	if e.Bin, err = benchenv.Dsmount(e.Work); err != nil {
		t.Fatalf("%v", err)
	}
	cli.Logf("dataset: %d files, %.2f GB, uploaded in %v; MinIO behind toxiproxy (+%d ms ± %d); %s",
		e.files, float64(e.total)/1e9, time.Since(t0).Round(time.Second), c.Latency, c.Jitter, e.Store.CPUNote)
	return e
}

// run measures one layout with one sampler on fresh caches.
func (e *env) run(l layout, locality bool) (r row) {
	c := e.cfg
	r = row{Layout: l.String(), Locality: locality}
	name := fmt.Sprintf("%s, locality %s", l, onOff(locality))
	defer func() {
		if r.Err != "" {
			cli.Logf("%s: %s", name, r.Err)
		}
	}()
	dir := filepath.Join(e.Work, fmt.Sprintf("run-%s-%v", l, locality))
	user, pass := e.Store.MinIO.Creds()
	daemonEnv := append(os.Environ(), "AWS_ACCESS_KEY_ID="+user, "AWS_SECRET_ACCESS_KEY="+pass, "AWS_REGION="+testenv.MinIORegion, "AWS_EC2_METADATA_DISABLED=true")
	share := e.total / int64(l.nodes)
	mounts := make([]string, l.nodes)
	for n := range mounts {
		mp, cacheDir := filepath.Join(dir, fmt.Sprintf("node%d", n), "mnt"), filepath.Join(dir, fmt.Sprintf("node%d", n), "cache")
		for _, d := range []string{mp, cacheDir} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				r.Err = err.Error()
				return r
			}
		}
		m, err := testenv.TryStartMount(e.T, testenv.MountConfig{Bin: e.Bin, Source: "s3://" + bucket, Mountpoint: mp, Env: daemonEnv,
			Args: []string{"--cache-dir", cacheDir, "--cache-size", strconv.FormatInt(share, 10), "--cache-policy", "order",
				"--s3-endpoint", e.endpoint, "--s3-path-style"}})
		if err != nil {
			r.Err = err.Error()
			return r
		}
		defer m.Stop()
		mounts[n] = mp
	}
	cg, err := testenv.NewMemCgroup(e.T, fmt.Sprintf("benchnodes-%d-%s-%v", os.Getpid(), l, locality), int64(l.ranks())*c.rankMemory+c.pageCache)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer cg.Remove()
	port, err := freePort()
	if err != nil {
		r.Err = err.Error()
		return r
	}
	var rank0 *bufio.Scanner
	var rank0In io.WriteCloser
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			if p.ProcessState == nil {
				p.Process.Kill()
				p.Wait()
			}
		}
	}()
	for rank := range l.ranks() {
		node := rank / l.perNode
		argv := cg.Wrap(python, filepath.Join(e.repo, "python", "tests", "bench_nodes.py"), "--rank", strconv.Itoa(rank), "--world", strconv.Itoa(l.ranks()),
			"--port", strconv.Itoa(port), "--mount", mounts[node], "--node", fmt.Sprintf("node%d", node), "--list", e.list,
			"--batch", strconv.Itoa(c.batch), "--epochs", strconv.Itoa(c.epochs), "--workers", strconv.Itoa(c.workers),
			"--seed", strconv.Itoa(c.seed), "--job", fmt.Sprintf("rank%d", rank))
		if locality {
			argv = append(argv, "--locality")
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(e.repo, "python"), "PYTHONDONTWRITEBYTECODE=1", "OMP_NUM_THREADS=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		cmd.Stderr = os.Stderr
		if rank == 0 {
			out, err := cmd.StdoutPipe()
			if err != nil {
				r.Err = err.Error()
				return r
			}
			rank0 = bufio.NewScanner(out)
			if rank0In, err = cmd.StdinPipe(); err != nil {
				r.Err = err.Error()
				return r
			}
		}
		if err := cmd.Start(); err != nil {
			r.Err = err.Error()
			return r
		}
		procs = append(procs, cmd)
	}
	g0 := e.Store.Gets()
	for ep := 0; ep < c.epochs; ep++ {
		if !rank0.Scan() {
			r.Err = fmt.Sprintf("rank 0 ended before epoch %d was done (%v)", ep, rank0.Err())
			return r
		}
		f := strings.Fields(rank0.Text())
		if len(f) != 4 || f[0] != "done" {
			r.Err = fmt.Sprintf("rank 0 said %q", rank0.Text())
			return r
		}
		secs, _ := strconv.ParseFloat(f[2], 64)
		samples, _ := strconv.Atoi(f[3])
		g1 := e.Store.Gets()
		st := epoch{Epoch: ep + 1, Seconds: secs, Samples: samples, GETs: g1 - g0}
		st.HitRate = 1 - float64(st.GETs)/float64(max(samples, 1))
		st.GETFrac = float64(st.GETs) / float64(e.files)
		g0 = g1
		if s, err := cg.Stats(); err == nil {
			r.PageMax = max(r.PageMax, s.File)
		}
		if err := cg.DropPageCache(); err != nil {
			r.Err = err.Error()
			return r
		}
		r.Epochs = append(r.Epochs, st)
		cli.Logf("%s, epoch %d: hit rate %.3f (%d GETs, %.1f%% of the files), %d samples in %.1f s",
			name, st.Epoch, st.HitRate, st.GETs, 100*st.GETFrac, st.Samples, st.Seconds)
		if _, err := fmt.Fprintln(rank0In, "go"); err != nil {
			r.Err = err.Error()
			return r
		}
	}
	if !rank0.Scan() || rank0.Text() != "finished" {
		r.Err = fmt.Sprintf("rank 0 did not finish: %q (%v)", rank0.Text(), rank0.Err())
		return r
	}
	for i, p := range procs {
		if err := p.Wait(); err != nil {
			r.Err = fmt.Sprintf("rank %d: %v", i, err)
			return r
		}
	}
	if s, err := cg.Stats(); err == nil && s.OOMs > 0 {
		r.Err = fmt.Sprintf("the OOM killer killed %d processes in the ranks' cgroup: raise --rank-memory", s.OOMs)
	}
	r.Shares = e.shares(mounts)
	if sh := r.Shares; sh.QueryErr == "" {
		cli.Logf("%s: after the last epoch, %.1f%% of the files are cached on no node, %.1f%% on one, %.1f%% on more than one (per node: %v)",
			name, 100*sh.None, 100*sh.One, 100*sh.Many, sh.PerNode)
	}
	return r
}

// shares asks every node which files of the dataset it caches and counts
// how many nodes hold each.
func (e *env) shares(mounts []string) *shares {
	data, err := os.ReadFile(e.list)
	if err != nil {
		return &shares{QueryErr: err.Error()}
	}
	var table []byte
	for _, p := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		table = append(append(table, p...), 0)
	}
	holders := make([]int, e.files)
	sh := &shares{}
	for _, mp := range mounts {
		var res *control.CachedResult
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := control.Call(ctx, mp, control.Request{Op: control.OpCached, Table: control.TableName(table), TablePayload: table},
			func(ev control.Event) error {
				res = ev.Cached
				return nil
			})
		cancel()
		if err == nil && (res == nil || res.Files != e.files) {
			err = fmt.Errorf("answered %+v for %d files", res, e.files)
		}
		if err != nil {
			return &shares{QueryErr: fmt.Sprintf("cached request to %s: %v", mp, err)}
		}
		sh.PerNode = append(sh.PerNode, res.Cached)
		for i := range holders {
			if res.Has(i) {
				holders[i]++
			}
		}
	}
	for _, h := range holders {
		switch {
		case h == 0:
			sh.None++
		case h == 1:
			sh.One++
		default:
			sh.Many++
		}
	}
	n := float64(e.files)
	sh.None, sh.One, sh.Many = sh.None/n, sh.One/n, sh.Many/n
	return sh
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// freePort is a TCP port on 127.0.0.1 free a moment ago, for the gloo
// group's rendezvous.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// report prints the table of the rows so far.
func report(c config, e *env, rows []row) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%d files (%.2f GB), batch %d per rank, %d loader workers per rank, each node's cache 1/N of the bytes, store +%d ms ± %d; %s\n",
		e.files, float64(e.total)/1e9, c.batch, c.workers, c.Latency, c.Jitter, e.Store.CPUNote)
	b.WriteString("| layout (nodes x ranks) | locality | epoch | hit rate | GETs / files | seconds |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		if r.Err != "" {
			fmt.Fprintf(&b, "| %s | %s | – | error: %s | | |\n", r.Layout, onOff(r.Locality), r.Err)
			continue
		}
		for _, ep := range r.Epochs {
			fmt.Fprintf(&b, "| %s | %s | %d | %.3f | %.3f | %.1f |\n", r.Layout, onOff(r.Locality), ep.Epoch, ep.HitRate, ep.GETFrac, ep.Seconds)
		}
	}
	b.WriteString("\nAfter the last epoch, the files cached on no node, one, more than one:\n\n| layout | locality | none | one | more than one |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		if sh := r.Shares; sh != nil && sh.QueryErr == "" {
			fmt.Fprintf(&b, "| %s | %s | %.3f | %.3f | %.3f |\n", r.Layout, onOff(r.Locality), sh.None, sh.One, sh.Many)
		}
	}
	b.WriteString("\nTargets (issue 38): from the second epoch on, 4x1 hit rate ≥ 0.90 and GETs ≤ 10% of the files; 4x2 and 8x1 ≥ 0.85.\n")
	fmt.Print(b.String())
}

func printJSON(rows []row) {
	data, err := json.Marshal(rows)
	if err != nil {
		cli.Logf("%v", err)
		return
	}
	fmt.Printf("JSON %s\n", data)
}
