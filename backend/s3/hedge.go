package s3

import (
	"context"
	"fmt"
	"io"
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
	ans    rangeAnswer
	err    error
	idx    int // in getRaced's cancels
	hedge  bool
	sentAt time.Time
}

// getRaced makes attempt (1, 2, ...) of a ranged GET of obj: it waits up
// to the first-byte timeout for an answer, sending another GET (a hedge)
// when the first is slow to answer (tail.go), and a third twice as late
// (maxHedges), and returns the first answer that came, with the function
// that ends its request: the caller calls it once done with the body. The
// other GETs are abandoned.
func (b *Backend) getRaced(ctx context.Context, obj backend.Object, off, n int64, attempt int) (rangeAnswer, context.CancelFunc, error) {
	results := make(chan raced, 1+maxHedges) // never blocks a GET's goroutine
	var cancels []context.CancelFunc
	pending := 0 // GETs sent whose outcome has not come
	launch := func(hedge bool) {
		actx, cancel := context.WithCancel(ctx)
		idx := len(cancels)
		cancels = append(cancels, cancel)
		pending++
		b.tail.sent()
		sentAt := time.Now()
		go func() {
			ans, err := b.get(actx, obj, off, n)
			results <- raced{ans: ans, err: err, idx: idx, hedge: hedge, sentAt: sentAt}
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

	start := time.Now()
	timeoutAfter := b.tail.firstByteTimeout(attempt)
	timeout := time.NewTimer(timeoutAfter)
	defer timeout.Stop()
	hedgeAfter := b.tail.hedgeAfter()
	hedgeTimer := time.NewTimer(hedgeAfter)
	defer hedgeTimer.Stop()
	urgent := backend.UrgencyOf(ctx)
	hedges := 0

	launch(false)
	var lastErr error
	for {
		select {
		case r := <-results:
			pending--
			if r.err == nil {
				r.ans.sentAt, r.ans.firstByte = r.sentAt, time.Since(r.sentAt)
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
			// A read ahead of its readers hedges later, unless a
			// reader has caught up with it meanwhile.
			waited := time.Since(start)
			if urgent != nil && !urgent() && waited < hedgeAheadMult*hedgeAfter {
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
				hedgeTimer.Reset(2 * hedgeAfter)
			}
		case <-timeout.C:
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
// deadline). Reads then fail, and stalled says why.
type watchedBody struct {
	r       io.Reader
	idle    time.Duration
	idleT   *time.Timer
	totalT  *time.Timer
	stalled atomic.Pointer[stallError]
}

func watchBody(r io.Reader, idle, deadline time.Duration, cancel context.CancelFunc) *watchedBody {
	w := &watchedBody{r: r, idle: idle}
	w.idleT = time.AfterFunc(idle, func() {
		w.stalled.CompareAndSwap(nil, &stallError{what: "no body bytes", after: idle})
		cancel()
	})
	if deadline > 0 {
		w.totalT = time.AfterFunc(deadline, func() {
			w.stalled.CompareAndSwap(nil, &stallError{what: "body not all in", after: deadline})
			cancel()
		})
	}
	return w
}

func (w *watchedBody) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n > 0 {
		w.idleT.Reset(w.idle)
	}
	return n, err
}

// stop ends the watch, and says whether it had ended the request.
func (w *watchedBody) stop() *stallError {
	w.idleT.Stop()
	if w.totalT != nil {
		w.totalT.Stop()
	}
	return w.stalled.Load()
}
