package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// FuseTrace counts the FUSE requests the kernel sends one mount's daemon,
// by opcode, from the kernel's own fuse:fuse_request_send tracepoint: what
// a pass costs in round trips, whatever the daemon itself counts. It uses
// a tracing instance of its own (so it neither sees nor disturbs other
// tracing), filtered to the mount's connection. Needs root; tracefs is
// mounted at /sys/kernel/tracing if it is not.
type FuseTrace struct {
	dir  string // the instance
	conn uint32
}

const tracefs = "/sys/kernel/tracing"

// traceBufferKB is each CPU's ring buffer in the instance: room for about
// 200,000 requests per CPU (an event takes about 40 bytes); Stop reports
// any that were lost.
const traceBufferKB = 8192

// StartFuseTrace starts counting the requests of the FUSE mount at
// mountpoint.
func StartFuseTrace(mountpoint string) (*FuseTrace, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(mountpoint, &st); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(tracefs, "instances")); err != nil {
		if err := syscall.Mount("nodev", tracefs, "tracefs", 0, ""); err != nil {
			return nil, fmt.Errorf("mount tracefs at %s (needs root): %w", tracefs, err)
		}
	}
	dir := filepath.Join(tracefs, "instances", fmt.Sprintf("dsmount-fuse-%d-%d", os.Getpid(), st.Dev))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tracing instance: %w", err)
	}
	// A FUSE mount's device is anonymous (major 0): the connection the
	// tracepoint names is its minor number.
	t := &FuseTrace{dir: dir, conn: unix.Minor(uint64(st.Dev))}
	ev := filepath.Join(dir, "events", "fuse", "fuse_request_send")
	for _, w := range [][2]string{
		{filepath.Join(dir, "buffer_size_kb"), strconv.Itoa(traceBufferKB)},
		{filepath.Join(ev, "filter"), fmt.Sprintf("connection == %d", t.conn)},
		{filepath.Join(ev, "enable"), "1"},
	} {
		if err := os.WriteFile(w[0], []byte(w[1]), 0o600); err != nil {
			t.remove()
			return nil, fmt.Errorf("tracing FUSE requests: %w", err)
		}
	}
	return t, nil
}

// FuseOps are FUSE requests counted by opcode name (FUSE_LOOKUP, ...).
type FuseOps map[string]int64

// Total is the number of requests.
func (o FuseOps) Total() int64 {
	var n int64
	for _, v := range o {
		n += v
	}
	return n
}

// PerFile formats the counts divided by files, largest first:
// "READ 1.00 LOOKUP 0.02".
func (o FuseOps) PerFile(files int) string {
	names := make([]string, 0, len(o))
	for k := range o {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		return o[names[i]] > o[names[j]] || o[names[i]] == o[names[j]] && names[i] < names[j]
	})
	var b strings.Builder
	for i, k := range names {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s %.2f", strings.TrimPrefix(k, "FUSE_"), float64(o[k])/float64(files))
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

var traceOpcode = regexp.MustCompile(`opcode \d+ \(([A-Z_]+)\)`)

// Stop stops counting and returns the counts. It fails if the ring buffer
// lost events (the counts would be short).
func (t *FuseTrace) Stop() (FuseOps, error) {
	defer t.remove()
	os.WriteFile(filepath.Join(t.dir, "events", "fuse", "fuse_request_send", "enable"), []byte("0"), 0o600)
	if lost, err := t.lost(); err != nil {
		return nil, err
	} else if lost > 0 {
		return nil, fmt.Errorf("the trace lost %d FUSE request events (raise traceBufferKB)", lost)
	}
	f, err := os.Open(filepath.Join(t.dir, "trace"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ops := FuseOps{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := traceOpcode.FindStringSubmatch(sc.Text()); m != nil {
			ops[m[1]]++
		}
	}
	return ops, sc.Err()
}

// lost sums the per-CPU overrun counts of the instance.
func (t *FuseTrace) lost() (int64, error) {
	stats, err := filepath.Glob(filepath.Join(t.dir, "per_cpu", "cpu*", "stats"))
	if err != nil {
		return 0, err
	}
	var lost int64
	for _, s := range stats {
		data, err := os.ReadFile(s)
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "overrun: "); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				lost += n
			}
		}
	}
	return lost, nil
}

// remove deletes the instance (a busy instance can't be removed at once
// after its events are disabled; a second try follows).
func (t *FuseTrace) remove() {
	if err := os.Remove(t.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		os.Remove(t.dir)
	}
}

// ProcSwitches is the context switches (voluntary and not) of every live
// thread of process pid so far, -1 if they can't be read.
func ProcSwitches(pid int) int64 {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		return -1
	}
	var n int64
	for _, s := range tasks {
		data, err := os.ReadFile(s)
		if err != nil {
			continue // the thread exited
		}
		for _, line := range strings.Split(string(data), "\n") {
			for _, k := range []string{"voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"} {
				if v, ok := strings.CutPrefix(line, k); ok {
					c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					n += c
				}
			}
		}
	}
	return n
}
