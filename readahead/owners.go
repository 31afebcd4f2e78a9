package readahead

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

const (
	// maxAncestry bounds the walk up the process tree.
	maxAncestry = 32
	// maxOwners bounds the memo; it starts over when full.
	maxOwners = 4096
	// ownerTTL bounds how long an answer is trusted: pids are reused, and
	// a process whose parent exits is reparented.
	ownerTTL = 10 * time.Second
)

// owners maps a reading process to the declaring process it descends from,
// memoised. Loader workers are children (or grandchildren) of the process
// that declared the order, so the walk is short. Safe for concurrent use.
type owners struct {
	mu   sync.Mutex
	memo map[[2]int]ownerAnswer // by (reader pid, declaring pid)
	// ppid reads a process's parent, now the clock; tests replace them.
	ppid func(pid int) (int, error)
	now  func() time.Time
}

type ownerAnswer struct {
	descends bool
	at       time.Time
}

// find returns the element of declarers that pid is or descends from, or
// 0 if none.
func (o *owners) find(pid int, declarers []int) int {
	for _, d := range declarers {
		if o.descends(pid, d) {
			return d
		}
	}
	return 0
}

func (o *owners) descends(pid, ancestor int) bool {
	now := time.Now
	if o.now != nil {
		now = o.now
	}
	key := [2]int{pid, ancestor}
	t := now()
	o.mu.Lock()
	a, ok := o.memo[key]
	o.mu.Unlock()
	if ok && t.Sub(a.at) < ownerTTL {
		return a.descends
	}
	ppid := o.ppid
	if ppid == nil {
		ppid = procParent
	}
	found, sure := false, true
	for p, i := pid, 0; p > 1 && i < maxAncestry; i++ {
		if p == ancestor {
			found = true
			break
		}
		next, err := ppid(p)
		if err != nil {
			// A process that exited mid-walk, say: answer, don't remember.
			sure = false
			break
		}
		p = next
	}
	if sure {
		o.mu.Lock()
		if o.memo == nil || len(o.memo) >= maxOwners {
			o.memo = make(map[[2]int]ownerAnswer)
		}
		o.memo[key] = ownerAnswer{descends: found, at: t}
		o.mu.Unlock()
	}
	return found
}

// procParent reads pid's parent from /proc/<pid>/stat (field 4, after the
// command name, which may itself hold spaces and parentheses).
func procParent(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 2 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return strconv.Atoi(string(fields[1]))
}
