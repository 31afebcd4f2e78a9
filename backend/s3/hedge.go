package s3

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsmount/dsmount/backend"
)

// stallError is a GET abandoned for making no progress in time (tail.go):
// no answer, or a body that stopped coming or came too slowly. Another
// GET, on another connection, may well do better.
type stallError struct {
	what  string
	after time.Duration
}

func (e stallError) Error() string {
	return fmt.Sprintf("%s in %v", e.what, e.after.Round(time.Millisecond))
}

// Timeout marks it as a timeout for net.Error-minded callers.
func (stallError) Timeout() bool { return true }

// maxHedges is how many hedges one attempt may send. With a share of the
// store's connections stalled, a hedge has the same chance of meeting one
// as the GET it hedges, so with one hedge alone a read often still
// waited for the first-byte timeout.
const maxHedges = 2

// raced is one GET's outcome in getRaced.
type raced struct {
	ans   rangeAnswer
	err   error
	idx   int // in getRaced's cancels
	hedge bool
	sent  runMark
}

// getRaced makes attempt (1, 2, ...) of a ranged GET of obj: it waits up
// to the first-byte timeout for an answer, sending another GET (a hedge)
// when the first is slow to answer (tail.go), and a third twice as late
// (maxHedges), and returns the first answer that came, with the function
// that ends its request: the caller calls it once done with the body. The
// other GETs are abandoned. Its waits are in time this process ran
// (runclock.go): a timer that falls due while the process is starved is
// set again for what is left, for the answer may be in, unread.
func (b *Backend) getRaced(ctx context.Context, obj backend.Object, off, n int64, attempt int) (rangeAnswer, context.CancelFunc, error) {
	run := b.tail.run
	start := run.begin()
	defer run.end()
	results := make(chan raced, 1+maxHedges) // never blocks a GET's goroutine
	var cancels []context.CancelFunc
	pending := 0 // GETs sent whose outcome has not come
	launch := func(hedge bool) {
		actx, cancel := context.WithCancel(ctx)
		idx := len(cancels)
		cancels = append(cancels, cancel)
		pending++
		b.tail.sent()
		sent := run.mark()
		go func() {
			ans, err := b.get(actx, obj, off, n)
			results <- raced{ans: ans, err: err, idx: idx, hedge: hedge, sent: sent}
		}()
	}
	// abandon ends every GET but keep (-1: all); answers that come anyway
	// are closed as they arrive.
	abandon := func(keep int) {
		for i, c := range cancels {
			if i != keep {
				c()
			}
		}
		if left := pending; left > 0 {
			go func() {
				for range left {
					if r := <-results; r.err == nil {
						r.ans.body.Close()
					}
				}
			}()
		}
	}

	timeoutAfter := b.tail.firstByteTimeout(attempt)
	timeout := time.NewTimer(timeoutAfter)
	defer timeout.Stop()
	hedgeAfter := b.tail.hedgeAfter()
	hedgeTimer := time.NewTimer(hedgeAfter)
	defer hedgeTimer.Stop()
	hedgeAt := hedgeAfter // the run time at which the next hedge may go
	urgent := backend.UrgencyOf(ctx)
	hedges := 0

	launch(false)
	var lastErr error
	for {
		select {
		case r := <-results:
			pending--
			if r.err == nil {
				r.ans.sent, r.ans.firstByte = r.sent, run.ran(r.sent)
				b.tail.answer.observe(r.ans.firstByte)
				if r.hedge {
					b.tail.hedgesWon.Add(1)
				}
				abandon(r.idx)
				return r.ans, cancels[r.idx], nil
			}
			cancels[r.idx]()
			kind := failureKind(ctx, obj.Key, r.err)
			if kind == backend.FailureThrottled {
				b.tail.throttled.Add(1)
			}
			b.tail.getFailed(ctx, kind)
			lastErr = r.err
			if pending == 0 || !retryable(ctx, r.err) {
				abandon(-1)
				return rangeAnswer{}, nil, r.err
			}
			// The other GET may still answer.
		case <-hedgeTimer.C:
			if d := run.left(start, hedgeAt); d > 0 {
				hedgeTimer.Reset(d)
				continue
			}
			waited := run.ran(start)
			// A read ahead of its readers hedges later, unless a
			// reader has caught up with it meanwhile.
			if urgent != nil && !urgent() && waited < hedgeAheadMult*hedgeAfter {
				hedgeAt = waited + hedgeAfter
				hedgeTimer.Reset(hedgeAfter)
				continue
			}
			if pending > 0 && b.tail.takeHedge() {
				hedges++
				b.tail.hedges.Add(1)
				launch(true)
			}
			// A hedge may meet a stalled connection too: one more,
			// twice as late.
			if hedges < maxHedges {
				hedgeAt = waited + 2*hedgeAfter
				hedgeTimer.Reset(2 * hedgeAfter)
			}
		case <-timeout.C:
			if d := run.left(start, timeoutAfter); d > 0 {
				timeout.Reset(d)
				continue
			}
			abandon(-1)
			b.tail.firstByteTimeouts.Add(1)
			b.tail.getFailed(ctx, backend.FailureTimeout)
			if lastErr != nil {
				return rangeAnswer{}, nil, lastErr
			}
			return rangeAnswer{}, nil, stallError{what: "no answer", after: timeoutAfter}
		case <-ctx.Done():
			abandon(-1)
			return rangeAnswer{}, nil, ctx.Err()
		}
	}
}

