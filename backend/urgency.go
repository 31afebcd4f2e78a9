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

// ThrottleCounter is a Backend that counts the answers in which its store
// asked for fewer requests (S3's 503 SlowDown, 429): callers that fetch
// ahead of readers (package readahead) shrink their parallelism when the
// count grows, leaving the store's capacity to the reads someone waits for.
type ThrottleCounter interface {
	Throttled() int64
}
