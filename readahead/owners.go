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

// procParent is the process pid belongs to or descends from, one step up:
// for a thread that is not its process's main one, the process (its thread
// group); else the parent process. The kernel names the reading thread in a
// FUSE request, and a loader's reads come from many threads of one
// process (tf.data, a Go or C++ reader, a thread pool), whose parent is
// their process's parent: without the first step, none of them would
// descend from the process that declared the order. Read from
// /proc/<pid>/status (Tgid, PPid).
func procParent(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	return parseStatus(pid, b)
}

// parseStatus is procParent's reading of /proc/<pid>/status.
func parseStatus(pid int, b []byte) (int, error) {
	tgid, ppid := -1, -1
	for _, line := range bytes.Split(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
		if err != nil || n < 0 {
			continue
		}
		switch string(k) {
		case "Tgid":
			tgid = n
		case "PPid":
			ppid = n
		}
	}
	switch {
	case tgid < 0 || ppid < 0:
		return 0, fmt.Errorf("malformed /proc/%d/status", pid)
	case tgid != pid:
		return tgid, nil
	}
	return ppid, nil
}
