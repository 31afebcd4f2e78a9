package fs

import "sync"

// loop is the lifecycle of one of a mount's goroutines (the push, the
// batched READs): started at most once, by the first request; stopped by
// stop, which waits for it. Invariant: once closed, it never starts, and
// whoever sends it work holds mu, so that nothing is sent after stop.
type loop struct {
	mu     sync.Mutex // guards closed, the start, and sends of work
	closed bool
	quit   chan struct{} // closed by stop; nil until the start
	wg     sync.WaitGroup
}

// startLocked runs run in the loop's goroutine, unless it runs already;
// l.mu is held and l is not closed.
func (l *loop) startLocked(run func()) {
	if l.quit != nil {
		return
	}
	l.quit = make(chan struct{})
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		run()
	}()
}

// stop closes the loop and waits for its goroutine to return; a second
// call returns at once.
func (l *loop) stop() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	started := l.quit != nil
	l.mu.Unlock()
	if started {
		close(l.quit)
		l.wg.Wait()
	}
}
