package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// RepoRoot returns the root of the dsmount module (the directory holding
// go.mod).
func RepoRoot() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok {
		root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			return root, nil
		}
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("cannot find the dsmount module root")
	}
	return filepath.Dir(gomod), nil
}

// BuildDsmount runs `go build -o outDir/dsmount ./cmd/dsmount` in the repo
// root and returns the binary's path.
func BuildDsmount(outDir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(outDir, "dsmount")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/dsmount")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/dsmount: %v\n%s", err, out)
	}
	return bin, nil
}

// MountConfig describes one `dsmount mount` process.
type MountConfig struct {
	Bin        string   // the dsmount binary
	Source     string   // s3://bucket/prefix or a local directory
	Mountpoint string   // must exist
	Args       []string // more flags; "--log-format json" is always added
	Env        []string // the whole environment; nil means os.Environ()
	// ReadyTimeout bounds the wait for the "mounted" line (default 2 min).
	ReadyTimeout time.Duration
}

// Mount is a running `dsmount mount` process.
type Mount struct {
	t   T
	cfg MountConfig
	*logProc
}

// Dir is the mountpoint.
func (m *Mount) Dir() string { return m.cfg.Mountpoint }

// Pid is the daemon's process id.
func (m *Mount) Pid() int { return m.cmd.Process.Pid }

// Stderr is what the daemon has written to stderr so far (the last 8 MiB).
func (m *Mount) Stderr() string { return m.out.String() }

// Exited reports whether the daemon has exited.
func (m *Mount) Exited() bool { return m.exited() }

// StartMount starts `dsmount mount SOURCE MOUNTPOINT --log-format json ARGS`
// and waits until it logs "msg":"mounted" and the mountpoint shows up in
// /proc/self/mountinfo. It fails the test, with the daemon's stderr, if the
// process exits first or the deadline passes. t.Cleanup always stops the
// daemon and detaches the mount; when the test failed it logs the stderr.
func StartMount(t T, cfg MountConfig) *Mount {
	t.Helper()
	m, err := TryStartMount(t, cfg)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return m
}

// TryStartMount is StartMount returning the failure instead. Cleanup is
// registered either way.
func TryStartMount(t T, cfg MountConfig) (*Mount, error) {
	t.Helper()
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 2 * time.Minute
	}
	args := append([]string{"mount", cfg.Source, cfg.Mountpoint, "--log-format", "json"}, cfg.Args...)
	// The daemon dies with us if the test binary is killed (startLogged sets
	// Pdeathsig; the FUSE mount then goes stale; a later run uses fresh temp
	// dirs).
	p, err := startLogged(t, procWords{name: "dsmount", readyMsg: "mounted", notReady: "mounting", out: "stderr"},
		cfg.Bin, args, cfg.Env)
	if err != nil {
		return nil, err
	}
	m := &Mount{t: t, cfg: cfg, logProc: p}
	t.Cleanup(m.cleanup)
	if err := p.waitReady(cfg.ReadyTimeout); err != nil {
		return nil, err
	}
	if mounted, err := IsMounted(cfg.Mountpoint); err != nil || !mounted {
		return nil, fmt.Errorf("dsmount logged \"mounted\" but %s is not in /proc/self/mountinfo (err %v); stderr:\n%s",
			cfg.Mountpoint, err, m.Stderr())
	}
	return m, nil
}

// Stop sends SIGTERM, waits (up to 60 s) for the daemon to exit, and fails
// the test unless it exits 0 and the mount is gone.
func (m *Mount) Stop() {
	m.t.Helper()
	if err := m.StopErr(); err != nil {
		m.t.Fatalf("%v", err)
	}
}

// StopErr is Stop returning the failure instead.
func (m *Mount) StopErr() error {
	signalled, err := m.stop()
	if err != nil {
		if signalled {
			LazyUnmount(m.cfg.Mountpoint)
		}
		return err
	}
	if mounted, _ := IsMounted(m.cfg.Mountpoint); mounted {
		LazyUnmount(m.cfg.Mountpoint)
		return fmt.Errorf("dsmount exited 0 after SIGTERM but %s is still mounted; stderr:\n%s", m.cfg.Mountpoint, m.Stderr())
	}
	return nil
}

// Kill sends SIGKILL, waits for the daemon to die, and lazily detaches the
// now-dead FUSE mount so the mountpoint can be reused.
func (m *Mount) Kill() {
	m.t.Helper()
	m.kill()
	if err := LazyUnmount(m.cfg.Mountpoint); err != nil {
		m.t.Fatalf("detaching %s after SIGKILL: %v", m.cfg.Mountpoint, err)
	}
}

