package cache

import (
	"time"

	"github.com/dsmount/dsmount/backend"
)

// EvictStale drops the cached versions of source's objects that objs (a
// fresh, complete listing of source) no longer names: they can't be read
// through a mount built from that listing, and under fill-and-hold they
// would otherwise hold their space forever. It returns how many it dropped.
func (c *Cache) EvictStale(source string, objs *backend.Listing) int {
	// The source's cached objects, few or many, are matched against the
	// listing, not the other way: a set of a million listed IDs would
	// cost the daemon tens of megabytes for a moment at every mount.
	// They are those in memory and those with records in the index, of
	// which most are not in memory after a restart (records.go).
	c.awaitIndex()
	cached := make(map[ObjectID]struct{})
	ids, err := c.sourceRecords(source)
	if err != nil {
		c.log.Warn("cache: can't list the cached objects to drop those that changed", "source", source, "err", err)
	}
	for _, id := range ids {
		cached[id] = struct{}{}
	}
	c.mu.Lock()
	for id, o := range c.objects {
		if o.meta.Source == source {
			cached[id] = struct{}{}
		}
	}
	c.mu.Unlock()
	for i := 0; i < objs.Len() && len(cached) > 0; i++ {
		m := metaOf(source, objs.At(i), c.chunkSize)
		delete(cached, m.id())
	}
	stale := make([]ObjectID, 0, len(cached))
	for id := range cached {
		stale = append(stale, id)
	}
	n := 0
	for _, id := range stale {
		if c.evict(id) {
			n++
		}
	}
	return n
}

// valueLogGCInterval paces badger's value-log garbage collection, which is
// manual. Most records are small and live in the LSM tree; listing pages go
// to the value log and leave garbage behind when a listing is replaced.
const valueLogGCInterval = 10 * time.Minute

// runValueLogGC is the Cache's maintenance goroutine; it stops at Close.
func (c *Cache) runValueLogGC() {
	defer c.maintenance.Done()
	tick := time.NewTicker(valueLogGCInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C:
			// Each successful run rewrote one file; go again while it pays.
			// A rewrite is an index write: not without room for one.
			for c.ctx.Err() == nil && !c.space.isFull() && c.indexRoom() && c.db.RunValueLogGC(0.5) == nil {
			}
		}
	}
}

// indexRoom reports whether the index may be written to now: the room a
// write may take is there and its log files are allocated (see
// indexFiles). Writers outside the committer ask it first.
func (c *Cache) indexRoom() bool {
	return c.commits == nil || c.commits.index == nil || c.commits.index.prepare()
}
