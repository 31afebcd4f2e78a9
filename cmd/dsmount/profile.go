package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"syscall"
)

// startProfile writes a CPU profile of the whole run to $DSMOUNT_CPUPROFILE,
// a heap profile to $DSMOUNT_HEAPPROFILE at each SIGUSR1, and an execution trace (scheduling latency, syscalls) to
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
	if path := os.Getenv("DSMOUNT_HEAPPROFILE"); path != "" {
		stops = append(stops, heapProfileOnSignal(path))
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
	}
}

// heapProfileOnSignal writes a heap profile to path at each SIGUSR1 (after
// a GC, so in-use figures are live objects): where a daemon's memory goes
// at a given moment (after a mount, a find, a declaration) is a question
// for that moment, not for exit. The returned func stops it.
func heapProfileOnSignal(path string) func() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-sig:
				runtime.GC()
				if f, err := os.Create(path); err == nil {
					pprof.WriteHeapProfile(f)
					f.Close()
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
		wg.Wait()
	}
}
