package s3

import (
	"fmt"
	"sync"
	"time"

	"github.com/dsmount/dsmount/backend"
)

// countingObserver counts what a backend reports (backend.RequestObserver).
type countingObserver struct {
	mu                 sync.Mutex
	done               int
	badTimes           []string // GetDone calls whose times don't add up
	failed, retried    [backend.NumFailureKinds]int
	firstByte, totalMx time.Duration
}

func (o *countingObserver) GetDone(firstByte, total time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.done++
	if firstByte <= 0 || total < firstByte {
		o.badTimes = append(o.badTimes, fmt.Sprintf("first byte %v, total %v", firstByte, total))
	}
	o.firstByte = max(o.firstByte, firstByte)
	o.totalMx = max(o.totalMx, total)
}

func (o *countingObserver) GetFailed(k backend.FailureKind) {
	o.mu.Lock()
	o.failed[k]++
	o.mu.Unlock()
}

func (o *countingObserver) Retried(k backend.FailureKind) {
	o.mu.Lock()
	o.retried[k]++
	o.mu.Unlock()
}

// counts returns GetDone calls and the failures and retries by kind,
// as "throttled=N timeout=N other=N".
func (o *countingObserver) counts() (done int, failed, retried string, bad []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	show := func(c [backend.NumFailureKinds]int) string {
		return fmt.Sprintf("throttled=%d timeout=%d other=%d", c[backend.FailureThrottled], c[backend.FailureTimeout], c[backend.FailureOther])
	}
	return o.done, show(o.failed), show(o.retried), o.badTimes
}
