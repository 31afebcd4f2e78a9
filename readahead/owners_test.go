package readahead

import (
	"errors"
	"os"
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
