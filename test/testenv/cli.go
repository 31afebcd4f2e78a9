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
	"reflect"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dsmount/dsmount/internal/control"
)

// CLIOptions are the less common settings of a dsmount invocation.
type CLIOptions struct {
	Env   []string // the whole environment; nil means os.Environ()
	Dir   string   // working directory; "" means the test's
	Stdin string   // what the command reads on stdin ("" : empty stdin)
	// As, if set, runs the command as that user (the tests run as root):
	// how a test plays a second user of a shared node.
	As *syscall.Credential
}

// RunCLIWith is RunCLI with a working directory and stdin.
func RunCLIWith(bin string, opts CLIOptions, timeout time.Duration, args ...string) CLIResult {
	p, err := StartCLI(bin, opts, args...)
	if err != nil {
		return CLIResult{ExitCode: -1, Stderr: "[RunCLIWith: " + err.Error() + "]"}
	}
	return p.Wait(timeout)
}

// CLIProc is a dsmount invocation running in the background (a `dsmount
// warm` to interrupt, say).
type CLIProc struct {
	cmd    *exec.Cmd
	stdout *capBuffer
	stderr *capBuffer
	start  time.Time
	done   chan struct{}
	err    error
	once   sync.Once
	res    CLIResult
}

// StartCLI starts bin with args and returns at once.
func StartCLI(bin string, opts CLIOptions, args ...string) (*CLIProc, error) {
	cmd := exec.Command(bin, args...)
	if opts.Env != nil {
		cmd.Env = opts.Env
	}
	cmd.Dir = opts.Dir
	cmd.Stdin = strings.NewReader(opts.Stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: opts.As}
	p := &CLIProc{cmd: cmd, stdout: &capBuffer{max: 16 << 20}, stderr: &capBuffer{max: 16 << 20}, done: make(chan struct{})}
	cmd.Stdout = p.stdout
	cmd.Stderr = p.stderr
	cmd.WaitDelay = 5 * time.Second
	p.start = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Pid is the process id.
func (p *CLIProc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *CLIProc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Exited reports whether the process has exited.
func (p *CLIProc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Done is closed when the process has exited.
func (p *CLIProc) Done() <-chan struct{} { return p.done }

// Stdout and Stderr are the output so far.
func (p *CLIProc) Stdout() string { return p.stdout.String() }
func (p *CLIProc) Stderr() string { return p.stderr.String() }

// Wait waits up to timeout for the process to exit (killing it after that)
// and returns its result. It can be called more than once.
func (p *CLIProc) Wait(timeout time.Duration) CLIResult {
	timedOut := false
	select {
	case <-p.done:
	default:
		timer := time.NewTimer(timeout)
		select {
		case <-p.done:
		case <-timer.C:
			timedOut = true
			p.cmd.Process.Kill()
			<-p.done
		}
		timer.Stop()
	}
	p.once.Do(func() {
		res := CLIResult{Stdout: p.stdout.String(), Stderr: p.stderr.String(), Duration: time.Since(p.start), TimedOut: timedOut}
		var ee *exec.ExitError
		switch {
		case p.err == nil:
			res.ExitCode = 0
		case errors.As(p.err, &ee):
			res.ExitCode = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				res.Stderr += fmt.Sprintf("\n[killed by signal %v]", ws.Signal())
			}
		default:
			res.ExitCode = -1
			res.Stderr += "\n[" + p.err.Error() + "]"
		}
		p.res = res
	})
	return p.res
}

// DecodeJSONObject decodes out (a single JSON object, surrounding white space
// allowed, nothing else) into v, a pointer to a struct, and fails if any of
// the struct's JSON fields is missing from the object, at any depth (structs
// nested in structs and in slices are checked too): a renamed or forgotten
// field would otherwise read as zero.
func DecodeJSONObject(out string, v any) error {
	data := bytes.TrimSpace([]byte(out))
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf("not a JSON object: %v: %q", err, out)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("more than one JSON value in %q", out)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decoding %q: %w", out, err)
	}
	if missing := missingKeys(reflect.TypeOf(v).Elem(), raw, ""); len(missing) > 0 {
		return fmt.Errorf("JSON object lacks %s: %s", strings.Join(missing, ", "), out)
	}
	return nil
}

func missingKeys(t reflect.Type, raw any, path string) []string {
	switch t.Kind() {
	case reflect.Pointer:
		return missingKeys(t.Elem(), raw, path)
	case reflect.Slice:
		arr, ok := raw.([]any)
		if !ok {
			return nil
		}
		var out []string
		for i, e := range arr {
			out = append(out, missingKeys(t.Elem(), e, fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	case reflect.Struct:
		obj, ok := raw.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%q (not an object)", path)}
		}
		var out []string
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				// An embedded struct's fields are the object's own.
				out = append(out, missingKeys(f.Type, raw, path)...)
				continue
			}
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			sub, ok := obj[name]
			p := name
			if path != "" {
				p = path + "." + name
			}
			if !ok {
				out = append(out, fmt.Sprintf("%q", p))
				continue
			}
			out = append(out, missingKeys(f.Type, sub, p)...)
		}
		return out
	}
	return nil
}

// WarmReport is what `dsmount warm --json` prints.
type WarmReport struct {
	Files               int64   `json:"files"`
	Bytes               int64   `json:"bytes"`
	ChunksFetched       int64   `json:"chunks_fetched"`
	ChunksAlreadyCached int64   `json:"chunks_already_cached"`
	ChunksNotCached     int64   `json:"chunks_not_cached"`
	BytesFetched        int64   `json:"bytes_fetched"`
	Seconds             float64 `json:"seconds"`
	CacheFull           bool    `json:"cache_full"`
	Interrupted         bool    `json:"interrupted"`
}

// WarmCheck is what `dsmount warm --check --json` prints.
type WarmCheck struct {
	FilesTotal  int64 `json:"files_total"`
	FilesCached int64 `json:"files_cached"`
	BytesTotal  int64 `json:"bytes_total"`
	BytesCached int64 `json:"bytes_cached"`
}

// Job returns m's job of that name, as `dsmount stats --json` reports it.
func Job(m control.MountStats, name string) (control.JobStats, bool) {
	for _, j := range m.Jobs {
		if j.Name == name {
			return j, true
		}
	}
	return control.JobStats{}, false
}

// MountByPoint returns the entry of s.Mounts for mountpoint.
func MountByPoint(s control.StatsReport, mountpoint string) (control.MountStats, bool) {
	for _, m := range s.Mounts {
		if m.Mountpoint == mountpoint {
			return m, true
		}
	}
	return control.MountStats{}, false
}

// Warm runs `dsmount warm ARGS --json` (args holds the paths and any flags)
// and wants exit 0 and the JSON report. It fails the test otherwise.
func Warm(t T, bin string, timeout time.Duration, args ...string) (WarmReport, CLIResult) {
	t.Helper()
	r := RunCLI(bin, nil, timeout, append(append([]string{"warm"}, args...), "--json")...)
	if r.ExitCode != 0 {
		t.Fatalf("dsmount warm %s: exit %d (timed out: %v) after %v\nstdout: %s\nstderr: %s",
			strings.Join(args, " "), r.ExitCode, r.TimedOut, r.Duration.Round(time.Millisecond), r.Stdout, r.Stderr)
	}
	var rep WarmReport
	if err := DecodeJSONObject(r.Stdout, &rep); err != nil {
		t.Fatalf("dsmount warm %s --json: %v", strings.Join(args, " "), err)
	}
	return rep, r
}

// WarmCheckErr runs `dsmount warm --check --json PATHS...`.
func WarmCheckErr(bin string, timeout time.Duration, paths ...string) (WarmCheck, error) {
	r := RunCLI(bin, nil, timeout, append([]string{"warm", "--check", "--json"}, paths...)...)
	if r.ExitCode != 0 {
		return WarmCheck{}, fmt.Errorf("dsmount warm --check --json %s: exit %d after %v\nstdout: %s\nstderr: %s",
			strings.Join(paths, " "), r.ExitCode, r.Duration.Round(time.Millisecond), r.Stdout, r.Stderr)
	}
	var c WarmCheck
	if err := DecodeJSONObject(r.Stdout, &c); err != nil {
		return c, fmt.Errorf("dsmount warm --check --json %s: %w", strings.Join(paths, " "), err)
	}
	return c, nil
}

// WarmCheckT is WarmCheckErr failing the test on error.
func WarmCheckT(t T, bin string, paths ...string) WarmCheck {
	t.Helper()
	c, err := WarmCheckErr(bin, time.Minute, paths...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return c
}

// StatsErr runs `dsmount stats MOUNTPOINT --json`.
func StatsErr(bin, mountpoint string) (control.StatsReport, error) {
	r := RunCLI(bin, nil, 30*time.Second, "stats", mountpoint, "--json")
	if r.ExitCode != 0 {
		return control.StatsReport{}, fmt.Errorf("dsmount stats %s --json: exit %d\nstdout: %s\nstderr: %s",
			mountpoint, r.ExitCode, r.Stdout, r.Stderr)
	}
	var s control.StatsReport
	if err := DecodeJSONObject(r.Stdout, &s); err != nil {
		return s, fmt.Errorf("dsmount stats %s --json: %w", mountpoint, err)
	}
	return s, nil
}

// Stats is StatsErr failing the test on error.
func Stats(t T, bin, mountpoint string) control.StatsReport {
	t.Helper()
	s, err := StatsErr(bin, mountpoint)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return s
}

// WaitFor polls cond every interval until it returns true (nil error),
// returns an error, or timeout passes; it returns the last error, or a
// timeout error naming what.
func WaitFor(timeout, interval time.Duration, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not true after %v", what, timeout)
		case <-tick.C:
		}
	}
}
