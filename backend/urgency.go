package backend

import "context"

// urgentKey is the context key of WithUrgency.
type urgentKey struct{}

// WithUrgency returns a context under which a Backend's ReadAt can ask
// urgent whether a reader is waiting for the read now (a foreground read)
// rather than fetching ahead of one. The answer may change while the read
// runs: a prefetch that a reader catches up with becomes urgent. Backends
// that race a stuck request against a second one (backend/s3's hedging)
// do so sooner for an urgent read. urgent must be cheap and safe for
// concurrent use.
func WithUrgency(ctx context.Context, urgent func() bool) context.Context {
	return context.WithValue(ctx, urgentKey{}, urgent)
}

// UrgencyOf returns the function installed by WithUrgency, or nil. A read
// without one is taken as urgent: its caller waits for it.
func UrgencyOf(ctx context.Context) func() bool {
	fn, _ := ctx.Value(urgentKey{}).(func() bool)
	return fn
}

// RequestStats are a backend's counts of the requests it made for reads,
// for backends that keep them (see StatsReporter).
type RequestStats struct {
	// Gets counts the GETs sent for reads, hedges and retries included.
	Gets int64
	// Hedges counts second GETs sent for a read whose first was slow to
	// answer; HedgesWon those that answered first.
	Hedges    int64
	HedgesWon int64
	// FirstByteTimeouts counts GETs abandoned for giving no answer in
	// time, and BodyTimeouts those whose body stopped coming.
	FirstByteTimeouts int64
	BodyTimeouts      int64
	// Retries counts GETs made again after a failure or a timeout.
	Retries int64
	// Throttled counts answers asking to slow down (503 SlowDown, 429).
	Throttled int64
	// FirstByteP99Millis is the recent 99th percentile of the time to a
	// GET's answer, which the timeouts follow; TimeoutMillis the first
	// attempt's timeout it gives, and HedgeMillis how long an urgent read
	// waits before a second GET.
	FirstByteP99Millis float64
	TimeoutMillis      float64
	HedgeMillis        float64
}

// StatsReporter is a Backend that counts its requests.
type StatsReporter interface {
	RequestStats() RequestStats
}

// ThrottleCounter is a Backend that counts the answers in which its store
// asked for fewer requests (S3's 503 SlowDown, 429): callers that fetch
// ahead of readers (package readahead) shrink their parallelism when the
// count grows, leaving the store's capacity to the reads someone waits for.
type ThrottleCounter interface {
	Throttled() int64
}
