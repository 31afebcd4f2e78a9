package readahead

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
)

func TestOwnersWalkAndExpire(t *testing.T) {
	parents := map[int]int{300: 200, 200: 100, 100: 1, 400: 1}
	calls := 0
	now := time.Unix(1000, 0)
	o := owners{
		ppid: func(pid int) (int, error) {
			calls++
			if p, ok := parents[pid]; ok {
				return p, nil
			}
			return 0, errors.New("no such process")
		},
		now: func() time.Time { return now },
	}
	if got := o.find(300, []int{400, 100}); got != 100 {
		t.Fatalf("worker 300 (child of 200, grandchild of 100): owner %d, want 100", got)
	}
	if o.find(400, []int{100}) != 0 {
		t.Fatal("400 is not a descendant of 100")
	}
	before := calls
	o.find(300, []int{100})
	if calls != before {
		t.Errorf("a repeated lookup walked /proc again (%d more calls)", calls-before)
	}
	// pid 300 is reused by a process under 400 after the answer expired.
	parents[300] = 400
	now = now.Add(ownerTTL + time.Second)
	if got := o.find(300, []int{100, 400}); got != 400 {
		t.Errorf("after pid reuse and expiry: owner %d, want 400", got)
	}
	// A walk that fails is not remembered.
	if o.descends(999, 100) {
		t.Error("an unknown process descends from 100")
	}
	if _, ok := o.memo[[2]int{999, 100}]; ok {
		t.Error("a failed walk was memoised")
	}
}

func TestProcParentOfThisProcess(t *testing.T) {
	pp, err := procParent(os.Getpid())
	if err != nil || pp != os.Getppid() {
		t.Fatalf("procParent(self) = %d, %v; want %d", pp, err, os.Getppid())
	}
}

// TestThreadsDescendFromTheirProcess: the kernel names the reading thread
// in a FUSE request; a thread of this process other than the main one
// must lead back to this process, so its reads count for a job this
// process declared.
func TestThreadsDescendFromTheirProcess(t *testing.T) {
	runtime.LockOSThread() // a thread of its own for this goroutine, maybe the main one
	defer runtime.UnlockOSThread()
	tids, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var o owners
	checked := 0
	for _, e := range tids {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || tid == os.Getpid() {
			continue
		}
		if !o.descends(tid, os.Getpid()) {
			if _, err := os.Stat("/proc/self/task/" + e.Name()); err != nil {
				continue // the thread ended meanwhile
			}
			t.Errorf("thread %d of process %d does not descend from it", tid, os.Getpid())
		}
		if o.descends(tid, os.Getppid()+1_000_000) {
			t.Errorf("thread %d descends from a process that doesn't exist", tid)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no thread other than the main one to check")
	}
}

// FuzzParseStatus: any status text gives a parent or an error, never a
// panic, and a parent only from well-formed Tgid and PPid lines.
func FuzzParseStatus(f *testing.F) {
	f.Add(7, []byte("Name:\tpython\nTgid:\t7\nPid:\t7\nPPid:\t1\n"))
	f.Add(8, []byte("Tgid:\t7\nPPid:\t1\n"))
	f.Add(8, []byte("Tgid: x\nPPid:\n"))
	f.Add(1, []byte(""))
	f.Fuzz(func(t *testing.T, pid int, b []byte) {
		parent, err := parseStatus(pid, b)
		if err == nil && parent < 0 {
			t.Fatalf("parseStatus(%d, %q) = %d, want an error", pid, b, parent)
		}
	})
}

func TestParseStatus(t *testing.T) {
	for _, c := range []struct {
		pid    int
		status string
		want   int
	}{
		{7, "Name:\tpython\nTgid:\t7\nPid:\t7\nPPid:\t1\n", 1},
		{8, "Name:\tpython\nTgid:\t7\nPid:\t8\nPPid:\t1\n", 7},
		{8, "Name:\tpython\nPid:\t8\nPPid:\t1\n", -1},
		{8, "Tgid:\tx\nPPid:\t1\n", -1},
	} {
		got, err := parseStatus(c.pid, []byte(c.status))
		if c.want < 0 {
			if err == nil {
				t.Errorf("parseStatus(%d, %q) = %d, want an error", c.pid, c.status, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("parseStatus(%d, %q) = %d, %v; want %d", c.pid, c.status, got, err, c.want)
		}
	}
}
