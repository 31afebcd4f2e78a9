package gpu

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// script is the Python side, relative to the checkout.
const script = "python/tests/bench_gpu.py"

// pyEnv is the Python processes' environment: the checkout's python/
// package first on the path, no __pycache__ left in it.
func pyEnv(repo string) []string {
	return append(os.Environ(), "PYTHONPATH="+filepath.Join(repo, "python"), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
}

// runPy runs bench_gpu.py with args to its end and returns its stdout.
func runPy(python, repo string, args ...string) ([]byte, error) {
	cmd := exec.Command(python, append([]string{filepath.Join(repo, script)}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = pyEnv(repo)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("bench_gpu.py %s: %v\nstderr: %s", strings.Join(args, " "), err, lastLines(stderr.String(), 20))
	}
	return bytes.TrimSpace(stdout.Bytes()), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// server is a running `bench_gpu.py serve`: commands go to its stdin, one
// JSON object a line, and each gets one line back on its stdout. Its
// stderr (tracebacks, torch's warnings) goes to this program's.
type server struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan []byte // its stdout's lines; closed when it ends
	done  chan struct{}
	hello string // its first line: device, GPU, versions
}

// startServer starts the serve process and waits (up to 5 minutes: torch's
// import and CUDA's start on a cold machine) for its first line.
func startServer(cfg config, repo string) (*server, error) {
	cmd := exec.Command(cfg.python, filepath.Join(repo, script), "serve", "--device", cfg.device, "--model", cfg.model,
		"--batch", fmt.Sprint(cfg.batch), "--crop", fmt.Sprint(cfg.crop), "--classes", fmt.Sprint(cfg.classes))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = pyEnv(repo)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cfg.python, err)
	}
	s := &server{cmd: cmd, in: in, lines: make(chan []byte, 1), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 256<<20) // --check's orders: a line of every index, twice
		for sc.Scan() {
			s.lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(s.lines)
		cmd.Wait()
		close(s.done)
	}()
	line, err := s.next(5 * time.Minute)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("bench_gpu.py serve: %w", err)
	}
	var hello struct {
		Ready bool `json:"ready"`
	}
	if err := json.Unmarshal(line, &hello); err != nil || !hello.Ready {
		s.close()
		return nil, fmt.Errorf("bench_gpu.py serve: first line %q is not its ready line", line)
	}
	s.hello = string(line)
	return s, nil
}

// next is the server's next line, waiting up to timeout.
func (s *server) next(timeout time.Duration) ([]byte, error) {
	select {
	case line, ok := <-s.lines:
		if !ok {
			return nil, fmt.Errorf("it exited (%v)", s.cmd.ProcessState)
		}
		return line, nil
	case <-time.After(timeout):
		return nil, fmt.Errorf("no answer in %v", timeout)
	}
}

// reply is what the server answers a command.
type reply struct {
	OK        bool    `json:"ok"`
	Error     string  `json:"error"`
	Images    int     `json:"images"`
	Seconds   float64 `json:"seconds"`
	Rate      float64 `json:"images_per_s"`
	WaitShare float64 `json:"wait_share"`
	Batches   int     `json:"batches"`
	Warmup    int     `json:"warmup_batches"`
	Dataset   int     `json:"dataset"`
	Consumed  int     `json:"consumed"`
	Whole     bool    `json:"whole_epoch"`
	OrderOK   bool    `json:"order_ok"`
	Staged    []int   `json:"staged_order"`
	Sampler   []int   `json:"sampler_order"`
}

// call sends cmd and returns the answer. A server that does not answer
// within timeout is killed: the passes after it fail at once.
func (s *server) call(cmd map[string]any, timeout time.Duration) (reply, error) {
	data, err := json.Marshal(cmd)
	if err != nil {
		return reply{}, err
	}
	if _, err := s.in.Write(append(data, '\n')); err != nil {
		return reply{}, fmt.Errorf("bench_gpu.py serve: %w", err)
	}
	line, err := s.next(timeout)
	if err != nil {
		s.cmd.Process.Kill()
		return reply{}, fmt.Errorf("bench_gpu.py serve, %s: %w", data, err)
	}
	var r reply
	if err := json.Unmarshal(line, &r); err != nil {
		return r, fmt.Errorf("bench_gpu.py serve: answer %q: %w", line, err)
	}
	if !r.OK {
		return r, fmt.Errorf("bench_gpu.py serve: %s", r.Error)
	}
	return r, nil
}

// close asks the server to quit and waits for it (killing it after 30 s).
func (s *server) close() {
	s.in.Write([]byte(`{"op": "quit"}` + "\n"))
	s.in.Close()
	go func() { // an answer nobody waits for must not block the reader
		for range s.lines {
		}
	}()
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}