// watchedBody reads a GET's body, ending its request (cancel) when the
// body delivers nothing for idle, or is not all in by deadline (0: no
// deadline), both in time this process ran. Reads then fail, and stalled
// says why.
type watchedBody struct {
	r              io.Reader
	run            *runClock
	idle, deadline time.Duration
	start          runMark
	stalled        atomic.Pointer[stallError]

	mu       sync.Mutex // guards what follows, which the timers read
	lastByte runMark
	idleT    *time.Timer
	totalT   *time.Timer
	stopped  bool
}

func watchBody(r io.Reader, run *runClock, idle, deadline time.Duration, cancel context.CancelFunc) *watchedBody {
	w := &watchedBody{r: r, run: run, idle: idle, deadline: deadline}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.start = run.begin()
	w.lastByte = w.start
	w.idleT = time.AfterFunc(idle, func() { w.expire(&w.idleT, w.idleLeft, "no body bytes", idle, cancel) })
	if deadline > 0 {
		w.totalT = time.AfterFunc(deadline, func() { w.expire(&w.totalT, w.totalLeft, "body not all in", deadline, cancel) })
	}
	return w
}

// idleLeft and totalLeft are how much longer the waits for a byte and
// for the whole body go on (runClock.left); w.mu is held.
func (w *watchedBody) idleLeft() time.Duration  { return w.run.left(w.lastByte, w.idle) }
func (w *watchedBody) totalLeft() time.Duration { return w.run.left(w.start, w.deadline) }

// expire runs when the timer *t falls due: it ends the request as
// stalled (what, after), unless left says the process was not running
// for part of the wait; then it sets *t again for what is left.
func (w *watchedBody) expire(t **time.Timer, left func() time.Duration, what string, after time.Duration, cancel context.CancelFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if d := left(); d > 0 {
		(*t).Reset(d)
		return
	}
	w.stalled.CompareAndSwap(nil, &stallError{what: what, after: after})
	cancel()
}

func (w *watchedBody) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n > 0 {
		w.mu.Lock()
		w.lastByte = w.run.mark()
		w.idleT.Reset(w.idle)
		w.mu.Unlock()
	}
	return n, err
}

// ran is how long the process ran since the watch began.
func (w *watchedBody) ran() time.Duration { return w.run.ran(w.start) }

// stop ends the watch, and says whether it had ended the request.
func (w *watchedBody) stop() *stallError {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.stopped = true
		w.idleT.Stop()
		if w.totalT != nil {
			w.totalT.Stop()
		}
		w.run.end()
	}
	return w.stalled.Load()
}
