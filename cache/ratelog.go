package cache

import (
	"log/slog"
	"sync"
	"time"
)

// rateLimitedLog writes the first of a run of warnings at once and then at
// most one a minute, counting the ones it left out.
type rateLimitedLog struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

const warnInterval = time.Minute

func (r *rateLimitedLog) warn(log *slog.Logger, msg string, args ...any) {
	r.mu.Lock()
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < warnInterval {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	n := r.suppressed
	r.last, r.suppressed = now, 0
	r.mu.Unlock()
	if n > 0 {
		args = append(args, "like_it_since_last", n)
	}
	log.Warn(msg, args...)
}
