package s3

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsmount/dsmount/backend"
)

// The tail of a store's latency is bounded by timeouts that follow the
// latency it shows, and by hedging: "The Tail at Scale" (Dean and Barroso,
// 2013), as the AWS CRT behind mountpoint-s3 and gcsfuse do it.
//
//   - A GET whose answer (the response headers) takes longer than
//     timeoutMult times the recent 99th percentile of answer times, within
//     [minTimeout, maxTimeout], is abandoned and made again; each further
//     attempt of one read waits twice as long, up to maxTimeout, so a
//     store that has become uniformly slower is followed rather than
//     hammered (its answers then raise the percentile).
//   - A body that delivers no byte for as long, but at least minBodyIdle,
//     is abandoned the same way, and so is one far slower than the recent
//     99th percentile transfer time per MiB (bodyDeadline).
//   - All of these times, the answer and transfer times measured too, are
//     time this process ran (runclock.go): a process that was starved of
//     CPU finds its answers waiting when it runs again, and neither
//     abandons them nor counts the wait as the store's.
//   - A read a caller waits for (backend.WithUrgency) that has no answer
//     after 1.25 times the 99th percentile sends a second GET, on another
//     connection, and takes whichever answers first; a read ahead of its
//     readers waits hedgeAheadMult times longer. (At the percentile
//     itself, a healthy warm hedged too often: its GETs in flight answer
//     slower than the reads before them, which the window still
//     remembers.) Hedges draw on a budget earned by GETs (hedgeBudget of
//     them), so a store that is slow for every request gets at most that
//     share of extra requests.
//
// On a healthy store under a steady load, fewer than one read in a
// hundred that a caller waits for is hedged.
const (
	latencyWindow  = 1024 // answer times the percentile is taken over
	minSamples     = 32   // below this, the cold defaults apply
	recomputeEvery = 32   // answers between recomputations of the percentile

	timeoutMult = 4
	minTimeout  = 200 * time.Millisecond
	maxTimeout  = readIdleTimeout
	minBodyIdle = time.Second

	bodyMult     = 16
	minBodyTotal = 2 * time.Second
	minHedge     = 5 * time.Millisecond

	hedgeAheadMult = 3
	hedgeBudget    = 0.05 // hedges earned per GET
	hedgeBurst     = 10   // and banked at most

	// Before minSamples answers: what a store far from the node might
	// need, rather than what a local one shows.
	coldTimeout = 2 * time.Second
	coldHedge   = 250 * time.Millisecond
)

// percentile99 keeps the 99th percentile of the last latencyWindow
// durations observed. Safe for concurrent use.
type percentile99 struct {
	mu      sync.Mutex
	times   [latencyWindow]time.Duration // ring of recent durations
	n       int                          // observed in all
	scratch []time.Duration
	p99     atomic.Int64 // nanoseconds; 0 until minSamples
}

func (q *percentile99) observe(d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.times[q.n%latencyWindow] = d
	q.n++
	if q.n >= minSamples && (q.n%recomputeEvery == 0 || q.n == minSamples) {
		k := min(q.n, latencyWindow)
		q.scratch = append(q.scratch[:0], q.times[:k]...)
		slices.Sort(q.scratch)
		q.p99.Store(int64(q.scratch[(k*99)/100]))
	}
}

// get is the percentile, or 0 before minSamples observations.
func (q *percentile99) get() time.Duration { return time.Duration(q.p99.Load()) }

// tail keeps a backend's recent answer and transfer times and its request
// counts. Safe for concurrent use.
type tail struct {
	// answer is the time from sending a GET to its response headers;
	// perMiB a body's transfer time per MiB, from bodies of at least
	// perMiBMinBytes (smaller ones say more of the request than of the
	// transfer).
	answer, perMiB percentile99

	mu     sync.Mutex
	tokens float64 // hedge budget

	gets, hedges, hedgesWon, firstByteTimeouts, bodyTimeouts, retries, throttled atomic.Int64

	// obs is told of each GET's times and failures (observe.go).
	obs atomic.Pointer[backend.RequestObserver]

	// run is the clock every wait above is measured on.
	run *runClock
}

const perMiBMinBytes = 256 << 10

func newTail() *tail { return &tail{tokens: hedgeBurst, run: newRunClock()} }

// observeBody records a body of n bytes that took d to arrive.
func (t *tail) observeBody(n int, d time.Duration) {
	if n >= perMiBMinBytes {
		t.perMiB.observe(time.Duration(float64(d) * float64(1<<20) / float64(n)))
	}
}

// sent counts a GET and earns its share of the hedge budget.
func (t *tail) sent() {
	t.gets.Add(1)
	t.mu.Lock()
	t.tokens = min(t.tokens+hedgeBudget, hedgeBurst)
	t.mu.Unlock()
}

// takeHedge spends one hedge from the budget, if there is one.
func (t *tail) takeHedge() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tokens < 1 {
		return false
	}
	t.tokens--
	return true
}

// firstByteTimeout is how long attempt (1, 2, ...) of a read waits for
// its answer.
func (t *tail) firstByteTimeout(attempt int) time.Duration {
	d := coldTimeout
	if p := t.answer.get(); p > 0 {
		d = min(max(timeoutMult*p, minTimeout), maxTimeout)
	}
	for range attempt - 1 {
		d = min(2*d, maxTimeout)
	}
	return d
}

// bodyIdleTimeout is how long a body may deliver nothing.
func (t *tail) bodyIdleTimeout() time.Duration {
	return max(t.firstByteTimeout(1), minBodyIdle)
}

// bodyDeadline is how long a body of n bytes may take in all, in attempt
// (1, 2, ...) of a read; 0 while the transfer rate is not known. It bounds
// a connection that trickles, which the idle timeout can't see. It is
// generous (bodyMult times the p99 per-MiB time, at least minBodyTotal,
// doubling with each attempt) because bodies slow down together when many
// streams share a link: a tight deadline would abandon them all and send
// them again, making it worse, and fail reads that were only slow. The
// doubling stops at maxTimeout, as the first-byte timeout's does: past
// it, a read's last attempts would wait minutes.
func (t *tail) bodyDeadline(n int64, attempt int) time.Duration {
	p := t.perMiB.get()
	if p == 0 {
		return 0
	}
	base := t.firstByteTimeout(1) + max(time.Duration(bodyMult*float64(p)*float64(n)/(1<<20)), minBodyTotal)
	d := base
	for range attempt - 1 {
		d = min(2*d, max(base, maxTimeout))
	}
	return d
}

// hedgeAfter is how long a read waits for an answer before a second GET.
func (t *tail) hedgeAfter() time.Duration {
	if p := t.answer.get(); p > 0 {
		return max(p+p/4, minHedge)
	}
	return coldHedge
}

func (t *tail) stats() backend.RequestStats {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return backend.RequestStats{
		Gets: t.gets.Load(), Hedges: t.hedges.Load(), HedgesWon: t.hedgesWon.Load(),
		FirstByteTimeouts: t.firstByteTimeouts.Load(), BodyTimeouts: t.bodyTimeouts.Load(),
		Retries: t.retries.Load(), Throttled: t.throttled.Load(),
		FirstByteP99Millis: ms(t.answer.get()),
		TimeoutMillis:      ms(t.firstByteTimeout(1)),
		HedgeMillis:        ms(t.hedgeAfter()),
	}
}
