package testenv

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// FuseProc is another FUSE filesystem's daemon (rclone mount, s3fs, ...)
// run in the foreground as a child process, for benchmarks that compare
// dsmount with it.
type FuseProc struct {
	t    T
	name string
	mp   string
	cmd  *exec.Cmd
	out  *capBuffer
	done chan struct{} // closed once cmd has been waited for
}

// StartFuseProc starts bin ARGS (env nil: os.Environ()), a daemon that
// mounts mountpoint and stays in the foreground, and waits until the
// mountpoint shows up in /proc/self/mountinfo. It fails if the process
// exits first or timeout passes, with the process's output. The process
// gets SIGKILL if this one dies; t.Cleanup stops it and detaches the mount.
func StartFuseProc(t T, name, mountpoint string, timeout time.Duration, bin string, args, env []string) (*FuseProc, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = env
	}
	p := &FuseProc{t: t, name: name, mp: mountpoint, cmd: cmd, out: &capBuffer{max: 1 << 20}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if !p.exited() {
			p.signalAndWait(30 * time.Second)
		}
		if err := LazyUnmount(mountpoint); err != nil {
			t.Logf("cleanup of %s: %v", name, err)
		}
	})
	deadline := time.Now().Add(timeout)
	for {
		if ok, _ := IsMounted(mountpoint); ok {
			return p, nil
		}
		if p.exited() {
			return nil, fmt.Errorf("%s exited (%v) before mounting %s; output:\n%s", name, cmd.ProcessState, mountpoint, p.Output())
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s did not mount %s within %v; output:\n%s", name, mountpoint, timeout, p.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Pid is the daemon's process id.
func (p *FuseProc) Pid() int { return p.cmd.Process.Pid }

// Output is what the daemon has written (the last MiB).
func (p *FuseProc) Output() string { return p.out.String() }

func (p *FuseProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signalAndWait sends SIGTERM and waits up to timeout for the process to
// exit, then kills it; it reports whether SIGTERM was enough.
func (p *FuseProc) signalAndWait(timeout time.Duration) bool {
	p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
		return true
	case <-timer.C:
		p.cmd.Process.Kill()
		<-p.done
		return false
	}
}

// Stop unmounts the filesystem the way its user would (fusermount -u),
// which makes a foreground FUSE daemon exit, and waits (30 s) for the
// process to exit; SIGTERM, then SIGKILL and a lazy unmount if it doesn't.
// It fails unless the process is gone and the mountpoint is unmounted,
// without a lazy unmount.
func (p *FuseProc) Stop() error {
	if p.exited() {
		LazyUnmount(p.mp)
		return fmt.Errorf("%s had exited (%v) before Stop; output:\n%s", p.name, p.cmd.ProcessState, p.Output())
	}
	var msgs []string
	wait := 30 * time.Second
	if out, err := exec.Command("fusermount", "-u", p.mp).CombinedOutput(); err != nil {
		msgs = append(msgs, fmt.Sprintf("fusermount -u: %v: %s", err, strings.TrimSpace(string(out))))
		wait = 0 // it won't exit by itself: straight to SIGTERM
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		if wait > 0 {
			msgs = append(msgs, "still running 30 s after fusermount -u")
		}
		if !p.signalAndWait(30 * time.Second) {
			msgs = append(msgs, "killed after ignoring SIGTERM for 30 s")
		}
	}
	if ok, _ := IsMounted(p.mp); ok {
		msgs = append(msgs, "still mounted after the daemon exited")
		LazyUnmount(p.mp)
	}
	if len(msgs) > 0 {
		return fmt.Errorf("stopping %s (pid %d) on %s: %s; output:\n%s", p.name, p.Pid(), p.mp, strings.Join(msgs, "; "), p.Output())
	}
	return nil
}

// Running reports whether the daemon process is still alive.
func (p *FuseProc) Running() bool { return !p.exited() }
