package s3

import (
	"context"
	"errors"
	"time"

	"github.com/dsmount/dsmount/backend"
)

var _ backend.Observed = (*Backend)(nil)

// ObserveRequests has the GETs made for reads reported to o: each answered
// GET's time to its first byte (the response headers) and to the end of
// its body, each failed GET and each retry, by kind
// (backend.RequestObserver). The SDK's own retries, where it makes the
// GETs (a store the raw getter can't sign for, get.go), are not seen.
func (b *Backend) ObserveRequests(o backend.RequestObserver) {
	if o == nil {
		b.tail.obs.Store(nil)
		return
	}
	b.tail.obs.Store(&o)
}

// observer is the installed observer, or nil.
func (t *tail) observer() backend.RequestObserver {
	if p := t.obs.Load(); p != nil {
		return *p
	}
	return nil
}

// getDone reports a GET that answered after firstByte and whose body
// came in all by total, both from its sending, in time this process ran.
func (t *tail) getDone(firstByte, total time.Duration) {
	if o := t.observer(); o != nil {
		o.GetDone(firstByte, total)
	}
}

// getFailed reports a failed GET, unless its caller gave up on it (ctx
// done): that is no failure of the store's.
func (t *tail) getFailed(ctx context.Context, kind backend.FailureKind) {
	if ctx.Err() != nil {
		return
	}
	if o := t.observer(); o != nil {
		o.GetFailed(kind)
	}
}

// retried reports a read making its GET again after a failure of kind.
func (t *tail) retried(kind backend.FailureKind) {
	if o := t.observer(); o != nil {
		o.Retried(kind)
	}
}

// failureKind sorts a GET's failure: throttling, a timeout (ours, a stall,
// or the connection's), or anything else.
func failureKind(ctx context.Context, key string, err error) backend.FailureKind {
	var to interface{ Timeout() bool }
	switch {
	case errors.As(err, new(stallError)):
		return backend.FailureTimeout
	case throttled(ctx, key, err):
		return backend.FailureThrottled
	case errors.As(err, &to) && to.Timeout():
		return backend.FailureTimeout
	}
	return backend.FailureOther
}
