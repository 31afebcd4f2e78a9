package test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsmount/dsmount/test/testenv"
)

// The ways users start dsmount besides a foreground `dsmount mount`:
// mount(8) with -t fuse.dsmount, an fstab line, `dsmount mount --daemon`,
// and systemd's readiness protocol. Each returns only once the mount
// serves reads, so every test reads right after the command returns,
// without waiting.

// deployDataset puts n random files in bucket and in a local directory
// (the reference), returning the directory and the paths.
func deployDataset(t *testing.T, m *testenv.MinIO, bucket string, n int) (string, []string) {
	t.Helper()
	m.CreateBucket(bucket)
	src := t.TempDir()
	r := rand.New(rand.NewPCG(uint64(len(bucket)), 27))
	var paths []string
	for i := range n {
		name := fmt.Sprintf("d%d/%03d.bin", i%3, i)
		putRandomFile(t, r, src, name, 1000+r.IntN(300_000), m, bucket)
		paths = append(paths, name)
	}
	return src, paths
}

// helperEnv is the environment mount(8) runs mount.fuse3 with: the
// store's credentials (mount(8) passes the environment on, all but PATH).
func helperEnv(m *testenv.MinIO) []string { return s3Env(m) }

// fuseSource is SOURCE as `mount -t fuse` takes it with the program named
// in it (PROGRAM#SOURCE): mount.fuse3 then runs this test's dsmount build
// where `-t fuse.dsmount` runs the `dsmount` of the default PATH (mount(8)
// drops PATH), i.e. an installed one; both run `dsmount SOURCE MOUNTPOINT
// -o OPTIONS`. TestMountTypeInstalled runs `-t fuse.dsmount` itself.
func fuseSource(src string) string { return dsmountBin + "#" + src }

// asInstalled runs script with sh in a mount namespace of its own in
// which /usr/local/bin holds this test's dsmount build (bound over it,
// seen by nothing outside): `-t fuse.dsmount` and fstab lines then find
// dsmount as an installed one is found, without installing anything on
// this machine. Mounts made in the script are gone with the namespace.
func asInstalled(t *testing.T, env []string, script string) testenv.CLIResult {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatalf("unshare (util-linux) is needed: %v", err)
	}
	bin := t.TempDir()
	data, err := os.ReadFile(dsmountBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "dsmount"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	full := "set -eu\nmount --bind " + bin + " /usr/local/bin\n" + script
	return testenv.RunCLIWith("unshare", testenv.CLIOptions{Env: env}, 3*time.Minute, "--mount", "--propagation", "private", "sh", "-c", full)
}

// sha256Lines are `sha256sum` lines of paths under root, as sha256sum
// prints them with root as its working directory.
func sha256Lines(t *testing.T, root string, paths []string) string {
	t.Helper()
	var b strings.Builder
	for _, p := range paths {
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%x  %s\n", sha256.Sum256(data), p)
	}
	return b.String()
}

func isFuseMount(dir string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(dir, &st) == nil && st.Type == 0x65735546
}

// lazyUnmountAtEnd detaches mp when the test ends, if it is still mounted
// (a failed test must not leave a mount behind).
func lazyUnmountAtEnd(t *testing.T, mp string) {
	t.Cleanup(func() {
		if isFuseMount(mp) {
			syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	})
}

// waitExit waits (up to timeout) for process pid, not a child of this
// one, to exit: a pidfd becomes readable when it does.
func waitExit(t *testing.T, pid int, timeout time.Duration) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // already gone
	}
	defer unix.Close(fd)
	n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(timeout.Milliseconds()))
	if err != nil || n == 0 {
		t.Fatalf("process %d still running %s after its last mount went (%v)", pid, timeout, err)
	}
}

func mountCmd(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("mount")
	if err != nil {
		t.Fatalf("mount(8) is needed: %v", err)
	}
	if _, err := os.Stat("/sbin/mount.fuse3"); err != nil {
		t.Fatalf("mount.fuse3 (Debian's fuse3) is needed for mount -t fuse.dsmount: %v", err)
	}
	return p
}

