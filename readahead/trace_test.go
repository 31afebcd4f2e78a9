package readahead

import (
	"testing"
)

// TestTraceCountsEvictionsTheJobNeedsSoon: the policy's trace counts an
// eviction against a job only when the job needs the item within its
// window, and a prefetched item its readers passed unseen as such, not as
// evicted unread.
func TestTraceCountsEvictionsTheJobNeedsSoon(t *testing.T) {
	reg, m, items := newTestMount(t, 1000)
	if _, err := m.Declare(Declaration{Job: "train", Current: items}); err != nil {
		t.Fatal(err)
	}
	reg.mu.Lock()
	var j *job
	for _, jj := range reg.allJobs() {
		j = jj
	}
	j.window = 10
	j.fetchedAhead[items[1].ID] = struct{}{}
	reg.mu.Unlock()
	p := reg.Policy().(*orderPolicy)
	p.Removed(items[5].ID)  // needed 5 reads from now: within the window
	p.Removed(items[50].ID) // needed, but far past the window
	// The readers get far enough (reads the daemon saw) that position 1,
	// fetched ahead and never read through the daemon, counts as passed.
	for i := 2; i < 2+spreadEvidence+2*minLag; i++ {
		m.Observe(m.objs[items[i].Ref], items[i].ID, 0, 0)
	}
	s := m.Jobs()[0]
	if s.EvictedInWindow != 1 {
		t.Errorf("evicted in window = %d, want 1 (the item needed within the window of 10, not the one 50 ahead)", s.EvictedInWindow)
	}
	if s.PrefetchUnseen != 1 || s.PrefetchEvicted != 0 {
		t.Errorf("prefetched and passed unseen: unseen %d, evicted unread %d; want 1, 0", s.PrefetchUnseen, s.PrefetchEvicted)
	}
}
