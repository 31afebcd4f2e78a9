package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dsmount/dsmount/cache"
)

// A mount in the background (--daemon, or run by mount.fuse3): this process
// starts itself again as the daemon, detached (a session of its own, stdin
// from /dev/null, stdout and stderr appended to <cache-dir>/dsmount.log),
// and waits for it to say, on a pipe, that the mount serves reads or why
// it failed. So `dsmount mount -d ...; dsmount warm ...` is no race, and a
// failure is this command's exit status and message.

// readyFDEnv names the pipe (an fd number) on which a daemon started in
// the background reports "ready" or "error: REASON". It is set for the
// child only; a user never sets it.
const readyFDEnv = "DSMOUNT_READY_FD"

// logName is the background daemon's log, in its cache dir.
const logName = "dsmount.log"

// readiness tells whoever started this process that the mount serves, or
// why it can't. The zero value tells nobody.
type readiness struct{ w *os.File }

// readinessFromEnv opens the pipe a parent named in readyFDEnv, if any,
// and unsets the variable so that nothing this process starts inherits it.
func readinessFromEnv() readiness {
	v, ok := os.LookupEnv(readyFDEnv)
	if !ok {
		return readiness{}
	}
	os.Unsetenv(readyFDEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return readiness{}
	}
	return readiness{w: os.NewFile(uintptr(fd), "ready")}
}

// child says whether this process is a daemon started in the background
// (and has not reported yet).
func (r *readiness) child() bool { return r.w != nil }

// ready reports success, once, with the pid of the daemon that serves the
// mount: this process, or the one it joined.
func (r *readiness) ready(files, dirs, daemonPid int) {
	if r.w == nil {
		return
	}
	fmt.Fprintf(r.w, "ready %d %d %d\n", files, dirs, daemonPid)
	r.w.Close()
	r.w = nil
}

// failed reports err, once; nothing after a success. A cache dir held
// by another process is reported as such, for the starter to join it.
func (r *readiness) failed(err error) {
	if r.w == nil {
		return
	}
	if errors.Is(err, cache.ErrInUse) {
		fmt.Fprintln(r.w, "busy")
		r.w.Close()
		r.w = nil
		return
	}
	fmt.Fprintf(r.w, "error: %s\n", oneLine(err.Error()))
	r.w.Close()
	r.w = nil
}

// backgroundResult is what the background daemon reported.
type backgroundResult struct {
	files, dirs, pid int
}

// startInBackground starts `dsmount mount SOURCE MOUNTPOINT` with cmd's
// flags as given (less --daemon and -o, already applied) as a detached
// daemon and waits for its report. Cancelling ctx (Ctrl-C) stops it.
func startInBackground(ctx context.Context, cmd *cobra.Command, source, mountpoint, cacheDir string) (backgroundResult, error) {
	args := []string{"mount", source, mountpoint}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name != "daemon" && f.Name != "options" {
			args = append(args, "--"+f.Name+"="+f.Value.String())
		}
	})
	return startDetached(ctx, cmd, args, cacheDir)
}

// startBareDaemon starts `dsmount daemon` for cmd's cache dir, with the
// cache's and daemon's flags cmd was given, detached (in a scope of its
// own under systemd), and waits for its socket to listen. The daemon
// exits with its last mount, or after emptyGrace if no mount comes: it is
// started for a systemd unit's process to join and hold its mount. A
// daemon that finds the cache dir held by another (a second unit starting
// at the same moment) reports errCacheBusy: join that one instead.
func startBareDaemon(ctx context.Context, cmd *cobra.Command, cacheDir string) error {
	cacheFlags := newDaemonCmd().Flags()
	args := []string{"daemon", "--" + exitWithLastMountFlag}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if cacheFlags.Lookup(f.Name) != nil {
			args = append(args, "--"+f.Name+"="+f.Value.String())
		}
	})
	_, err := startDetached(ctx, cmd, args, cacheDir)
	return err
}

// errCacheBusy says a background daemon found its cache dir held by
// another process, which is likely a daemon still starting or ending.
var errCacheBusy = errors.New("held by another dsmount process that does not answer on its socket (starting, or ending)")

// startDetached starts the background daemon (see startInBackground)
// and, where systemd-run could not make its scope, again without one.
func startDetached(ctx context.Context, cmd *cobra.Command, args []string, cacheDir string) (backgroundResult, error) {
	res, err := startDaemonProcess(ctx, cmd, args, cacheDir, os.Getenv)
	var silent silentExit
	if errors.As(err, &silent) && silent.scoped && ctx.Err() == nil {
		// systemd-run could not make the scope (no bus, say): start the
		// daemon where this process is, as without systemd.
		return startDaemonProcess(ctx, cmd, args, cacheDir, func(k string) string {
			if k == noScopeEnv {
				return "1"
			}
			return os.Getenv(k)
		})
	}
	return res, err
}

// silentExit is a background daemon that ended without a word.
type silentExit struct {
	err    error
	scoped bool // it was started through systemd-run
}

