package test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// What a systemd unit and mount(8) need of dsmount, tested without
// systemd (test/systemd/e2e.sh runs the same under a real one): a stop
// that ends while a file is open in the mount, settings from the
// environment that don't recurse, a joining unit that lives as long as
// its mount, `mount -a` twice, the exit status units don't restart on.

// notifyListener plays systemd's notification socket: the path to hand a
// process as $NOTIFY_SOCKET, and next, which waits (up to a minute) for
// the next notification and wants it to start with want.
func notifyListener(t *testing.T) (string, func(want string)) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return sock, func(want string) {
		t.Helper()
		buf := make([]byte, 4096)
		conn.SetReadDeadline(time.Now().Add(time.Minute))
		n, err := conn.Read(buf)
		if err != nil || !strings.HasPrefix(string(buf[:n]), want) {
			t.Fatalf("notification %q, %v; want %q", buf[:n], err, want)
		}
	}
}

// stopBound is how long a stop may take with a file held open: a few
// seconds of grace, far under systemd's 60 s TimeoutStopSec.
const stopBound = 20 * time.Second

// TestStopWhileBusy: SIGTERM to a daemon whose mount has a file open in
// it ends the daemon within seconds (not at systemd's stop timeout), with
// the mount detached and the log saying so; the file's holder then gets
// errors, not a hang; the mountpoint is a plain directory again (not a
// dead mount), and a new mount there serves the right bytes.
func TestStopWhileBusy(t *testing.T) {
	src := t.TempDir()
	paths := writeLocalFiles(t, src, 8)
	mp, cacheDir := t.TempDir(), t.TempDir()
	lazyUnmountAtEnd(t, mp)
	sock, next := notifyListener(t)
	p, err := testenv.StartCLI(dsmountBin, testenv.CLIOptions{Env: append(os.Environ(), "NOTIFY_SOCKET="+sock)}, "mount", src, mp, "--cache-dir", cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	next("READY=1")
	held, err := os.Open(filepath.Join(mp, paths[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	// The service's process holds the mount; the daemon serving it is
	// another process, which exits with its last mount.
	daemonPid := testenv.Stats(t, dsmountBin, mp).DaemonPid
	if daemonPid == p.Pid() {
		t.Fatalf("the service's process %d is the daemon: stopping it would take every mount of the cache dir down", p.Pid())
	}
	start := time.Now()
	p.Signal(syscall.SIGTERM)
	next("STOPPING=1")
	r := p.Wait(stopBound)
	took := time.Since(start)
	if r.TimedOut || r.ExitCode != 0 {
		t.Fatalf("dsmount mount after SIGTERM with a file open: exit %d, timed out %v after %v\n%s", r.ExitCode, r.TimedOut, took.Round(time.Millisecond), r.Stderr)
	}
	t.Logf("stopped in %v with a file held open", took.Round(time.Millisecond))
	waitExit(t, daemonPid, 30*time.Second)
	if daemonLog, _ := os.ReadFile(filepath.Join(cacheDir, "dsmount.log")); !strings.Contains(string(daemonLog), "detached it lazily") {
		t.Errorf("the daemon's log does not say the busy mount was detached:\n%s", daemonLog)
	}
	if _, err := held.Read(make([]byte, 10)); err == nil {
		t.Errorf("a read from the file held open in the detached mount succeeded after the daemon exited")
	}
	held.Close()
	if _, err := os.Stat(mp); err != nil || isFuseMount(mp) {
		t.Fatalf("the mountpoint after the stop: stat %v, still FUSE %v; want a plain directory", err, isFuseMount(mp))
	}
	if r := testenv.RunCLI(dsmountBin, nil, time.Minute, "mount", "-d", src, mp, "--cache-dir", cacheDir); r.ExitCode != 0 {
		t.Fatalf("mounting again after the busy stop: exit %d: %s", r.ExitCode, r.Stderr)
	}
	testenv.CompareTree(t, src, mp, paths, 2, 7)
	pid := testenv.Stats(t, dsmountBin, mp).DaemonPid
	if r := testenv.RunCLI(dsmountBin, nil, time.Minute, "unmount", mp); r.ExitCode != 0 {
		t.Fatalf("unmount: %s", r.Stderr)
	}
	waitExit(t, pid, 30*time.Second)
}

// TestEnvDoesNotRecurse: DSMOUNT_DAEMON=true (every flag may come from
// the environment) backgrounds once: the command returns with the mount
// served, and the daemon neither inherits the flags' variables nor starts
// a process of its own. DSMOUNT_OPTIONS is not read (-o is mount(8)'s)
// and, like a misspelled name, is warned of. Under a Type=notify unit the
// variable is ignored: the service's process stays in the foreground.
func TestEnvDoesNotRecurse(t *testing.T) {
	src := t.TempDir()
	paths := writeLocalFiles(t, src, 6)
	mp, cacheDir := t.TempDir(), t.TempDir()
	lazyUnmountAtEnd(t, mp)
	env := append(os.Environ(), "DSMOUNT_DAEMON=true", "DSMOUNT_CACHE_DIR="+cacheDir, "DSMOUNT_OPTIONS=bogus", "DSMOUNT_CACHESIZE=1G")
	r := testenv.RunCLIWith(dsmountBin, testenv.CLIOptions{Env: env}, time.Minute, "mount", src, mp)
	if r.ExitCode != 0 || r.TimedOut {
		t.Fatalf("DSMOUNT_DAEMON=true dsmount mount: exit %d (timed out %v): %s", r.ExitCode, r.TimedOut, r.Stderr)
	}
	for _, want := range []string{"DSMOUNT_OPTIONS is set but is not a dsmount setting", "DSMOUNT_CACHESIZE is set but is not a dsmount setting; it is ignored (did you mean DSMOUNT_CACHE_SIZE?)"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("no warning %q in:\n%s", want, r.Stderr)
		}
	}
	testenv.CompareTree(t, src, mp, paths, 2, 8)
	pid := testenv.Stats(t, dsmountBin, mp).DaemonPid
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range strings.Split(string(environ), "\x00") {
		if strings.HasPrefix(kv, "DSMOUNT_DAEMON=") || strings.HasPrefix(kv, "DSMOUNT_CACHE_DIR=") {
			t.Errorf("the background daemon inherited %s: its settings come as flags", kv)
		}
	}
	if kids := childrenOf(t, pid); len(kids) > 0 {
		t.Errorf("the background daemon %d started processes %v", pid, kids)
	}
	if r := testenv.RunCLI(dsmountBin, nil, time.Minute, "unmount", mp); r.ExitCode != 0 {
		t.Fatalf("unmount: %s", r.Stderr)
	}
	waitExit(t, pid, 30*time.Second)

	// As a systemd service's main process ($NOTIFY_SOCKET), DSMOUNT_DAEMON
	// is ignored with a warning: the process stays holding its mount,
	// says READY=1 itself (systemd takes it from the main process alone)
	// and stops on SIGTERM; the daemon it started ends with the mount.
	sock, next := notifyListener(t)
	p, err := testenv.StartCLI(dsmountBin, testenv.CLIOptions{Env: append(env, "NOTIFY_SOCKET="+sock)}, "mount", src, mp)
	if err != nil {
		t.Fatal(err)
	}
	next("READY=1")
	pid = testenv.Stats(t, dsmountBin, mp).DaemonPid
	if p.Exited() || pid == p.Pid() {
		t.Fatalf("under $NOTIFY_SOCKET, DSMOUNT_DAEMON=true: the service's process exited (%v) or is the daemon (pid %d): %s", p.Exited(), pid, p.Stderr())
	}
	p.Signal(syscall.SIGTERM)
	next("STOPPING=1")
	if r := p.Wait(stopBound); r.ExitCode != 0 || !strings.Contains(r.Stderr, "--daemon ignored") || !strings.Contains(r.Stderr, "DSMOUNT_DAEMON") {
		t.Fatalf("DSMOUNT_DAEMON=true under $NOTIFY_SOCKET: exit %d, stderr %q; want 0 and a warning naming the variable", r.ExitCode, r.Stderr)
	}
	waitExit(t, pid, 30*time.Second)
}

// childrenOf lists the child processes of pid (every thread's).
func childrenOf(t *testing.T, pid int) []string {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		kids = append(kids, strings.Fields(string(b))...)
	}
	return kids
}

// TestJoinHeldUnderSystemd: under a Type=notify unit ($NOTIFY_SOCKET) a
// `dsmount mount` that joins the cache dir's daemon says READY=1 once its
// mount serves and stays as long as the mount; SIGTERM unmounts its mount
// alone and exits 0; when the daemon stops instead, it mounts again at
// once through a daemon it starts, and stays.
func TestJoinHeldUnderSystemd(t *testing.T) {
	src := t.TempDir()
	paths := writeLocalFiles(t, src, 10)
	mpA, mpB, cacheDir := t.TempDir(), t.TempDir(), t.TempDir()
	lazyUnmountAtEnd(t, mpA)
	lazyUnmountAtEnd(t, mpB)
	if r := testenv.RunCLI(dsmountBin, nil, time.Minute, "mount", "-d", src, mpA, "--cache-dir", cacheDir); r.ExitCode != 0 {
		t.Fatalf("the first mount: exit %d: %s", r.ExitCode, r.Stderr)
	}
	daemonPid := testenv.Stats(t, dsmountBin, mpA).DaemonPid
	sock, next := notifyListener(t)
	join := func() *testenv.CLIProc {
		t.Helper()
		p, err := testenv.StartCLI(dsmountBin, testenv.CLIOptions{Env: append(os.Environ(), "NOTIFY_SOCKET="+sock)}, "mount", src, mpB, "--cache-dir", cacheDir)
		if err != nil {
			t.Fatal(err)
		}
		next("READY=1")
		testenv.CompareTree(t, src, mpB, paths, 2, 9)
		if p.Exited() {
			t.Fatalf("the joining unit's process exited with its mount in place: %s", p.Stderr())
		}
		return p
	}

	p := join()
	p.Signal(syscall.SIGTERM)
	next("STOPPING=1")
	if r := p.Wait(stopBound); r.ExitCode != 0 || r.TimedOut {
		t.Fatalf("the joined process after SIGTERM: exit %d (timed out %v): %s", r.ExitCode, r.TimedOut, r.Stderr)
	}
	if isFuseMount(mpB) {
		t.Fatalf("%s still mounted after its process was stopped", mpB)
	}
	testenv.CompareTree(t, src, mpA, paths, 2, 10)

	p = join()
	syscall.Kill(daemonPid, syscall.SIGTERM)
	waitExit(t, daemonPid, 30*time.Second)
	next("STATUS=") // the daemon serving it ended; mounting again
	next("READY=1")
	if p.Exited() {
		t.Fatalf("the joined process exited when its daemon stopped: %s", p.Stderr())
	}
	testenv.CompareTree(t, src, mpB, paths, 2, 11)
	newPid := testenv.Stats(t, dsmountBin, mpB).DaemonPid
	if newPid == daemonPid || newPid == p.Pid() || isFuseMount(mpA) {
		t.Fatalf("after the daemon stopped: %s served by pid %d (the old daemon %d, the unit's process %d); %s still mounted: %v",
			mpB, newPid, daemonPid, p.Pid(), mpA, isFuseMount(mpA))
	}
	if !strings.Contains(p.Stderr(), "took its mounts with it") {
		t.Errorf("the unit's log does not say why its mount went: %s", p.Stderr())
	}
	p.Signal(syscall.SIGTERM)
	if r := p.Wait(stopBound); r.ExitCode != 0 || r.TimedOut {
		t.Fatalf("the unit's process after SIGTERM: exit %d (timed out %v): %s", r.ExitCode, r.TimedOut, r.Stderr)
	}
	waitExit(t, newPid, 30*time.Second)
	if isFuseMount(mpB) {
		t.Fatalf("%s still mounted after its process was stopped", mpB)
	}
}

// TestMountAllTwice: `mount -a` of fstab lines already mounted mounts
// nothing again and exits 0, as for other filesystems: the mount table
// records each source as the fstab line gives it (a local path, an s3://
// URL with no slash added).
func TestMountAllTwice(t *testing.T) {
	m := sharedMinIO(t)
	deployDataset(t, m, "mountall", 6)
	mountCmd(t)
	local := t.TempDir()
	paths := writeLocalFiles(t, local, 6)
	mpL, mpS := t.TempDir(), t.TempDir()
	lazyUnmountAtEnd(t, mpL)
	lazyUnmountAtEnd(t, mpS)
	fstab := filepath.Join(t.TempDir(), "fstab")
	lines := fmt.Sprintf("%s  %s  fuse.dsmount  cache_dir=%s,_netdev,nofail  0  0\n", local, mpL, t.TempDir()) +
		fmt.Sprintf("s3://mountall/d1  %s  fuse.dsmount  cache_dir=%s,s3_endpoint=%s,s3_path_style,_netdev  0  0\n", mpS, t.TempDir(), m.Endpoint())
	if err := os.WriteFile(fstab, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`mount -a -T %[1]s
echo "first $?"
mount -a -T %[1]s
echo "second $?"
for mp in %[2]s %[3]s; do
  echo "count $mp $(awk -v mp="$mp" '$5 == mp' /proc/self/mountinfo | wc -l)"
  echo "source $mp $(findmnt -n -o SOURCE "$mp")"
done
cat %[2]s/%[4]s | sha256sum
for mp in %[2]s %[3]s; do
  pid=$(dsmount stats "$mp" --json | grep -o '"daemon_pid":[0-9]*' | cut -d: -f2)
  umount "$mp"
  i=0; while kill -0 "$pid" 2>/dev/null; do i=$((i+1)); [ $i -lt 600 ] || { echo "daemon $pid still running" >&2; exit 1; }; sleep 0.05; done
done
`, fstab, mpL, mpS, paths[0])
	res := asInstalled(t, helperEnv(m), script)
	if res.ExitCode != 0 {
		t.Fatalf("mount -a twice: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	for _, want := range []string{"first 0", "second 0", "count " + mpL + " 1", "count " + mpS + " 1", "source " + mpL + " " + local, "source " + mpS + " s3://mountall/d1"} {
		if !strings.Contains(res.Stdout, want+"\n") {
			t.Errorf("want %q in:\n%s%s", want, res.Stdout, res.Stderr)
		}
	}
}

// TestUsageExitStatusNotRestarted: the exit status the units name in
// RestartPreventExitStatus= is the one a configuration error exits with,
// naming the variable it came from; a failure at run time (an
// unreachable store) exits with another, which the units do restart.
func TestUsageExitStatusNotRestarted(t *testing.T) {
	prevent := regexp.MustCompile(`(?m)^RestartPreventExitStatus=(\d+)$`)
	units, err := filepath.Glob(filepath.Join("..", "deploy", "systemd", "*.service"))
	if err != nil || len(units) == 0 {
		t.Fatalf("unit files: %v %v", units, err)
	}
	want := -1
	for _, u := range units {
		text, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		m := prevent.FindSubmatch(text)
		if m == nil {
			t.Fatalf("%s has no RestartPreventExitStatus=: a configuration error would restart forever", u)
		}
		code, _ := strconv.Atoi(string(m[1]))
		if want >= 0 && code != want {
			t.Fatalf("the units disagree on RestartPreventExitStatus: %d and %d", want, code)
		}
		want = code
	}
	mp := t.TempDir()
	lazyUnmountAtEnd(t, mp)
	env := append(os.Environ(), "DSMOUNT_CACHE_SIZE=bogus", "DSMOUNT_CACHE_DIR="+t.TempDir())
	r := testenv.RunCLIWith(dsmountBin, testenv.CLIOptions{Env: env}, time.Minute, "mount", "--mkdir", t.TempDir(), mp)
	if r.ExitCode != want || !strings.HasPrefix(r.Stderr, `dsmount: DSMOUNT_CACHE_SIZE="bogus": invalid size`) {
		t.Errorf("DSMOUNT_CACHE_SIZE=bogus: exit %d, stderr %q; want exit %d naming the variable", r.ExitCode, r.Stderr, want)
	}
	r = testenv.RunCLI(dsmountBin, nil, 2*time.Minute, "mount", "s3://bucket", mp, "--cache-dir", t.TempDir(), "--s3-endpoint", "http://127.0.0.1:1", "--s3-path-style", "--anonymous")
	if r.ExitCode == want || r.ExitCode == 0 {
		t.Errorf("an unreachable store: exit %d (%s); want a failure the units restart on, not %d", r.ExitCode, r.Stderr, want)
	}
}

// TestEnvFileNames: dsmount@'s environment file for a mountpoint with a
// '-' is the one docs/deploy.md names: the unit reads /etc/dsmount/%I.env,
// the instance unescaped as systemd's %I does it (systemd-escape
// --unescape: '-' back to '/', \x2d back to '-'), so the mountpoint's
// path under /etc/dsmount.
func TestEnvFileNames(t *testing.T) {
	esc, err := exec.LookPath("systemd-escape")
	if err != nil {
		t.Fatalf("systemd-escape (Debian's systemd) is needed: %v", err)
	}
	unit, err := os.ReadFile(filepath.Join("..", "deploy", "systemd", "dsmount@.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "\nEnvironmentFile=-/etc/dsmount/%I.env\n") {
		t.Fatalf("dsmount@.service does not read /etc/dsmount/%%I.env")
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	for mp, file := range map[string]string{"/mnt/imagenet": "mnt/imagenet.env", "/mnt/my-data": "mnt/my-data.env"} {
		out, err := exec.Command(esc, "--path", mp).Output()
		if err != nil {
			t.Fatal(err)
		}
		instance := strings.TrimSpace(string(out))
		out, err = exec.Command(esc, "--unescape", instance).Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)) + ".env"; got != file {
			t.Errorf("%s: instance %s, %%I.env is %s; want %s", mp, instance, got, file)
		}
		if !strings.Contains(string(doc), "/etc/dsmount/"+file) || !strings.Contains(string(doc), "dsmount@"+instance) {
			t.Errorf("docs/deploy.md does not name dsmount@%s and /etc/dsmount/%s for %s", instance, file, mp)
		}
	}
}
