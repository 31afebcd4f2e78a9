package flight

import (
	"sync"
	"sync/atomic"
	"time"
)

// Workers runs flights on goroutines that outlive one flight. A flight goes
// deep (the S3 SDK's middleware stack needs tens of KiB of stack), and a
// fresh goroutine per flight grew its stack from the minimum every time,
// copying it as it grew. A worker that finishes a
// flight waits up to idle for the next one, then exits.
//
// Invariant: every goroutine started by Run is counted in wg until it
// exits; after Close, Run starts uncounted goroutines only (a flight begun
// after Cache.Close ends at once with ErrClosed).
type Workers struct {
	work chan func() // unbuffered: a send succeeds only into an idle worker
	quit chan struct{}
	idle time.Duration
	wg   sync.WaitGroup
	// waiting counts workers between flights (tests wait on it).
	waiting atomic.Int32

	mu     sync.Mutex // guards closed against wg.Add after close
	closed bool
}

func NewWorkers(idle time.Duration) *Workers {
	return &Workers{work: make(chan func()), quit: make(chan struct{}), idle: idle}
}

// Run runs fn on an idle worker, or on a new one if none is idle.
func (w *Workers) Run(fn func()) {
	select {
	case w.work <- fn:
		return
	default:
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		go fn()
		return
	}
	w.wg.Add(1)
	w.mu.Unlock()
	go w.loop(fn)
}

func (w *Workers) loop(fn func()) {
	defer w.wg.Done()
	t := time.NewTimer(w.idle)
	defer t.Stop()
	for {
		fn()
		fn = nil // don't pin the last flight while idle
		t.Reset(w.idle)
		w.waiting.Add(1)
		select {
		case fn = <-w.work:
			w.waiting.Add(-1)
		case <-t.C:
			w.waiting.Add(-1)
			return
		case <-w.quit:
			w.waiting.Add(-1)
			return
		}
	}
}

// Close stops idle workers and waits for busy ones to finish their flight.
func (w *Workers) Close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.quit)
	}
	w.mu.Unlock()
	w.wg.Wait()
}
