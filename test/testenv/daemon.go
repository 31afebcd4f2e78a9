package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
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
	t   T
	cfg DaemonConfig
	*logProc
}

// Pid is the daemon's process id.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Stderr is what the daemon has written so far (last 8 MiB).
func (d *Daemon) Stderr() string { return d.out.String() }

// Exited reports whether the daemon has exited.
func (d *Daemon) Exited() bool { return d.exited() }

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
	p, err := startLogged(t, procWords{name: "dsmount daemon", readyMsg: "daemon ready", notReady: `logging "daemon ready"`, out: "output"},
		cfg.Bin, args, cfg.Env)
	if err != nil {
		return nil, err
	}
	d := &Daemon{t: t, cfg: cfg, logProc: p}
	t.Cleanup(d.cleanup)
	if err := p.waitReady(cfg.ReadyTimeout); err != nil {
		return nil, err
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
	_, err := d.stop()
	return err
}

// Kill sends SIGKILL and waits for the daemon to die.
func (d *Daemon) Kill() { d.kill() }

// WaitExit waits up to timeout for the daemon to exit on its own and fails
// the test unless it exits 0.
func (d *Daemon) WaitExit(timeout time.Duration) {
	d.t.Helper()
	d.waitExit(d.t, timeout)
}

// NoErrorLogs fails the test if the daemon logged at ERROR level or wrote
// anything that is not a JSON log record.
func (d *Daemon) NoErrorLogs() {
	d.t.Helper()
	if bad := d.errorLines(); len(bad) > 0 {
		d.t.Fatalf("dsmount daemon logged errors:\n%s", strings.Join(bad, "\n"))
	}
}

func (d *Daemon) cleanup() {
	d.terminate(d.t)
	d.logIfFailed(d.t)
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
