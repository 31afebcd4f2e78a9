package testenv

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// Pin restricts every thread of process pid (0: this process) to cpus.
// Threads it starts later inherit the mask of the thread that starts them,
// and so do its children. Benchmarks use it to give a local backend its own
// cores, as a remote store's CPU is not the node's.
func Pin(pid int, cpus []int) error {
	if pid == 0 {
		pid = os.Getpid()
	}
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return fmt.Errorf("pin %d: %w", pid, err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		// A thread may exit between the listing and the call.
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("pin thread %d of %d to CPUs %v: %w", tid, pid, cpus, err)
		}
	}
	return nil
}

// IsolateBackend pins the backend's processes to CPU 0 and this process
// (and so the daemons and commands it starts later) to the other CPUs, and
// says so in a line for the report. On a 2-core machine a local MinIO
// otherwise competes with the client for CPU, and a comparison with plain
// GETs then measures the client's CPU as much as its use of the store.
func IsolateBackend(backendPids ...int) (string, error) {
	n := runtime.NumCPU()
	if n < 2 {
		return "", fmt.Errorf("isolating the backend needs 2 CPUs or more, this machine has %d", n)
	}
	rest := make([]int, 0, n-1)
	for c := 1; c < n; c++ {
		rest = append(rest, c)
	}
	for _, pid := range backendPids {
		if err := Pin(pid, []int{0}); err != nil {
			return "", err
		}
	}
	if err := Pin(0, rest); err != nil {
		return "", err
	}
	return fmt.Sprintf("MinIO and toxiproxy pinned to CPU 0; this program, the daemon and the commands it starts to CPUs 1-%d", n-1), nil
}
