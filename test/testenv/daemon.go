package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DaemonConfig describes one `dsmount daemon` process.
type DaemonConfig struct {
	Bin  string   // the dsmount binary
	Args []string // flags (--cache-dir ...); "--log-format json" is always added
	Env  []string // the whole environment (the daemon's S3 credentials); nil means os.Environ()
	// ReadyTimeout bounds the wait for the "daemon ready" line (default 1 min).
	ReadyTimeout time.Duration
}

// Daemon is a running `dsmount daemon`: a dsmount process that serves a cache
// dir and the mounts `dsmount mount` adds to it.
type Daemon struct {
	t      T
	cfg    DaemonConfig
	cmd    *exec.Cmd
	stderr *capBuffer
	done   chan struct{}
	state  *os.ProcessState
	ended  bool
}

// Pid is the daemon's process id.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Stderr is what the daemon has written so far (last 8 MiB).
func (d *Daemon) Stderr() string { return d.stderr.String() }

// Exited reports whether the daemon has exited.
func (d *Daemon) Exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// ExitState is the process state once the daemon has exited, else nil.
func (d *Daemon) ExitState() *os.ProcessState {
	if d.Exited() {
		return d.state
	}
	return nil
}

// StartDaemon starts `dsmount daemon --log-format json ARGS` and waits until
// it logs "msg":"daemon ready". It fails the test, with the daemon's output,
// if the process exits first or the deadline passes. t.Cleanup stops it
// (SIGTERM, then SIGKILL after 30 s) and logs its output if the test failed.
func StartDaemon(t T, cfg DaemonConfig) *Daemon {
	t.Helper()
	d, err := TryStartDaemon(t, cfg)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return d
}

// TryStartDaemon is StartDaemon returning the failure instead.
func TryStartDaemon(t T, cfg DaemonConfig) (*Daemon, error) {
	t.Helper()
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = time.Minute
	}
	args := append([]string{"daemon", "--log-format", "json"}, cfg.Args...)
	cmd := exec.Command(cfg.Bin, args...)
	if cfg.Env != nil {
		cmd.Env = cfg.Env
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = pw
	cmd.Stderr = pw
	d := &Daemon{t: t, cfg: cfg, cmd: cmd, stderr: &capBuffer{max: 8 << 20}, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("start %s: %w", cfg.Bin, err)
	}
	pw.Close()
	t.Logf("started dsmount daemon (pid %d): %s", cmd.Process.Pid, strings.Join(args, " "))
	ready := make(chan struct{})
	var readyOnce sync.Once
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		br := bufio.NewReaderSize(pr, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				d.stderr.Write(line)
				if IsLogMsg(line, "daemon ready") {
					readyOnce.Do(func() { close(ready) })
				}
			}
			if err != nil {
				pr.Close()
				return
			}
		}
	}()
	go func() {
		d.cmd.Wait()
		tm := time.NewTimer(2 * time.Second)
		select {
		case <-copied:
		case <-tm.C:
		}
		tm.Stop()
		d.state = d.cmd.ProcessState
		close(d.done)
	}()
	t.Cleanup(d.cleanup)

	timer := time.NewTimer(cfg.ReadyTimeout)
	defer timer.Stop()
	select {
	case <-ready:
	case <-d.done:
		select {
		case <-ready:
		default:
			return nil, fmt.Errorf("dsmount daemon exited before logging \"daemon ready\" (%v); output:\n%s", d.state, d.Stderr())
		}
	case <-timer.C:
		return nil, fmt.Errorf("dsmount daemon did not log \"daemon ready\" within %v; output so far:\n%s", cfg.ReadyTimeout, d.Stderr())
	}
	if d.Exited() {
		return nil, fmt.Errorf("dsmount daemon logged \"daemon ready\" and then exited (%v); output:\n%s", d.state, d.Stderr())
	}
	return d, nil
}

// IsLogMsg reports whether line is a JSON log record whose msg is msg.
func IsLogMsg(line []byte, msg string) bool {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return false
	}
	var rec struct {
		Msg string `json:"msg"`
	}
	return json.Unmarshal(line, &rec) == nil && rec.Msg == msg
}