// WaitExit waits up to timeout for the daemon to exit on its own (after
// `dsmount unmount`, say) and fails the test unless it exits 0 with the
// mount gone.
func (m *Mount) WaitExit(timeout time.Duration) {
	m.t.Helper()
	m.waitExit(m.t, timeout)
	if mounted, _ := IsMounted(m.cfg.Mountpoint); mounted {
		m.t.Fatalf("dsmount exited 0 but %s is still mounted", m.cfg.Mountpoint)
	}
}

// LogRecords returns the daemon's JSON log records so far whose "level" is
// one of levels (all records if none are given), as decoded maps.
func (m *Mount) LogRecords(levels ...string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(m.Stderr(), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if len(levels) > 0 {
			lv, _ := rec["level"].(string)
			ok := false
			for _, want := range levels {
				if strings.EqualFold(lv, want) {
					ok = true
				}
			}
			if !ok {
				continue
			}
		}
		out = append(out, rec)
	}
	return out
}

// NoErrorLogs fails the test if the daemon logged at ERROR level, or wrote
// anything to stderr that is not a JSON log record (a panic, say).
func (m *Mount) NoErrorLogs() {
	m.t.Helper()
	if bad := m.errorLines(); len(bad) > 0 {
		m.t.Fatalf("dsmount logged errors:\n%s", strings.Join(bad, "\n"))
	}
}

// ExitState is the process state once the daemon has exited, else nil.
func (m *Mount) ExitState() *os.ProcessState {
	if m.Exited() {
		return m.state
	}
	return nil
}

func (m *Mount) cleanup() {
	m.terminate(m.t)
	if err := LazyUnmount(m.cfg.Mountpoint); err != nil {
		m.t.Logf("cleanup: %v", err)
	}
	m.logIfFailed(m.t)
}

// LazyUnmount detaches mountpoint if it is mounted (fusermount3 -u -z, falling
// back to umount2(MNT_DETACH)); it is a no-op if it is not mounted.
func LazyUnmount(mountpoint string) error {
	mounted, err := IsMounted(mountpoint)
	if err != nil || !mounted {
		return err
	}
	var msgs []string
	if out, err := exec.Command("fusermount3", "-u", "-z", mountpoint).CombinedOutput(); err != nil {
		msgs = append(msgs, fmt.Sprintf("fusermount3 -u -z: %v: %s", err, bytes.TrimSpace(out)))
	}
	if mounted, _ := IsMounted(mountpoint); mounted {
		if err := syscall.Unmount(mountpoint, syscall.MNT_DETACH); err != nil {
			msgs = append(msgs, fmt.Sprintf("umount2(MNT_DETACH): %v", err))
		}
	}
	if mounted, _ := IsMounted(mountpoint); mounted {
		return fmt.Errorf("%s is still mounted: %s", mountpoint, strings.Join(msgs, "; "))
	}
	return nil
}

// IsMounted reports whether path is a mount point in this mount namespace.
func IsMounted(path string) (bool, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false, err
	}
	abs = filepath.Clean(abs)
	mps, err := MountPoints()
	if err != nil {
		return false, err
	}
	for _, mp := range mps {
		if mp == abs {
			return true, nil
		}
	}
	return false, nil
}

// MountPoints lists the mount points in /proc/self/mountinfo.
func MountPoints() ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		out = append(out, unescapeMountinfo(f[4]))
	}
	return out, nil
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for space, ...).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// CLIResult is the outcome of one dsmount invocation run to completion.
type CLIResult struct {
	ExitCode int // -1 if killed by a signal or timed out
	Stdout   string
	Stderr   string
	Duration time.Duration
	TimedOut bool
}

// RunCLI runs the dsmount binary with args and env (nil: os.Environ()) and
// waits up to timeout for it to exit; on timeout it kills it (and detaches
// any mount named in args that it left behind is the caller's business).
func RunCLI(bin string, env []string, timeout time.Duration, args ...string) CLIResult {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	if env != nil {
		cmd.Env = env
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	res := CLIResult{Stdout: stdout.String(), Stderr: stderr.String(), Duration: time.Since(start)}
	res.TimedOut = ctx.Err() != nil
	var ee *exec.ExitError
	switch {
	case err == nil:
		res.ExitCode = 0
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
	default:
		res.ExitCode = -1
		res.Stderr += "\n[RunCLI: " + err.Error() + "]"
	}
	return res
}

var _ io.Writer = (*capBuffer)(nil)
