package cache

import (
	"container/list"
	"sync"
)

// Policy decides what the cache keeps when it is full. The cache tells it
// what is cached and what is read; it names victims. Implementations must be
// safe for concurrent use and must not call back into the Cache.
type Policy interface {
	// Added: n more bytes of id are now cached.
	Added(id ObjectID, n int64)
	// Accessed: cached bytes of id were just served.
	Accessed(id ObjectID)
	// Removed: id is no longer cached.
	Removed(id ObjectID)
	// Victim names a cached object to evict so that n bytes of incoming can
	// be cached, or returns false to leave the cache as it is and stream
	// incoming's bytes through uncached.
	Victim(incoming ObjectID, n int64) (ObjectID, bool)
}

// fillAndHold keeps whatever is cached and admits new data only while there
// is room. Under shuffled epochs over a dataset larger than the cache it hits
// at the cached fraction, which is optimal for one job (no policy can
// know which item of a fresh shuffle comes next), where LRU and FIFO
// thrash (docs/multijob.md).
type fillAndHold struct{}

// NewFillAndHold returns the default policy: never evict, stream what does
// not fit.
func NewFillAndHold() Policy { return fillAndHold{} }

func (fillAndHold) Added(ObjectID, int64)                   {}
func (fillAndHold) Accessed(ObjectID)                       {}
func (fillAndHold) Removed(ObjectID)                        {}
func (fillAndHold) Victim(ObjectID, int64) (ObjectID, bool) { return ObjectID{}, false }

// StartupTell: fill-and-hold keeps nothing to be told.
func (fillAndHold) StartupTell() Tell { return TellNothing }

// Tell is how a restart's scan of the index tells a Policy what is cached
// (Added for each object): see StartupHint.
type Tell int

const (
	// TellByAccess: oldest access first, which a recency policy needs.
	// The scan collects every cached object and sorts them first.
	TellByAccess Tell = iota
	// TellAnyOrder: as the records are read.
	TellAnyOrder
	// TellNothing: the policy keeps no state of what is cached.
	TellNothing
)

// StartupHint is implemented by a Policy that needs less than TellByAccess
// (the default) at a restart: for a million cached objects, collecting
// and sorting them costs tens of megabytes and a CPU-second.
type StartupHint interface {
	StartupTell() Tell
}

// StartupTell is how p wants to be told what a restart finds cached.
func StartupTell(p Policy) Tell {
	if h, ok := p.(StartupHint); ok {
		return h.StartupTell()
	}
	return TellByAccess
}

// lru evicts the least recently accessed object. Kept for comparison and for
// workloads with real recency (not shuffled epochs).
type lru struct {
	mu    sync.Mutex
	order *list.List // front: most recent; values are ObjectID
	elems map[ObjectID]*list.Element
}

// NewLRU returns a least-recently-used policy.
func NewLRU() Policy {
	return &lru{order: list.New(), elems: make(map[ObjectID]*list.Element)}
}

func (p *lru) Added(id ObjectID, _ int64) { p.Accessed(id) }

func (p *lru) Accessed(id ObjectID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.elems[id]; ok {
		p.order.MoveToFront(e)
		return
	}
	p.elems[id] = p.order.PushFront(id)
}

func (p *lru) Removed(id ObjectID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.elems[id]; ok {
		p.order.Remove(e)
		delete(p.elems, id)
	}
}

func (p *lru) Victim(incoming ObjectID, _ int64) (ObjectID, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for e := p.order.Back(); e != nil; e = e.Prev() {
		if id := e.Value.(ObjectID); id != incoming {
			return id, true
		}
	}
	return ObjectID{}, false
}

// PolicyByName maps a --cache-policy value to a Policy.
func PolicyByName(name string) (Policy, bool) {
	switch name {
	case "", "fill-and-hold":
		return NewFillAndHold(), true
	case "lru":
		return NewLRU(), true
	}
	return nil, false
}
