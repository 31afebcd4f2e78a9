package testenv

import (
	"fmt"
	"os"
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