func (s silentExit) Error() string { return s.err.Error() }
func (s silentExit) Unwrap() error { return s.err }

// startDaemonProcess starts the background daemon once (see
// startInBackground).
func startDaemonProcess(ctx context.Context, cmd *cobra.Command, args []string, cacheDir string, getenv func(string) string) (backgroundResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return backgroundResult{}, fmt.Errorf("starting the daemon in the background: %w", err)
	}
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return backgroundResult{}, fmt.Errorf("--cache-dir: %w", err)
	}
	logPath := filepath.Join(cacheDir, logName)
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return backgroundResult{}, fmt.Errorf("the daemon's log: %w", err)
	}
	defer logFile.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return backgroundResult{}, err
	}
	defer pr.Close()
	name, argv := daemonCommand(exe, args, cacheDir, exec.LookPath, getenv)
	child := exec.Command(name, argv...)
	child.Stdout, child.Stderr = logFile, logFile
	child.ExtraFiles = []*os.File{pw} // fd 3
	// Its settings are all in args: the environment's DSMOUNT_<FLAG>
	// variables, applied here already, must not apply again there.
	// Nor is it a service's main process: systemd hears from this one.
	child.Env = append(withoutEnv(flagEnv(cmd, os.Environ()), "NOTIFY_SOCKET"), readyFDEnv+"=3")
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		pw.Close()
		return backgroundResult{}, fmt.Errorf("starting the daemon in the background: %w", err)
	}
	pw.Close()
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	stop := context.AfterFunc(ctx, func() { child.Process.Signal(syscall.SIGTERM) })
	defer stop()

	line, rerr := bufio.NewReader(pr).ReadString('\n')
	line = strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(line, "ready "):
		var res backgroundResult
		if _, err := fmt.Sscanf(line, "ready %d %d %d", &res.files, &res.dirs, &res.pid); err != nil {
			return res, fmt.Errorf("the background daemon said %q", line)
		}
		return res, nil
	case line == "busy":
		<-exited
		return backgroundResult{}, fmt.Errorf("%s: %w", cacheDir, errCacheBusy)
	case strings.HasPrefix(line, "error: "):
		<-exited
		return backgroundResult{}, errors.New(strings.TrimPrefix(line, "error: "))
	}
	// It ended without a word: killed, or it crashed.
	werr := <-exited
	if ctx.Err() != nil {
		return backgroundResult{}, ctx.Err()
	}
	if rerr != nil && rerr != io.EOF {
		return backgroundResult{}, rerr
	}
	return backgroundResult{}, silentExit{fmt.Errorf("the background daemon exited (%v) before the mount was ready; see %s", werr, logPath), name != exe}
}

// daemonCommand is the command that starts the background daemon: exe
// ARGS, or, inside a systemd unit (a .mount unit's mount.fuse3, say),
// `systemd-run --scope` of it. The daemon serves every mount of its cache
// dir, so it must not live in the cgroup of the unit that happened to
// start it: stopping that unit would leave it there ("remains running
// after unit stopped") while it serves the others' mounts. A scope of its
// own (dsmount-daemon-<hash of the cache dir>-<pid>.scope) is its home
// instead; systemd-run execs the daemon in it, so the readiness pipe
// passes as it is.
func daemonCommand(exe string, args []string, cacheDir string, lookPath func(string) (string, error), getenv func(string) string) (string, []string) {
	if getenv(noScopeEnv) != "" || (getenv("INVOCATION_ID") == "" && !inUnitCgroup()) {
		return exe, args
	}
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		return exe, args
	}
	run := systemdRun(lookPath)
	if run == "" {
		return exe, args
	}
	h := fnv.New32a()
	h.Write([]byte(cacheDir))
	unit := fmt.Sprintf("dsmount-daemon-%08x-%d", h.Sum32(), os.Getpid())
	return run, append([]string{"--scope", "--quiet", "--collect", "--unit", unit, "--description", "dsmount daemon of " + cacheDir, "--", exe}, args...)
}

// systemdRun finds systemd-run on PATH or, since mount(8) runs its
// helpers with PATH cleared, where Debian and others install it; "" if
// nowhere.
func systemdRun(lookPath func(string) (string, error)) string {
	if p, err := lookPath("systemd-run"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/bin/systemd-run", "/bin/systemd-run"} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// noScopeEnv, set, keeps the daemon in the starter's cgroup (a retry after
// systemd-run failed).
const noScopeEnv = "DSMOUNT_NO_SCOPE"

// inUnitCgroup says whether this process is in a systemd service's or
// mount's cgroup (its unified hierarchy path ends in .service or .mount):
// mount(8) gives its helpers a cleaned environment, without INVOCATION_ID.
func inUnitCgroup() bool {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			return strings.HasSuffix(path, ".service") || strings.HasSuffix(path, ".mount")
		}
	}
	return false
}

// withoutEnv is environ less the variables named.
func withoutEnv(environ []string, names ...string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, name) {
			out = append(out, kv)
		}
	}
	return out
}
