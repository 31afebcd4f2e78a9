package flight

import (
	"bytes"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// goid is the running goroutine's number, from its stack header.
func goid() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	return string(b[:bytes.IndexByte(b, ' ')])
}

func TestWorkersReuseIdleGoroutine(t *testing.T) {
	w := NewWorkers(time.Hour)
	defer w.Close()
	ids := make(chan string)
	w.Run(func() { ids <- goid() })
	a := <-ids
	for w.waiting.Load() == 0 { // the worker finished its flight and waits for the next
		runtime.Gosched()
	}
	w.Run(func() { ids <- goid() })
	if b := <-ids; b != a {
		t.Errorf("second flight ran on goroutine %s, the idle worker was %s", b, a)
	}
}

func TestWorkersCloseWaitsForBusyAndRunsLateWork(t *testing.T) {
	w := NewWorkers(time.Hour)
	release := make(chan struct{})
	var finished atomic.Bool
	started := make(chan struct{})
	w.Run(func() { close(started); <-release; finished.Store(true) })
	<-started
	closed := make(chan struct{})
	go func() { w.Close(); close(closed) }()
	// A negative check, bounded: close must still be waiting a while after
	// it was called, since the flight can't end before release.
	select {
	case <-closed:
		t.Fatal("close returned while a worker was busy")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-closed
	if !finished.Load() {
		t.Fatal("close returned before the busy worker's flight ended")
	}
	// A flight begun after close still runs (and ends with ErrClosed in the
	// cache); it must not be lost.
	late := make(chan struct{})
	w.Run(func() { close(late) })
	<-late
}
