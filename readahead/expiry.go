package readahead

import (
	"time"
)

// expire forgets jobs idle for longer than the timeout.
func (r *Registry) expire(now time.Time) {
	r.mu.Lock()
	n := 0
	for m := range r.mounts {
		for k, j := range m.jobs {
			if now.Sub(j.lastActive) > r.cfg.JobTimeout {
				r.cfg.Logger.Info("readahead: job expired", "mount", m.name, "job", k.name, "idle", now.Sub(j.lastActive).Round(time.Second))
				m.removeJob(k)
				n++
			}
		}
	}
	r.mu.Unlock()
	if n > 0 {
		r.gen.Add(1)
	}
}
