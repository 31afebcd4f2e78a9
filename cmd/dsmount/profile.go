package main

import (
	"os"
	"runtime/pprof"
)

// startProfile writes a CPU profile of the whole run to $DSMOUNT_CPUPROFILE,
// if set: the daemon is started by scripts and benchmarks, where a flag on
// every command line would be clumsy. The returned func stops it.
func startProfile() func() {
	path := os.Getenv("DSMOUNT_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
