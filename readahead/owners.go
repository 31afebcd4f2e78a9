package readahead

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
)

const (
	// maxAncestry bounds the walk up the process tree.
	maxAncestry = 32
	// maxOwners bounds the memo; it starts over when full (pids are
	// reused, so entries must not live forever anyway).
	maxOwners = 4096
)

// owners maps a reading process to the declaring process it descends from,
// memoised. Loader workers are children (or grandchildren) of the process
// that declared the order, so the walk is short. Safe for concurrent use.
type owners struct {
	mu   sync.Mutex
	memo map[[2]int]int // (reader pid, declaring pid) -> 1 if descends, -1 if not
	// ppid reads a process's parent; tests replace it.
	ppid func(pid int) (int, error)
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
	key := [2]int{pid, ancestor}
	o.mu.Lock()
	v, ok := o.memo[key]
	o.mu.Unlock()
	if ok {
		return v > 0
	}
	ppid := o.ppid
	if ppid == nil {
		ppid = procParent
	}
	found := false
	for p, i := pid, 0; p > 1 && i < maxAncestry; i++ {
		if p == ancestor {
			found = true
			break
		}
		next, err := ppid(p)
		if err != nil {
			break
		}
		p = next
	}
	o.mu.Lock()
	if o.memo == nil || len(o.memo) >= maxOwners {
		o.memo = make(map[[2]int]int)
	}
	v = -1
	if found {
		v = 1
	}
	o.memo[key] = v
	o.mu.Unlock()
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
