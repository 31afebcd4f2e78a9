package backend

import "context"

// progressKey is the context key of WithProgress.
type progressKey struct{}

// WithProgress returns a context under which a Backend's ReadAt tells fn of
// the bytes it receives as they arrive, so a caller can act before the
// whole range is in (package readahead starts its next fetches as the
// previous ones' bytes come in). fn must be cheap and safe for concurrent
// use. It may hear of more than len(p) bytes in all, when a read is retried
// after part of a range arrived, and of none at all: reporting is optional
// (backend/s3 reports; local backends, whose reads are one system call,
// don't), so a caller must settle its accounts when ReadAt returns.
func WithProgress(ctx context.Context, fn func(n int)) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// ProgressOf returns the function installed by WithProgress, or nil.
func ProgressOf(ctx context.Context) func(n int) {
	fn, _ := ctx.Value(progressKey{}).(func(n int))
	return fn
}
