package test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsmount/dsmount/test/testenv"
)

// TestInstancesIndependent: two systemd-style instances ($NOTIFY_SOCKET:
// each process holds its mount) on one cache dir. While a reader checks
// every byte it reads from b's mount, a is stopped (SIGTERM), killed
// (SIGKILL) and started again, a being the first, the one that started
// the daemon: not one of b's reads fails, and b's process stays.
// test/systemd/e2e.sh runs the same under a real systemd.
func TestInstancesIndependent(t *testing.T) {
	src := t.TempDir()
	paths := writeLocalFiles(t, src, 40)
	mpA, mpB, cacheDir := t.TempDir(), t.TempDir(), t.TempDir()
	lazyUnmountAtEnd(t, mpA)
	lazyUnmountAtEnd(t, mpB)
	start := func(mp string) *testenv.CLIProc {
		t.Helper()
		sock, next := notifyListener(t)
		p, err := testenv.StartCLI(dsmountBin, testenv.CLIOptions{Env: append(os.Environ(), "NOTIFY_SOCKET="+sock)}, "mount", src, mp, "--cache-dir", cacheDir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Signal(syscall.SIGTERM); p.Wait(stopBound) })
		next("READY=1")
		return p
	}
	a := start(mpA)
	b := start(mpB)
	daemonPid := testenv.Stats(t, dsmountBin, mpB).DaemonPid
	if daemonPid == a.Pid() || daemonPid == b.Pid() {
		t.Fatalf("an instance's process (a %d, b %d) is the daemon %d", a.Pid(), b.Pid(), daemonPid)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads, failed int
	var failures []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			for _, p := range paths {
				select {
				case <-stop:
					return
				default:
				}
				reads++
				if err := readChecked(src, mpB, p); err != nil {
					failed++
					if len(failures) < 5 {
						failures = append(failures, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), err))
					}
				}
			}
		}
	}()

	for i := range 2 {
		a.Signal(syscall.SIGTERM)
		if r := a.Wait(stopBound); r.ExitCode != 0 {
			t.Fatalf("a after SIGTERM %d: exit %d: %s", i, r.ExitCode, r.Stderr)
		}
		if isFuseMount(mpA) {
			t.Fatalf("a's mount stayed after a stopped")
		}
		a = start(mpA)
		a.Signal(syscall.SIGKILL)
		a.Wait(stopBound)
		// The daemon sees a's process hang up and takes its mount away.
		waitUnmounted(t, mpA, 30*time.Second)
		a = start(mpA)
		testenv.CompareTree(t, src, mpA, paths, 2, int64(i))
	}
	close(stop)
	wg.Wait()
	t.Logf("b's reader: %d reads while a was stopped, killed and started twice each", reads)
	if len(failures) > 0 {
		t.Errorf("%d of b's %d reads failed while a was stopped or killed; the first: %v", failed, reads, failures)
	}
	if reads < len(paths) {
		t.Errorf("b's reader made %d reads, fewer than one pass (%d)", reads, len(paths))
	}
	if b.Exited() {
		t.Errorf("b's process exited: %s", b.Stderr())
	}
	if got := testenv.Stats(t, dsmountBin, mpB).DaemonPid; got != daemonPid {
		t.Errorf("b is served by daemon %d, not %d: the daemon was replaced", got, daemonPid)
	}
}

// readChecked reads rel under mp whole, compares it with the source, and
// drops its cached pages, so that the next read asks the daemon again.
func readChecked(src, mp, rel string) error {
	f, err := os.Open(filepath.Join(mp, rel))
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	return testenv.CompareFile(src, rel, data)
}

// waitUnmounted waits until nothing is mounted at mp: the daemon unmounts
// a held mount when its holder dies, on its own schedule.
func waitUnmounted(t *testing.T, mp string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for isFuseMount(mp) {
		if time.Now().After(deadline) {
			t.Fatalf("%s still mounted %s after its holder died", mp, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
