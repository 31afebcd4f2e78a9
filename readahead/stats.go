package readahead

import (
	"sort"
)

// Jobs returns the mount's jobs, by name.
func (m *Mount) Jobs() []JobStats {
	r := m.r
	now := r.cfg.Now()
	r.mu.RLock()
	out := []JobStats{} // never nil: stats lists no jobs as []
	for _, j := range m.jobs {
		out = append(out, j.stats(now))
	}
	r.mu.RUnlock()
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out
}
