package testenv

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUSnapshot is a /proc/stat reading of the whole machine, for telling
// how busy it was during a benchmark pass.
type CPUSnapshot struct{ busy, total float64 }

// MachineCPU reads /proc/stat (zero on failure).
func MachineCPU() CPUSnapshot {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUSnapshot{}
	}
	line, _, _ := strings.Cut(string(data), "\n")
	var st CPUSnapshot
	for i, v := range strings.Fields(line)[1:] {
		x, _ := strconv.ParseFloat(v, 64)
		st.total += x
		if i != 3 && i != 4 { // idle, iowait
			st.busy += x
		}
	}
	return st
}

// BusySince is how many cores were busy on average since c0.
func (c CPUSnapshot) BusySince(c0 CPUSnapshot) float64 {
	if c.total == c0.total {
		return 0
	}
	return (c.busy - c0.busy) / (c.total - c0.total) * float64(runtime.NumCPU())
}

// SelfCPU is this process's CPU seconds (user+system) so far.
func SelfCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// ProcCPU is the CPU seconds (user+system) pid has used so far, -1 if it
// can't be read.
func ProcCPU(pid int) float64 {
	user, sys := ProcCPUSplit(pid)
	if user < 0 {
		return -1
	}
	return user + sys
}

// ProcCPUSplit is the user and system CPU seconds pid has used so far,
// (-1, -1) if they can't be read.
func ProcCPUSplit(pid int) (user, sys float64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1, -1
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 14 {
		return -1, -1
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return ut / 100, st / 100 // USER_HZ
}
