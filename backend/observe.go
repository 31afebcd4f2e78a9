package backend

import "time"

// FailureKind sorts a failed request, for counting: a small, fixed set, so
// that a counter per kind stays one series each.
type FailureKind uint8

const (
	// FailureOther is any failure that is neither of the others: a
	// refused or reset connection, an error answer, a body cut short.
	FailureOther FailureKind = iota
	// FailureThrottled is an answer asking for fewer requests (S3's 503
	// SlowDown, 429).
	FailureThrottled
	// FailureTimeout is a request that got no answer in time, or whose
	// body stopped coming.
	FailureTimeout

	// NumFailureKinds is how many kinds there are: a consumer can keep
	// one counter per kind in an array indexed by the kind.
	NumFailureKinds = 3
)

// String is the kind's label: "other", "throttled" or "timeout".
func (k FailureKind) String() string {
	switch k {
	case FailureThrottled:
		return "throttled"
	case FailureTimeout:
		return "timeout"
	}
	return "other"
}

// RequestObserver is told of a backend's requests for reads as they
// happen: what a caller keeping latency histograms and error counters
// (the daemon's metrics) needs, without the backend knowing how they are
// kept. Its methods are called on the read path, concurrently: they must
// be cheap, safe for concurrent use, and must not block.
type RequestObserver interface {
	// GetDone: a GET made for a read answered (its response headers
	// arrived) firstByte after it was sent, and its body was all in total
	// after it was sent.
	GetDone(firstByte, total time.Duration)
	// GetFailed: a GET made for a read failed. The read may make another
	// (Retried), or fail. A GET the backend abandons because another
	// answered first is not a failure, nor is one its caller cancelled.
	GetFailed(kind FailureKind)
	// Retried: a read makes its GET again after a failure of that kind.
	Retried(kind FailureKind)
}

// Observed is a Backend that reports its requests to a RequestObserver
// (backend/s3 does; backends whose reads are one system call don't).
type Observed interface {
	// ObserveRequests installs o (nil: none). Call it before the
	// backend's first read: requests made before it are not reported.
	ObserveRequests(o RequestObserver)
}
