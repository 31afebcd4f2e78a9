package testenv

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// logProc is a long-running dsmount process (a mount or a daemon) that logs
// JSON records, its stdout and stderr on one pipe copied line by line into a
// capped buffer.
type logProc struct {
	words procWords
	cmd   *exec.Cmd
	out   *capBuffer       // stdout and stderr, the last 8 MiB
	done  chan struct{}    // closed once the process has been waited for
	state *os.ProcessState // set before done is closed
	ready chan struct{}    // closed at the first record whose msg is words.readyMsg
	ended bool             // Stop, Kill or WaitExit already ran
}

// procWords names a logProc and its ready record in startLogged's and
// waitReady's messages.
type procWords struct {
	name     string // "dsmount", "dsmount daemon"
	readyMsg string // the msg of the JSON record that says the process is ready
	notReady string // what an early exit did not get to do: "mounting"
	out      string // what the output is called: "stderr", "output"
}

// startLogged starts bin ARGS with env (nil: os.Environ()) and SIGKILL as its
// parent-death signal, so it dies with us if the test binary is killed. It
// copies the output into p.out, watching for the ready record, and reaps the
// process in the background. Wait for the ready record with p.waitReady, once
// the caller's cleanup is registered.
func startLogged(t T, words procWords, bin string, args, env []string) (*logProc, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = env
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = pw
	cmd.Stderr = pw
	p := &logProc{words: words, cmd: cmd, out: &capBuffer{max: 8 << 20}, done: make(chan struct{}), ready: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	pw.Close()
	t.Logf("started %s (pid %d): %s", words.name, cmd.Process.Pid, strings.Join(args, " "))

	var readyOnce sync.Once
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		br := bufio.NewReaderSize(pr, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				p.out.Write(line)
				if IsLogMsg(line, words.readyMsg) {
					readyOnce.Do(func() { close(p.ready) })
				}
			}
			if err != nil {
				pr.Close()
				return
			}
		}
	}()
	go func() {
		p.cmd.Wait()
		// A child of the process could still hold the pipe open; don't let
		// that hang Stop/Kill.
		tm := time.NewTimer(2 * time.Second)
		select {
		case <-copied:
		case <-tm.C:
		}
		tm.Stop()
		p.state = p.cmd.ProcessState
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited.
func (p *logProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitReady waits up to timeout for the ready record. It fails if the
// process exits first, or has exited by the time the record is seen, or the
// deadline passes.
func (p *logProc) waitReady(timeout time.Duration) error {
	w := p.words
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.ready:
	case <-p.done:
		select {
		case <-p.ready: // ready, then exited: reported below
		default:
			return fmt.Errorf("%s exited before %s (%v); %s:\n%s", w.name, w.notReady, p.state, w.out, p.out.String())
		}
	case <-timer.C:
		return fmt.Errorf("%s did not log %q within %v; %s so far:\n%s", w.name, w.readyMsg, timeout, w.out, p.out.String())
	}
	if p.exited() {
		return fmt.Errorf("%s logged %q and then exited (%v); %s:\n%s", w.name, w.readyMsg, p.state, w.out, p.out.String())
	}
	return nil
}

// stop sends SIGTERM and wants the process to exit 0 within 60 s (it is
// killed after that). signalled reports whether it got as far as the signal,
// the process then being gone.
func (p *logProc) stop() (signalled bool, err error) {
	w := p.words
	if p.ended {
		return false, fmt.Errorf("%s Stop: already stopped", w.name)
	}
	p.ended = true
	if p.exited() {
		return false, fmt.Errorf("%s had already exited (%v) before Stop; %s:\n%s", w.name, p.state, w.out, p.out.String())
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return false, fmt.Errorf("SIGTERM %s: %w", w.name, err)
	}
	timer := time.NewTimer(60 * time.Second)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.cmd.Process.Kill()
		<-p.done
		return true, fmt.Errorf("%s did not exit within 60s of SIGTERM (killed it); %s:\n%s", w.name, w.out, p.out.String())
	}
	if code := p.state.ExitCode(); code != 0 {
		return true, fmt.Errorf("%s exited with %v after SIGTERM, want exit 0; %s:\n%s", w.name, p.state, w.out, p.out.String())
	}
	return true, nil
}

// kill sends SIGKILL and waits for the process to die.
func (p *logProc) kill() {
	p.ended = true
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// waitExit waits up to timeout for the process to exit on its own and fails
// the test unless it exits 0.
func (p *logProc) waitExit(t T, timeout time.Duration) {
	t.Helper()
	w := p.words
	p.ended = true
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		t.Fatalf("%s still running %v later; %s:\n%s", w.name, timeout, w.out, p.out.String())
	}
	if code := p.state.ExitCode(); code != 0 {
		t.Fatalf("%s exited with %v, want exit 0; %s:\n%s", w.name, p.state, w.out, p.out.String())
	}
}

// terminate is the first half of a cleanup: if the process still runs,
// SIGTERM, and SIGKILL after 30 s.
func (p *logProc) terminate(t T) {
	if p.exited() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(30 * time.Second)
	select {
	case <-p.done:
	case <-timer.C:
		t.Logf("%s pid %d ignored SIGTERM for 30s in cleanup; killing it", p.words.name, p.cmd.Process.Pid)
		p.cmd.Process.Kill()
		<-p.done
	}
	timer.Stop()
}

// logIfFailed is the last step of a cleanup: the output, if the test failed.
func (p *logProc) logIfFailed(t T) {
	if t.Failed() {
		t.Logf("%s (pid %d, %v) %s:\n%s", p.words.name, p.cmd.Process.Pid, p.state, p.words.out, p.out.String())
	}
}

// errorLines lists the records logged at ERROR level and the lines that are
// not JSON log records (a panic, say), at most 20 of them and a count of the
// rest.
func (p *logProc) errorLines() []string {
	var bad []string
	eachProblem(p.out.String(), []string{"ERROR"}, func(line string, isJSON bool) {
		if !isJSON {
			line = "non-JSON " + p.words.out + ": " + line
		}
		bad = append(bad, line)
	})
	if len(bad) > 20 {
		bad = append(bad[:20], fmt.Sprintf("... %d more", len(bad)-20))
	}
	return bad
}

// ProblemLogs are the mount process's stderr lines so far that are WARN or
// ERROR JSON records, or not JSON records at all (a panic, say).
func (m *Mount) ProblemLogs() []string {
	var out []string
	eachProblem(m.Stderr(), []string{"WARN", "ERROR"}, func(line string, _ bool) { out = append(out, line) })
	return out
}

// eachProblem calls fn, in order, with each non-empty line of a process's
// log output that is not a JSON record (isJSON false) or is a record whose
// level is one of levels.
func eachProblem(out string, levels []string, fn func(line string, isJSON bool)) {
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var rec map[string]any
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &rec) != nil {
			fn(line, false)
			continue
		}
		lv, _ := rec["level"].(string)
		for _, want := range levels {
			if strings.EqualFold(lv, want) {
				fn(line, true)
				break
			}
		}
	}
}
