package cache

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
	w := newWorkers(time.Hour)
	defer w.close()
	first := make(chan string)
	w.run(func() { first <- goid() })
	a := <-first

	// The worker is idle once it takes a hand-off; nothing else could.
	second := make(chan string, 1)
	deadline := time.Now().Add(10 * time.Second)
	for sent := false; !sent; {
		select {
		case w.work <- func() { second <- goid() }:
			sent = true
		default:
			if time.Now().After(deadline) {
				t.Fatal("the worker never went idle after its flight")
			}
			runtime.Gosched()
		}
	}
	if b := <-second; b != a {
		t.Errorf("second flight ran on goroutine %s, the idle worker was %s", b, a)
	}
}

func TestWorkersCloseWaitsForBusyAndRunsLateWork(t *testing.T) {
	w := newWorkers(time.Hour)
	release := make(chan struct{})
	var finished atomic.Bool
	started := make(chan struct{})
	w.run(func() { close(started); <-release; finished.Store(true) })
	<-started
	closed := make(chan struct{})
	go func() { w.close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("close returned while a worker was busy")
	default:
	}
	close(release)
	<-closed
	if !finished.Load() {
		t.Fatal("close returned before the busy worker's flight ended")
	}
	// A flight begun after close still runs (and ends with ErrClosed in the
	// cache); it must not be lost.
	late := make(chan struct{})
	w.run(func() { close(late) })
	<-late
}