// Stop sends SIGTERM and wants the daemon to exit 0 within 60 s.
func (d *Daemon) Stop() {
	d.t.Helper()
	if err := d.StopErr(); err != nil {
		d.t.Fatalf("%v", err)
	}
}

// StopErr is Stop returning the failure instead.
func (d *Daemon) StopErr() error {
	if d.ended {
		return errors.New("dsmount daemon Stop: already stopped")
	}
	d.ended = true
	if d.Exited() {
		return fmt.Errorf("dsmount daemon had already exited (%v) before Stop; output:\n%s", d.state, d.Stderr())
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM dsmount daemon: %w", err)
	}
	timer := time.NewTimer(60 * time.Second)
	defer timer.Stop()
	select {
	case <-d.done:
	case <-timer.C:
		d.cmd.Process.Kill()
		<-d.done
		return fmt.Errorf("dsmount daemon did not exit within 60s of SIGTERM (killed it); output:\n%s", d.Stderr())
	}
	if code := d.state.ExitCode(); code != 0 {
		return fmt.Errorf("dsmount daemon exited with %v after SIGTERM, want exit 0; output:\n%s", d.state, d.Stderr())
	}
	return nil
}

// Kill sends SIGKILL and waits for the daemon to die.
func (d *Daemon) Kill() {
	d.ended = true
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
}

// WaitExit waits up to timeout for the daemon to exit on its own and fails
// the test unless it exits 0.
func (d *Daemon) WaitExit(timeout time.Duration) {
	d.t.Helper()
	d.ended = true
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-d.done:
	case <-timer.C:
		d.t.Fatalf("dsmount daemon still running %v later; output:\n%s", timeout, d.Stderr())
	}
	if code := d.state.ExitCode(); code != 0 {
		d.t.Fatalf("dsmount daemon exited with %v, want exit 0; output:\n%s", d.state, d.Stderr())
	}
}

// NoErrorLogs fails the test if the daemon logged at ERROR level or wrote
// anything that is not a JSON log record.
func (d *Daemon) NoErrorLogs() {
	d.t.Helper()
	if bad := errorLines(d.Stderr()); len(bad) > 0 {
		d.t.Fatalf("dsmount daemon logged errors:\n%s", strings.Join(bad, "\n"))
	}
}

func errorLines(out string) []string {
	var bad []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var rec map[string]any
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &rec) != nil {
			bad = append(bad, "non-JSON output: "+line)
			continue
		}
		if lv, _ := rec["level"].(string); strings.EqualFold(lv, "ERROR") {
			bad = append(bad, line)
		}
	}
	if len(bad) > 20 {
		bad = append(bad[:20], fmt.Sprintf("... %d more", len(bad)-20))
	}
	return bad
}

func (d *Daemon) cleanup() {
	if !d.Exited() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		timer := time.NewTimer(30 * time.Second)
		select {
		case <-d.done:
		case <-timer.C:
			d.t.Logf("dsmount daemon pid %d ignored SIGTERM for 30s in cleanup; killing it", d.cmd.Process.Pid)
			d.cmd.Process.Kill()
			<-d.done
		}
		timer.Stop()
	}
	if d.t.Failed() {
		d.t.Logf("dsmount daemon (pid %d, %v) output:\n%s", d.cmd.Process.Pid, d.state, d.Stderr())
	}
}

// Joined is the outcome of a `dsmount mount` that joined a running daemon.
type Joined struct {
	Mountpoint string
	DaemonPID  int       // from the "mounted" record
	Result     CLIResult // the command's exit code and output
}

