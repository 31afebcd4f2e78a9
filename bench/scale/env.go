package scale

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsmount/dsmount/bench/internal/benchenv"
	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/test/testenv"
)

// env is what the steps share.
type env struct {
	cfg      config
	t        *benchT
	en       *ending
	work     string
	bin      string
	keys     *testenv.GenS3Keys
	server   string // the S3 server's own address, for its counters
	endpoint string // the proxy's URL: what everything measured talks to
	cpuNote  string
	cacheDir string
	mnt      string
	local    string // the local tree of empty files
	m        *testenv.Mount
	rows     []row
	notes    []string
	started  time.Time
	args     []string // the command line, for the report
}

func setup(t *benchT, c config, en *ending) *env {
	e := &env{cfg: c, t: t, en: en, started: time.Now()}
	if c.keep {
		d, err := os.MkdirTemp("", "dsmount-benchscale-keep-")
		if err != nil {
			t.Fatalf("work dir: %v", err)
		}
		e.work = d
		cli.Logf("work dir (kept): %s", d)
	} else {
		e.work = t.TempDir()
	}
	e.cacheDir, e.mnt, e.local = filepath.Join(e.work, "cache"), filepath.Join(e.work, "mnt"), filepath.Join(e.work, "local")
	err := en.guard(func() error {
		for _, d := range []string{e.cacheDir, e.mnt, e.local} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	t0 := time.Now()
	if e.keys, err = testenv.NewGenS3Keys(c.objects, c.dirs); err != nil {
		t.Fatalf("%v", err)
	}
	cli.Logf("key table: %d keys in %v", e.keys.Len(), time.Since(t0).Round(time.Millisecond))
	serverPid := e.startServer()
	tp := testenv.StartToxiproxy(t)
	e.endpoint = "http://" + tp.AddProxy("s3", e.server)
	tp.AddLatency("s3", c.Latency, c.Jitter)
	e.cpuNote = "all processes share all CPUs"
	if c.isolate {
		if _, err := testenv.IsolateBackend(serverPid, tp.Pid()); err != nil {
			t.Fatalf("--isolate-backend: %v", err)
		}
		e.cpuNote = fmt.Sprintf("the S3 server and toxiproxy pinned to CPU 0; this program, the daemon and every command to CPUs 1-%d", runtime.NumCPU()-1)
	}
	t0 = time.Now()
	err = en.guard(func() (err error) {
		e.bin, err = benchenv.Dsmount(e.work)
		return err
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	cli.Logf("dsmount %s, ready in %v", e.bin, time.Since(t0).Round(time.Second))
	cli.Logf("store: %d objects of %d bytes in %d dirs at %s, behind toxiproxy (+%d ms ± %d) at %s; %s",
		c.objects, c.size, c.dirs, e.server, c.Latency, c.Jitter, e.endpoint, e.cpuNote)
	return e
}

// startServer runs this program's serve-s3 in a child process (so it can
// have a CPU of its own) and returns its pid.
func (e *env) startServer() int {
	c := e.cfg
	cmd, err := cli.Child("scale", serveArg, "--objects", strconv.Itoa(c.objects), "--dirs", strconv.Itoa(c.dirs),
		"--size", strconv.FormatInt(c.size, 10), "--bucket", bucket)
	if err != nil {
		e.t.Fatalf("%v", err)
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		e.t.Fatalf("start the S3 server: %v", err)
	}
	e.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		s.Scan()
		line <- s.Text()
	}()
	select {
	case l := <-line:
		addr, ok := strings.CutPrefix(l, "http://")
		if !ok {
			e.t.Fatalf("the S3 server said %q, not its endpoint", l)
		}
		e.server = addr
	case <-time.After(2 * time.Minute):
		e.t.Fatalf("the S3 server did not say its endpoint in 2 minutes")
	}
	return cmd.Process.Pid
}

// counters are the S3 server's request counts (asked directly, not
// through the proxy).
func (e *env) counters() (testenv.GenS3Counters, error) {
	var c testenv.GenS3Counters
	resp, err := http.Get("http://" + e.server + "/_gens3/counters")
	if err != nil {
		return c, fmt.Errorf("S3 server counters: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		return c, fmt.Errorf("S3 server counters: %w", err)
	}
	return c, nil
}

// mountArgs are the flags of every mount of the benchmark.
func (e *env) mountArgs() []string {
	return append([]string{"--cache-dir", e.cacheDir, "--s3-endpoint", e.endpoint, "--s3-path-style"}, e.cfg.mountArgs...)
}

// mount starts the daemon and returns how long it took to be mounted.
func (e *env) mount() (time.Duration, error) {
	t0 := time.Now()
	m, err := testenv.TryStartMount(e.t, testenv.MountConfig{Bin: e.bin, Source: "s3://" + bucket + "/", Mountpoint: e.mnt,
		Args: e.mountArgs(), Env: testenv.GenS3Env(), ReadyTimeout: e.cfg.mountTimeout})
	d := time.Since(t0)
	if err != nil {
		return d, err
	}
	e.m = m
	return d, nil
}

// makeLocalTree creates the local reference: every key as an empty file.
func (e *env) makeLocalTree() (time.Duration, error) {
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, e.keys.Dirs())
	next := make(chan int)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				errs <- e.en.guard(func() error { return e.makeLocalDir(c) })
			}
		}()
	}
	for c := 0; c < e.keys.Dirs(); c++ {
		next <- c
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return time.Since(t0), nil
}

func (e *env) makeLocalDir(c int) error {
	if err := os.MkdirAll(filepath.Join(e.local, e.keys.DirPrefix(c)), 0o755); err != nil {
		return err
	}
	lo, hi := e.keys.DirRange(c)
	for i := lo; i < hi; i++ {
		fd, err := unix.Open(filepath.Join(e.local, e.keys.Key(i)), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return fmt.Errorf("local tree: %w", err)
		}
		unix.Close(fd)
	}
	return nil
}

// machine describes this machine for the report's header.
func machine() string {
	var u unix.Utsname
	kernel := "?"
	if unix.Uname(&u) == nil {
		kernel = unix.ByteSliceToString(u.Release[:])
	}
	model := "?"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	var si unix.Sysinfo_t
	mem := ""
	if unix.Sysinfo(&si) == nil {
		mem = fmt.Sprintf(", %.0f GB memory", float64(si.Totalram)*float64(si.Unit)/1e9)
	}
	return fmt.Sprintf("%d cores (%s)%s, Linux %s", runtime.NumCPU(), model, mem, kernel)
}