// TestMountTypeFuse: mount(8) through mount.fuse3 (`mount -t fuse
// dsmount#SOURCE MP -o OPTIONS`, which runs what -t fuse.dsmount runs)
// returns once the mount serves reads, every flag works as an option,
// the options fstab and systemd add are ignored, the daemon runs on in
// the background with its log in the cache dir, and `umount` ends it.
// A bad option and an unreachable store fail the mount command with the
// reason and leave nothing mounted.
func TestMountTypeFuse(t *testing.T) {
	m := sharedMinIO(t)
	src, paths := deployDataset(t, m, "mounttype", 24)
	mount := mountCmd(t)
	env := helperEnv(m)
	mp, cacheDir := t.TempDir(), t.TempDir()
	lazyUnmountAtEnd(t, mp)
	opts := strings.Join([]string{"cache_dir=" + cacheDir, "cache_size=1G", "chunk_size=1M", "s3_endpoint=" + m.Endpoint(), "s3_path_style",
		"fast_path=off", "log_format=json", "defaults", "_netdev", "nofail", "x-systemd.automount", "noatime", "comment=dataset"}, ",")
	res := testenv.RunCLIWith(mount, testenv.CLIOptions{Env: env}, 2*time.Minute, "-t", "fuse", fuseSource("s3://mounttype"), mp, "-o", opts)
	if res.ExitCode != 0 {
		t.Fatalf("mount -t fuse: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if !isFuseMount(mp) {
		t.Fatalf("mount returned 0 but %s is not a FUSE mount", mp)
	}
	testenv.CompareTree(t, src, mp, paths, 4, 1)
	st := testenv.Stats(t, dsmountBin, mp)
	if st.Mount.FastPath != "off" || st.Cache.Capacity != 1<<30 {
		t.Errorf("the options did not reach the daemon: fast path %q, capacity %d", st.Mount.FastPath, st.Cache.Capacity)
	}
	log, err := os.ReadFile(filepath.Join(cacheDir, "dsmount.log"))
	if err != nil || !strings.Contains(string(log), `"msg":"mounted"`) {
		t.Errorf("the background daemon's log in the cache dir: %v\n%s", err, log)
	}
	if r := testenv.RunCLIWith("/bin/umount", testenv.CLIOptions{Env: env}, time.Minute, mp); r.ExitCode != 0 {
		t.Fatalf("umount: exit %d: %s", r.ExitCode, r.Stderr)
	}
	waitExit(t, st.DaemonPid, 30*time.Second)

	for _, c := range []struct{ name, opts, want string }{
		{"unknown option", "cache_dir=" + t.TempDir() + ",bogus=1", `unknown mount option "bogus"`},
		{"a flag that wants a value", "cache_dir=" + t.TempDir() + ",cache_size", "mount option cache_size needs a value"},
		{"a bad value", "cache_dir=" + t.TempDir() + ",chunk_size=huge", `mount option chunk_size="huge": invalid size`},
		{"an unreachable store", "cache_dir=" + t.TempDir() + ",s3_endpoint=http://127.0.0.1:1,s3_path_style", "127.0.0.1:1"},
	} {
		mp := t.TempDir()
		lazyUnmountAtEnd(t, mp)
		res := testenv.RunCLIWith(mount, testenv.CLIOptions{Env: env}, 3*time.Minute, "-t", "fuse", fuseSource("s3://mounttype"), mp, "-o", c.opts)
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, c.want) || isFuseMount(mp) {
			t.Errorf("%s: exit %d, mounted %v, stderr %q: want a failure naming %q", c.name, res.ExitCode, isFuseMount(mp), res.Stderr, c.want)
		}
	}
}

