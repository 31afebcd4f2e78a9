package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
)

// startProfile writes a CPU profile of the whole run to $DSMOUNT_CPUPROFILE
// and an execution trace (scheduling latency, syscalls) to
// $DSMOUNT_TRACE_DIR/dsmount-<pid>.trace, if set: the daemon is started by
// scripts and benchmarks, where a flag on every command line would be
// clumsy, and a benchmark starts one daemon per pass. The returned func
// stops both.
func startProfile() func() {
	var stops []func()
	if path := os.Getenv("DSMOUNT_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			if err := pprof.StartCPUProfile(f); err != nil {
				f.Close()
			} else {
				stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
			}
		}
	}
	if dir := os.Getenv("DSMOUNT_TRACE_DIR"); dir != "" {
		path := filepath.Join(dir, fmt.Sprintf("dsmount-%d.trace", os.Getpid()))
		if f, err := os.Create(path); err == nil {
			if err := trace.Start(f); err != nil {
				f.Close()
			} else {
				stops = append(stops, func() { trace.Stop(); f.Close() })
			}
		}
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
	}
}
