package readahead

import (
	"sort"
	"sync"

	"github.com/dsmount/dsmount/cache"
)

// candidates is how many of the farthest cached objects a ranking keeps.
// Victims are taken from the top of the ranking until it runs out or goes
// stale; each is re-checked against the incoming object's distance first.
const candidates = 512

// orderPolicy is Belady's rule over the declared orders (see the package
// doc). It implements cache.Policy.
//
// Ranking every cached object on each eviction would cost O(cached × jobs);
// instead a ranking of the farthest candidates is kept and rebuilt when a
// declaration changes the orders or the jobs have read more than 1% of
// what they declared since it was built. Between rebuilds, all distances of
// one job shrink alike, so the ranking stays right for one job and close
// for several.
type orderPolicy struct {
	r        *Registry
	fallback cache.Policy

	mu       sync.Mutex
	resident map[cache.ObjectID]struct{}
	ranked   []ranked // farthest first; undeclared ones first of all
	rankGen  uint64
	rankRead uint64
}

type ranked struct {
	id       cache.ObjectID
	dist     int64
	declared bool
}

var _ cache.Policy = (*orderPolicy)(nil)

func (p *orderPolicy) Added(id cache.ObjectID, n int64) {
	p.mu.Lock()
	p.resident[id] = struct{}{}
	p.mu.Unlock()
	p.fallback.Added(id, n)
}

func (p *orderPolicy) Accessed(id cache.ObjectID) { p.fallback.Accessed(id) }

// StartupTell: the resident set has no order; the fallback may want one.
func (p *orderPolicy) StartupTell() cache.Tell {
	if cache.StartupTell(p.fallback) == cache.TellByAccess {
		return cache.TellByAccess
	}
	return cache.TellAnyOrder
}

func (p *orderPolicy) Removed(id cache.ObjectID) {
	p.mu.Lock()
	delete(p.resident, id)
	p.mu.Unlock()
	p.fallback.Removed(id)
	// An item fetched ahead and evicted before its job read it cost a GET
	// for nothing: counted per job (JobStats.PrefetchEvicted).
	// One needed within a job's window will cost that job a miss soon.
	r := p.r
	r.mu.Lock()
	for _, j := range r.allJobs() {
		if _, ok := j.fetchedAhead[id]; ok {
			j.prefetchEvicted++
			delete(j.fetchedAhead, id)
		}
		if d, ok := j.distance(id); ok && d <= int64(j.window) {
			j.evictedNeeded++
		}
	}
	r.mu.Unlock()
}

// Victim returns the cached object needed farthest in the future, if it is
// needed later than incoming.
func (p *orderPolicy) Victim(incoming cache.ObjectID, n int64) (cache.ObjectID, bool) {
	r := p.r
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !r.hasJobs() || r.pc.absorbsEpochs() {
		return p.fallback.Victim(incoming, n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.farthest(incoming)
	if !ok || !p.evicts(c, incoming) {
		return cache.ObjectID{}, false
	}
	p.ranked = p.ranked[1:]
	return c.id, true
}

// admits reports whether Victim would make room for id (prefetch asks
// before fetching, so it never fetches what the cache would not keep),
// and needed whether any job's declared orders still need id. r.mu is held
// (read).
func (p *orderPolicy) admits(id cache.ObjectID) (ok, needed bool) {
	din, declared := p.r.distance(id)
	if !declared {
		return false, false
	}
	if !p.r.full() {
		return true, true
	}
	if p.r.pc.absorbsEpochs() {
		return false, true // fill-and-hold: nothing is evicted for it
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.farthest(id)
	return ok && (!c.declared || c.dist > din), true
}

// farthest is the cached object, other than incoming, at the head of the
// ranking, with its distance as of now; it drops stale heads (objects no
// longer cached) and rebuilds a stale or exhausted ranking once. p.mu and
// r.mu (read) are held.
func (p *orderPolicy) farthest(incoming cache.ObjectID) (ranked, bool) {
	for attempt := 0; attempt < 2; attempt++ {
		if attempt == 1 || p.stale() {
			p.rank()
		}
		for len(p.ranked) > 0 {
			c := p.ranked[0]
			if _, ok := p.resident[c.id]; ok && c.id != incoming {
				c.dist, c.declared = p.r.distance(c.id)
				return c, true
			}
			p.ranked = p.ranked[1:]
		}
	}
	return ranked{}, false
}

// evicts: Belady's rule. c goes if no declared order needs it, or if it is
// needed later than incoming (which, needed never, keeps what is cached).
// admits applies the same rule with incoming's distance already known.
// r.mu is held (read).
func (p *orderPolicy) evicts(c ranked, incoming cache.ObjectID) bool {
	if !c.declared {
		return true
	}
	din, inDeclared := p.r.distance(incoming)
	return inDeclared && c.dist > din
}

// stale reports whether the ranking must be rebuilt; p.mu and r.mu held.
func (p *orderPolicy) stale() bool {
	if len(p.ranked) == 0 || p.rankGen != p.r.gen.Load() {
		return true
	}
	declared := 0
	for _, j := range p.r.allJobs() {
		declared += len(j.cur.items)
	}
	return p.r.reads.Load()-p.rankRead > uint64(max(16, declared/100))
}

// rank rebuilds the ranking; p.mu and r.mu held.
func (p *orderPolicy) rank() {
	p.rankGen, p.rankRead = p.r.gen.Load(), p.r.reads.Load()
	all := make([]ranked, 0, len(p.resident))
	for id := range p.resident {
		d, declared := p.r.distance(id)
		all = append(all, ranked{id: id, dist: d, declared: declared})
	}
	sort.Slice(all, func(a, b int) bool {
		if all[a].declared != all[b].declared {
			return !all[a].declared
		}
		return all[a].dist > all[b].dist
	})
	if len(all) > candidates {
		all = all[:candidates]
	}
	p.ranked = all
}