// TestMountTypeInstalled: with dsmount installed (in /usr/local/bin, in
// a namespace of the test's own), `mount -t fuse.dsmount` and an fstab
// line of type fuse.dsmount (here `mount -T FILE MOUNTPOINT`, a test's
// own fstab) mount; the files read right after are the source's bytes;
// `umount` ends the daemon.
func TestMountTypeInstalled(t *testing.T) {
	m := sharedMinIO(t)
	src, paths := deployDataset(t, m, "installed", 12)
	mountCmd(t)
	want := sha256Lines(t, src, paths)
	mp, mp2 := t.TempDir(), t.TempDir()
	fstab := filepath.Join(t.TempDir(), "fstab")
	line := fmt.Sprintf("s3://installed  %s  fuse.dsmount  cache_dir=%s,cache_size=1G,s3_endpoint=%s,s3_path_style,_netdev,nofail,x-systemd.requires=network-online.target  0  0\n",
		mp2, t.TempDir(), m.Endpoint())
	if err := os.WriteFile(fstab, []byte("# a test's fstab\n"+line), 0o644); err != nil {
		t.Fatal(err)
	}
	// Each mount: read every file, note the daemon, unmount, wait for the
	// daemon to exit (up to 30 s).
	check := func(mp string) string {
		return fmt.Sprintf(`cd %[1]s && sha256sum %[2]s && cd /
pid=$(dsmount stats %[1]s --json | grep -o '"daemon_pid":[0-9]*' | cut -d: -f2)
umount %[1]s
i=0; while kill -0 "$pid" 2>/dev/null; do i=$((i+1)); [ $i -lt 600 ] || { echo "daemon $pid still running" >&2; exit 1; }; sleep 0.05; done
`, mp, strings.Join(paths, " "))
	}
	script := fmt.Sprintf("mount -t fuse.dsmount s3://installed %s -o cache_dir=%s,cache_size=1G,s3_endpoint=%s,s3_path_style,_netdev\n", mp, t.TempDir(), m.Endpoint()) +
		check(mp) + "echo ==\n" + fmt.Sprintf("mount -T %s %s\n", fstab, mp2) + check(mp2)
	res := asInstalled(t, helperEnv(m), script)
	if res.ExitCode != 0 {
		t.Fatalf("mount -t fuse.dsmount and fstab, as installed: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if got := strings.Split(res.Stdout, "==\n"); len(got) != 2 || got[0] != want || got[1] != want {
		t.Fatalf("bytes read through the mounts:\n%s\nwant twice:\n%s", res.Stdout, want)
	}
}

// TestMountInBackground: `dsmount mount --daemon` returns once the mount
// serves reads (a warm or a read right after it is no race), and fails
// with the daemon's reason when the mount can't be made.
func TestMountInBackground(t *testing.T) {
	src := t.TempDir()
	paths := writeLocalFiles(t, src, 30)
	mp, cacheDir := t.TempDir(), t.TempDir()
	lazyUnmountAtEnd(t, mp)
	res := testenv.RunCLI(dsmountBin, nil, time.Minute, "mount", "-d", src, mp, "--cache-dir", cacheDir, "--log-format", "json")
	if res.ExitCode != 0 {
		t.Fatalf("dsmount mount -d: exit %d: %s", res.ExitCode, res.Stderr)
	}
	testenv.CompareTree(t, src, mp, paths, 4, 3)
	if !strings.Contains(res.Stderr, `"daemon_pid"`) {
		t.Errorf("mount -d said nothing of its daemon: %s", res.Stderr)
	}
	pid := testenv.Stats(t, dsmountBin, mp).DaemonPid
	if pid == 0 || pid == os.Getpid() {
		t.Fatalf("daemon pid %d", pid)
	}
	if r := testenv.RunCLI(dsmountBin, nil, time.Minute, "unmount", mp); r.ExitCode != 0 {
		t.Fatalf("dsmount unmount: exit %d: %s", r.ExitCode, r.Stderr)
	}
	waitExit(t, pid, 30*time.Second)

	missing := filepath.Join(t.TempDir(), "missing")
	mp2 := t.TempDir()
	lazyUnmountAtEnd(t, mp2)
	r := testenv.RunCLI(dsmountBin, nil, time.Minute, "mount", "-d", missing, mp2, "--cache-dir", t.TempDir())
	if r.ExitCode == 0 || !strings.Contains(r.Stderr, missing) || isFuseMount(mp2) {
		t.Errorf("mount -d of a missing directory: exit %d, mounted %v, stderr %q", r.ExitCode, isFuseMount(mp2), r.Stderr)
	}
}

// TestSystemdNotify: under a Type=notify unit ($NOTIFY_SOCKET), `dsmount
// mount` says READY=1 once the mount serves reads and STOPPING=1 when a
// SIGTERM starts its shutdown, then exits 0; `dsmount daemon` says
// READY=1 once its socket listens.
func TestSystemdNotify(t *testing.T) {
	sock, next := notifyListener(t)
	env := append(os.Environ(), "NOTIFY_SOCKET="+sock)

	src := t.TempDir()
	paths := writeLocalFiles(t, src, 10)
	mp := t.TempDir()
	lazyUnmountAtEnd(t, mp)
	p, err := testenv.StartCLI(dsmountBin, testenv.CLIOptions{Env: env}, "mount", src, mp, "--cache-dir", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	next("READY=1")
	testenv.CompareTree(t, src, mp, paths, 2, 4)
	p.Signal(syscall.SIGTERM)
	next("STOPPING=1")
	if r := p.Wait(time.Minute); r.ExitCode != 0 {
		t.Fatalf("dsmount mount after SIGTERM: exit %d: %s", r.ExitCode, r.Stderr)
	}

	cacheDir := t.TempDir()
	d, err := testenv.StartCLI(dsmountBin, testenv.CLIOptions{Env: env}, "daemon", "--cache-dir", cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	next("READY=1")
	if _, err := os.Stat(filepath.Join(cacheDir, "dsmount.sock")); err != nil {
		t.Errorf("READY before the socket listens: %v", err)
	}
	d.Signal(syscall.SIGTERM)
	next("STOPPING=1")
	if r := d.Wait(time.Minute); r.ExitCode != 0 {
		t.Fatalf("dsmount daemon after SIGTERM: exit %d: %s", r.ExitCode, r.Stderr)
	}
}

// writeLocalFiles writes n small files of random bytes under dir.
func writeLocalFiles(t *testing.T, dir string, n int) []string {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(n), 5))
	var paths []string
	for i := range n {
		name := fmt.Sprintf("f%02d/%03d.bin", i%4, i)
		data := make([]byte, 500+r.IntN(200_000))
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, name)
	}
	return paths
}

