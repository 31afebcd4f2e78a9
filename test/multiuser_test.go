package test

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/test/testenv"
)

// A second user of a shared node, played by the tests (which run as root).
var nobody = &syscall.Credential{Uid: 65534, Gid: 65534}

// publicDir returns a new directory that every user may enter and list.
func publicDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{d, filepath.Dir(d)} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// binForAll returns a copy of the dsmount binary that other users may run.
func binForAll(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(dsmountBin)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(publicDir(t), "dsmount")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

func runAs(t *testing.T, who *syscall.Credential, bin string, args ...string) testenv.CLIResult {
	t.Helper()
	return testenv.RunCLIWith(bin, testenv.CLIOptions{As: who, Dir: "/"}, time.Minute, args...)
}

// TestControlEntryAnswersEachUserForItself: on a mount other users may read
// (--allow-other), another user's requests through the control entry
// reach only what is theirs: jobs are named per user, so they can't
// replace or end another's; they see only their own jobs and the mount
// they ask through, can't name another user's process as theirs, and are
// bounded in sessions, jobs and request size. The mounting user (here
// root) sees and may change all.
func TestControlEntryAnswersEachUserForItself(t *testing.T) {
	src, src2 := publicDir(t), publicDir(t)
	paths := testenv.GenerateDataset(t, src, testenv.DatasetSpec{Seed: 61, SmallFiles: 40, FilesPerDir: 20, MaxDepth: 1})
	testenv.GenerateDataset(t, src2, testenv.DatasetSpec{Seed: 62, SmallFiles: 10, FilesPerDir: 10, MaxDepth: 1})
	mp, mp2, cacheDir := publicDir(t), publicDir(t), t.TempDir()
	testenv.StartMount(t, testenv.MountConfig{Bin: dsmountBin, Source: src, Mountpoint: mp,
		Args: []string{"--cache-dir", cacheDir, "--cache-size", "1G", "--allow-other"}})
	testenv.JoinMount(t, dsmountBin, nil, src2, mp2, time.Minute, "--cache-dir", cacheDir, "--allow-other")
	bin := binForAll(t)
	list := filepath.Join(publicDir(t), "order.txt")
	if err := os.WriteFile(list, []byte(strings.Join(paths, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	if r := runAs(t, nil, dsmountBin, "order", mp, "--job", "train", "--epoch", "0", list); r.ExitCode != 0 {
		t.Fatalf("root declaring a job: exit %d: %s", r.ExitCode, r.Stderr)
	}
	// Jobs are named per user: another user's "train" is a job of its own,
	// and its end ends that one; root's is untouched.
	for _, args := range [][]string{
		{"order", mp, "--job", "train", "--epoch", "5", list},
		{"order", mp, "--job", "train", "--end"},
	} {
		if r := runAs(t, nobody, bin, args...); r.ExitCode != 0 {
			t.Errorf("another user's %v: exit %d: %s", args[3:], r.ExitCode, r.Stderr)
		}
	}
	jobs := testenv.Stats(t, dsmountBin, mp).Mount.Jobs
	if len(jobs) != 1 || jobs[0].Name != "train" || jobs[0].UID != 0 || jobs[0].Epoch != 0 {
		t.Fatalf("jobs after another user declared and ended its own train: %+v; want root's alone, epoch 0", jobs)
	}

	if r := runAs(t, nobody, bin, "order", mp, "--job", "mine", "--epoch", "0", list); r.ExitCode != 0 {
		t.Fatalf("another user declaring a job of its own: exit %d: %s", r.ExitCode, r.Stderr)
	}
	r := runAs(t, nobody, bin, "stats", mp, "--json")
	var theirs control.StatsReport
	if err := testenv.DecodeJSONObject(r.Stdout, &theirs); r.ExitCode != 0 || err != nil {
		t.Fatalf("stats as another user: exit %d, %v: %s", r.ExitCode, err, r.Stderr)
	}
	if len(theirs.Mounts) != 1 || theirs.Mounts[0].Mountpoint != mp {
		t.Errorf("another user's stats list %d mounts; want only the one asked through (%s)", len(theirs.Mounts), mp)
	}
	if len(theirs.Mount.Jobs) != 1 || theirs.Mount.Jobs[0].Name != "mine" {
		t.Errorf("another user's stats show jobs %+v; want only its own (mine)", theirs.Mount.Jobs)
	}
	if all := testenv.Stats(t, dsmountBin, mp); len(all.Mounts) != 2 || len(all.Mount.Jobs) != 2 {
		t.Errorf("root's stats: %d mounts, %d jobs; want both", len(all.Mounts), len(all.Mount.Jobs))
	}

	r = runAs(t, nobody, bin, "order", mp, "--job", "mine", "--epoch", "1", "--pid", strconv.Itoa(os.Getpid()), list)
	if r.ExitCode == 0 {
		t.Errorf("another user named root's process (pid %d) as its training process: accepted", os.Getpid())
	}

	// Sessions: a user opening control entries and keeping them open gets
	// a bounded number.
	sh := runAs(t, nobody, "/usr/bin/python3", "-c", holdSessions, mp, strconv.FormatUint(uint64(control.IoctlSend), 10), strconv.Itoa(control.ChunkSize), "40")
	if n, err := strconv.Atoi(strings.TrimSpace(sh.Stdout)); err != nil || n >= 40 || n < 1 {
		t.Errorf("another user kept %q control sessions open at once (stderr %q); want a bound below 40", sh.Stdout, sh.Stderr)
	}
	// Jobs: bounded per user.
	declared := 0
	for i := range 40 {
		if runAs(t, nobody, bin, "order", mp, "--job", "j"+strconv.Itoa(i), "--epoch", "0", list).ExitCode == 0 {
			declared++
		}
	}
	if declared >= 40 {
		t.Errorf("another user declared %d jobs on one mount; want a bound", declared)
	}
	// Request size: refused as it is sent, not buffered and parsed.
	big := runAs(t, nobody, "/usr/bin/python3", "-c", sendZeros, mp, strconv.FormatUint(uint64(control.IoctlSend), 10), strconv.Itoa(control.ChunkSize), "200000000")
	if got := strings.TrimSpace(big.Stdout); got != strconv.Itoa(int(syscall.EFBIG)) {
		t.Errorf("another user sent a 200 MB control request: errno %q (exit %d, %s); want EFBIG (%d)", got, big.ExitCode, big.Stderr, syscall.EFBIG)
	}
	// And root's job and the daemon are as they were.
	if r := runAs(t, nil, dsmountBin, "order", mp, "--job", "train", "--epoch", "1", list); r.ExitCode != 0 {
		t.Fatalf("root redeclaring its job afterwards: exit %d: %s", r.ExitCode, r.Stderr)
	}
}

// TestDaemonSocketServesItsUserOnly: the socket through which mounts join
// a running daemon is created private (0600, never looser), and even where
// someone loosens it, the daemon takes requests from its own user and root
// only: a root daemon must not mount a filesystem where another user says.
// A client that connects and says nothing is hung up on.
func TestDaemonSocketServesItsUserOnly(t *testing.T) {
	src, mp, cacheDir := publicDir(t), publicDir(t), publicDir(t)
	testenv.GenerateDataset(t, src, testenv.DatasetSpec{Seed: 63, SmallFiles: 10, FilesPerDir: 10, MaxDepth: 1})
	testenv.StartMount(t, testenv.MountConfig{Bin: dsmountBin, Source: src, Mountpoint: mp,
		Args: []string{"--cache-dir", cacheDir, "--cache-size", "1G"}})
	sock := filepath.Join(cacheDir, "dsmount.sock")
	st, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Type() != os.ModeSocket || st.Mode().Perm() != 0o600 {
		t.Errorf("daemon socket %s: mode %v; want a socket, 0600", sock, st.Mode())
	}

	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	mp2 := publicDir(t)
	r := runAs(t, nobody, binForAll(t), "mount", src, mp2, "--cache-dir", cacheDir)
	if mounted, _ := testenv.IsMounted(mp2); mounted || r.ExitCode == 0 {
		t.Errorf("another user asked the root daemon to mount at %s: exit %d, mounted %v; want a refusal", mp2, r.ExitCode, mounted)
	} else if !strings.Contains(r.Stderr, "uid") {
		t.Errorf("the refusal doesn't say why: %q", r.Stderr)
	}

	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("a client that said nothing: read %v; want the daemon to hang up (EOF)", err)
	}
	testenv.JoinMount(t, dsmountBin, nil, src, publicDir(t), time.Minute, "--cache-dir", cacheDir)

	// The other way round: root doesn't hand its mount to another user's
	// daemon (on a cache dir that user owns).
	theirs := filepath.Join(publicDir(t), "cache")
	if err := os.Mkdir(theirs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, int(nobody.Uid), int(nobody.Gid)); err != nil {
		t.Fatal(err)
	}
	daemon, err := testenv.StartCLI(binForAll(t), testenv.CLIOptions{As: nobody, Dir: "/"}, "daemon", "--cache-dir", theirs, "--cache-size", "64M")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { daemon.Signal(syscall.SIGTERM); daemon.Wait(time.Minute) }()
	err = testenv.WaitFor(time.Minute, 20*time.Millisecond, "the other user's daemon socket", func() (bool, error) {
		_, err := os.Stat(filepath.Join(theirs, "dsmount.sock"))
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("%v; its stderr: %s", err, daemon.Stderr())
	}
	mp3 := publicDir(t)
	r = runAs(t, nil, dsmountBin, "mount", src, mp3, "--cache-dir", theirs)
	if mounted, _ := testenv.IsMounted(mp3); mounted || r.ExitCode == 0 || !strings.Contains(r.Stderr, "another user") {
		t.Errorf("root mounting through another user's daemon: exit %d, mounted %v, stderr %q; want a refusal", r.ExitCode, mounted, r.Stderr)
	}
}

// TestCacheDirMustBeTheDaemons: a cache dir another user owns or may write
// to is refused before anything in it is opened, so links planted there
// can't make a root daemon truncate or write another file; no file in the
// cache dir is opened through a symlink; and with no home directory the
// cache dir is not a shared fixed path.
func TestCacheDirMustBeTheDaemons(t *testing.T) {
	src, mp := publicDir(t), publicDir(t)
	testenv.GenerateDataset(t, src, testenv.DatasetSpec{Seed: 64, SmallFiles: 5, FilesPerDir: 5, MaxDepth: 1})
	victims := t.TempDir()
	victim := func(name string) string {
		p := filepath.Join(victims, name)
		if err := os.WriteFile(p, []byte("precious "+name), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	intact := func(p string) {
		t.Helper()
		if b, err := os.ReadFile(p); err != nil || string(b) != "precious "+filepath.Base(p) {
			t.Errorf("%s after the mount attempt: %d bytes, starting %q (%v); want it untouched", p, len(b), b[:min(len(b), 32)], err)
		}
	}
	mountWith := func(cacheDir string) testenv.CLIResult {
		t.Helper()
		r := testenv.RunCLI(dsmountBin, nil, time.Minute, "mount", src, mp, "--cache-dir", cacheDir, "--cache-size", "1G")
		if mounted, _ := testenv.IsMounted(mp); mounted {
			testenv.LazyUnmount(mp)
			t.Errorf("mounted with --cache-dir %s", cacheDir)
		}
		return r
	}

	// Another user's directory, links planted to root's files.
	evil := filepath.Join(publicDir(t), "cache")
	lock, reserve := victim("lock"), victim("reserve")
	if err := os.Mkdir(evil, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(evil, 0o777)
	os.Symlink(lock, filepath.Join(evil, "dsmount.lock"))
	os.Symlink(reserve, filepath.Join(evil, "reserve"))
	os.Lchown(filepath.Join(evil, "dsmount.lock"), 65534, 65534)
	os.Lchown(filepath.Join(evil, "reserve"), 65534, 65534)
	if err := os.Chown(evil, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	r := mountWith(evil)
	if r.ExitCode == 0 || !strings.Contains(r.Stderr, "owned by") {
		t.Errorf("another user's cache dir: exit %d, stderr %q; want a refusal naming the owner", r.ExitCode, r.Stderr)
	}
	intact(lock)
	intact(reserve)

	// Root's own, but writable by everyone.
	open := filepath.Join(t.TempDir(), "cache")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if r := mountWith(open); r.ExitCode == 0 || !strings.Contains(r.Stderr, "writable") {
		t.Errorf("a world-writable cache dir: exit %d, stderr %q; want a refusal", r.ExitCode, r.Stderr)
	}

	// Root's own and private, with a link where the cache keeps its data.
	withDataLink := filepath.Join(t.TempDir(), "cache")
	os.Mkdir(withDataLink, 0o700)
	elsewhere := t.TempDir()
	os.Symlink(elsewhere, filepath.Join(withDataLink, "data"))
	if r := mountWith(withDataLink); r.ExitCode == 0 || !strings.Contains(r.Stderr, "symlink") {
		t.Errorf("a cache dir whose data/ is a symlink: exit %d, stderr %q; want a refusal", r.ExitCode, r.Stderr)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) > 0 {
		t.Errorf("the daemon made %d entries through the data/ link", len(ents))
	}

	// Root's own and private, with links in it all the same.
	for _, name := range []string{"dsmount.lock", "reserve"} {
		own := filepath.Join(t.TempDir(), "cache")
		os.Mkdir(own, 0o700)
		v := victim("own-" + name)
		os.Symlink(v, filepath.Join(own, name))
		if r := mountWith(own); r.ExitCode == 0 {
			t.Errorf("a cache dir whose %s is a symlink: mounted; want a refusal", name)
		}
		intact(v)
	}

	// No home: no default under a shared temporary directory.
	tmp := publicDir(t)
	os.Chmod(tmp, 0o1777)
	r = testenv.RunCLIWith(binForAll(t), testenv.CLIOptions{As: nobody, Dir: "/", Env: []string{"PATH=/usr/bin:/bin", "TMPDIR=" + tmp}},
		time.Minute, "mount", src, publicDir(t))
	if r.ExitCode == 0 || !strings.Contains(r.Stderr, "--cache-dir") {
		t.Errorf("no HOME: exit %d, stderr %q; want a refusal asking for --cache-dir", r.ExitCode, r.Stderr)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) > 0 {
		t.Errorf("no HOME: %s now holds %v; want nothing made in a shared directory", tmp, ents)
	}
}

// holdSessions, a Python program run as another user, opens argv[4]
// sessions on the mount at argv[1] at once, each started by half a
// request sent with the session's send ioctl (argv[2], chunk size
// argv[3]), and prints how many the daemon took.
const holdSessions = `import fcntl, os, struct, sys
root, send, size, want = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
buf = bytearray(size)
struct.pack_into("<II", buf, 0, 6, 0)
buf[8:14] = b'{"op":'
held, took = [], 0
for i in range(want):
    fd = os.open(os.path.join(root, ".dsmount-control.s%d-%d" % (os.getpid(), i)), os.O_RDONLY)
    held.append(fd)
    try:
        fcntl.ioctl(fd, send, buf, True)
        took += 1
    except OSError:
        pass
print(took)
`

// sendZeros, a Python program run as another user, sends argv[4] zero
// bytes as one control request on a session of the mount at argv[1], with
// the session's send ioctl (argv[2]) and chunk size (argv[3]); it fails as
// the daemon refuses a chunk, printing the errno.
const sendZeros = `import fcntl, os, struct, sys
root, send, size, total = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
fd = os.open(os.path.join(root, ".dsmount-control.big%d" % os.getpid()), os.O_RDONLY)
buf = bytearray(size)
struct.pack_into("<II", buf, 0, size - 8, 0)
try:
    for _ in range(total // (size - 8) + 1):
        fcntl.ioctl(fd, send, buf, True)
except OSError as e:
    print(e.errno)
    sys.exit(1)
print(0)
`
