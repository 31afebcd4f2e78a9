package cache

import (
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
	c.table.mu.Lock()
	for id, o := range c.table.objects {
		if o.meta.Source == source {
			cached[id] = struct{}{}
		}
	}
	c.table.mu.Unlock()
	for i := 0; i < objs.Len() && len(cached) > 0; i++ {
		m := metaOf(source, objs.At(i), c.chunkSize)
		delete(cached, ObjectID(m.ID()))
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