// TestSystemdUnits: the unit files under deploy/systemd pass
// `systemd-analyze verify` with no complaint (an unknown key is only a
// warning there, so any output fails), as installed with dsmount at the
// path they name; and a misspelled key does produce one, so the check
// can fail.
func TestSystemdUnits(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze (Debian's systemd) is needed to check the unit files: %v", err)
	}
	units, err := filepath.Glob(filepath.Join("..", "deploy", "systemd", "*.service"))
	if err != nil || len(units) < 2 {
		t.Fatalf("unit files: %v %v", units, err)
	}
	verify := func(name, text string) string {
		dir := t.TempDir()
		// As installed: dsmount where ExecStart says (here the test's
		// build), and the instance's environment file left optional,
		// since /etc/dsmount is not this machine's.
		text = strings.ReplaceAll(text, "/usr/local/bin/dsmount", dsmountBin)
		text = strings.ReplaceAll(text, "EnvironmentFile=/etc/", "EnvironmentFile=-/etc/")
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, "@.service") { // a template is verified as an instance
			inst := strings.TrimSuffix(name, ".service") + "mnt-data.service"
			if err := os.WriteFile(filepath.Join(dir, inst), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			name = inst
		}
		out, err := exec.Command(analyze, "verify", "--man=no", filepath.Join(dir, name)).CombinedOutput()
		if err != nil {
			return fmt.Sprintf("%v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, u := range units {
		text, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(text), "Type=notify") {
			t.Errorf("%s: not Type=notify", u)
		}
		if out := verify(filepath.Base(u), string(text)); out != "" {
			t.Errorf("systemd-analyze verify %s: %s", u, out)
		}
		if out := verify(filepath.Base(u), strings.Replace(string(text), "\nType=notify", "\nTpye=notify", 1)); out == "" {
			t.Errorf("systemd-analyze verify said nothing of a misspelled key in %s", u)
		}
	}
}

// TestMountOverDeadMount: a daemon killed with its mount in place leaves
// a dead FUSE mount (every access ENOTCONN, though a stat may still be
// answered from cached attributes); mounting there again detaches
// it, says so, and serves the right bytes, with no umount -l first: a
// container restarted in place needs no wrapper. --mkdir makes a missing
// mountpoint.
func TestMountOverDeadMount(t *testing.T) {
	src := t.TempDir()
	paths := writeLocalFiles(t, src, 12)
	mp := filepath.Join(t.TempDir(), "made", "by", "mkdir")
	cacheDir := t.TempDir()
	lazyUnmountAtEnd(t, mp)
	mount := func() testenv.CLIResult {
		return testenv.RunCLI(dsmountBin, nil, time.Minute, "mount", "-d", "--mkdir", src, mp, "--cache-dir", cacheDir)
	}
	if r := mount(); r.ExitCode != 0 {
		t.Fatalf("dsmount mount -d --mkdir: exit %d: %s", r.ExitCode, r.Stderr)
	}
	testenv.CompareTree(t, src, mp, paths, 2, 5)
	// The root's attributes now cached by the kernel: after the kill, a
	// stat of the mountpoint still succeeds (as under systemd, where the
	// unit's restart missed the dead mount for it); statfs does not.
	if _, err := os.Stat(mp); err != nil {
		t.Fatal(err)
	}
	pid := testenv.Stats(t, dsmountBin, mp).DaemonPid
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExit(t, pid, 30*time.Second)
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(mp, &sfs); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("after SIGKILL, statfs %s: %v; want ENOTCONN (a dead FUSE mount)", mp, err)
	}
	r := mount()
	if r.ExitCode != 0 || !strings.Contains(r.Stderr, "detached a dead FUSE mount") {
		t.Fatalf("mount over the dead mount: exit %d: %s", r.ExitCode, r.Stderr)
	}
	testenv.CompareTree(t, src, mp, paths, 2, 6)
	pid = testenv.Stats(t, dsmountBin, mp).DaemonPid
	if r := testenv.RunCLI(dsmountBin, nil, time.Minute, "unmount", mp); r.ExitCode != 0 {
		t.Fatalf("unmount: %s", r.Stderr)
	}
	waitExit(t, pid, 30*time.Second)
}