// JoinMount runs `dsmount mount SOURCE MOUNTPOINT --log-format json ARGS`
// against a cache dir a daemon already serves and wants it to exit 0 within
// timeout, having logged "msg":"mounted" with a "daemon_pid", with the
// mountpoint then in /proc/self/mountinfo. It fails the test otherwise.
// t.Cleanup unmounts the mountpoint (dsmount unmount, then a lazy detach) if
// it is still mounted.
func JoinMount(t T, bin string, env []string, source, mountpoint string, timeout time.Duration, args ...string) Joined {
	t.Helper()
	j, err := TryJoinMount(t, bin, env, source, mountpoint, timeout, args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return j
}

// TryJoinMount is JoinMount returning the failure instead.
func TryJoinMount(t T, bin string, env []string, source, mountpoint string, timeout time.Duration, args ...string) (Joined, error) {
	t.Helper()
	t.Cleanup(func() {
		if ok, _ := IsMounted(mountpoint); ok {
			RunCLI(bin, nil, 30*time.Second, "unmount", mountpoint)
			if err := LazyUnmount(mountpoint); err != nil {
				t.Logf("cleanup: %v", err)
			}
		}
	})
	full := append([]string{"mount", source, mountpoint, "--log-format", "json"}, args...)
	r := RunCLI(bin, env, timeout, full...)
	j := Joined{Mountpoint: mountpoint, Result: r}
	if r.ExitCode != 0 {
		return j, fmt.Errorf("dsmount %s: exit %d (timed out: %v) after %v, want exit 0 (joining the running daemon)\nstdout: %s\nstderr: %s",
			strings.Join(full, " "), r.ExitCode, r.TimedOut, r.Duration.Round(time.Millisecond), r.Stdout, r.Stderr)
	}
	found := false
	for _, line := range strings.Split(r.Stderr+"\n"+r.Stdout, "\n") {
		if !IsLogMsg([]byte(line), "mounted") {
			continue
		}
		var rec struct {
			DaemonPID *json.Number `json:"daemon_pid"`
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&rec); err != nil || rec.DaemonPID == nil {
			return j, fmt.Errorf("dsmount mount (join) logged \"mounted\" without a numeric daemon_pid: %s", line)
		}
		pid, err := rec.DaemonPID.Int64()
		if err != nil {
			return j, fmt.Errorf("dsmount mount (join): daemon_pid %v: %v", rec.DaemonPID, err)
		}
		j.DaemonPID = int(pid)
		found = true
	}
	if !found {
		return j, fmt.Errorf("dsmount mount (join) exited 0 without logging \"msg\":\"mounted\"\nstdout: %s\nstderr: %s", r.Stdout, r.Stderr)
	}
	if ok, err := IsMounted(mountpoint); err != nil || !ok {
		return j, fmt.Errorf("dsmount mount (join) exited 0 but %s is not mounted (%v)\nstderr: %s", mountpoint, err, r.Stderr)
	}
	return j, nil
}

// Unmount runs `dsmount unmount MOUNTPOINT` and wants exit 0 with the
// mountpoint gone from /proc/self/mountinfo.
func Unmount(t T, bin, mountpoint string) {
	t.Helper()
	r := RunCLI(bin, nil, time.Minute, "unmount", mountpoint)
	if r.ExitCode != 0 {
		t.Fatalf("dsmount unmount %s: exit %d, stderr %q", mountpoint, r.ExitCode, r.Stderr)
	}
	if ok, _ := IsMounted(mountpoint); ok {
		t.Fatalf("dsmount unmount %s exited 0 but it is still mounted", mountpoint)
	}
}

// ScrapeMetrics GETs url (http://ADDR/metrics) and parses the Prometheus
// text. It returns the HTTP status too.
func ScrapeMetrics(url string) (int, []PromSample, error) {
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	samples, err := ParsePrometheus(string(body))
	return resp.StatusCode, samples, err
}

// PromSample is one line of the Prometheus text format.
type PromSample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// ParsePrometheus parses the Prometheus text exposition format (comments and
// blank lines skipped).
func ParsePrometheus(text string) ([]PromSample, error) {
	var out []PromSample
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, err := parsePromLine(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out = append(out, PromSample{Name: name, Labels: labels, Value: value})
	}
	return out, nil
}

// PromFind returns the value of the sample called name whose labels include
// all of want (pairs of key, value), and how many samples matched.
func PromFind(samples []PromSample, name string, want ...string) (float64, int) {
	var v float64
	n := 0
outer:
	for _, s := range samples {
		if s.Name != name {
			continue
		}
		for i := 0; i+1 < len(want); i += 2 {
			if s.Labels[want[i]] != want[i+1] {
				continue outer
			}
		}
		v = s.Value
		n++
	}
	return v, n
}
