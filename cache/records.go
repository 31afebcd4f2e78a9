package cache

// Object records at start-up: read once in the background, and each object
// made on first use from its own record.
//
// Open reads no object record: a million of them, each made an object,
// would delay the mount by seconds and hold a gigabyte. Instead a
// background scan (loadIndex) of a
// snapshot of the index taken at Open adds up what the capacity accounting
// and the pack files need (the bytes cached, each pack's live slots) and
// tells the policy what is cached, keeping nothing per object; an object
// is made from its record (materialize) when something first asks for it.
//
// Accounting: the scan adds the CachedBytes of every record in the
// snapshot to used, and each record's slot to its pack's live count, once.
// An object made from a record starts with that record's CachedBytes and
// slot without counting them again; whatever it does after (store, drop,
// evict) counts its own change. So the sum is right whichever comes first,
// the scan or the object's changes, provided an object is made from the
// snapshot's record at most once. The record only changes through the
// object made from it, so a record read later is the snapshot's, except
// after an eviction, whose delete is queued for the committer: an evicted
// object's ID stays in the object table's forgotten until its delete is committed, and
// materialize doesn't believe a record of a forgotten ID.
//
// Until the scan is done (startupScan.ready), used is short of the truth: what
// decides by it starts the scan if need be and waits (reserve, and with it
// every store and eviction; Used, Stats, EvictStale). Reads of cached data
// don't wait. A daemon starts the scan once its mounts are up
// (StartIndexScan): counting a million records takes the CPU a mount
// being set up would otherwise have.

import (
	"sort"

	"github.com/dsmount/dsmount/cache/internal/index"
	"github.com/dsmount/dsmount/cache/internal/record"
	"github.com/dsmount/dsmount/cache/internal/store"
)

// recordSummary is what the scan keeps of a record it read: what the
// policy is told.
type recordSummary struct {
	id       ObjectID
	cached   int64
	accessed int64
}

// StartIndexScan starts the start-up scan of the object records in the
// background, if it has not started. Whatever needs its count starts it
// too (and waits); a daemon starts it once its mounts are up, so that a
// CPU-second of counting a million records doesn't delay them.
func (c *Cache) StartIndexScan() {
	c.scan.once.Do(func() {
		c.maintenance.Add(1)
		go c.loadIndex(c.scan.snap)
	})
}

// loadIndex is the start-up scan; it runs on the maintenance group and
// closes c.scan.ready when done (or when Close cancels it). snap was taken
// before anything could write.
func (c *Cache) loadIndex(snap *index.Snapshot) {
	defer c.maintenance.Done()
	defer close(c.scan.ready)
	defer snap.Discard()
	var used int64
	live := make(map[uint64]int64)
	var cached []recordSummary
	var ids []ObjectID // every record's, for c.scan.recorded
	tell := StartupTell(c.policy)
	done := snap.ScanObjects(func() bool { return c.ctx.Err() != nil }, func(rid record.ID, rec *record.Object, err error) {
		s := recordSummary{id: ObjectID(rid)}
		ids = append(ids, s.id)
		if err != nil {
			c.log.Warn("cache: skipping corrupt object record", "id", s.id, "err", err)
			return
		}
		if rec.CachedBytes == 0 {
			return
		}
		used += rec.CachedBytes
		if rec.Pack != 0 {
			live[rec.Pack]++
		}
		switch tell {
		case TellByAccess:
			s.cached, s.accessed = rec.CachedBytes, rec.Accessed
			cached = append(cached, s)
		case TellAnyOrder:
			c.policy.Added(s.id, rec.CachedBytes)
		}
	})
	if !done {
		return
	}
	c.budget.used.Add(used)
	if c.budget.capFunc != nil {
		c.budget.capacity.Store(max(c.budget.capFunc(c.budget.used.Load()), 0))
	}
	for id, n := range live {
		c.disk.packs.Known(id).AddLive(n)
	}
	c.disk.packs.RemoveUnused()
	c.scan.recorded = newIDFilter(ids)
	// Oldest access first, as a recency policy wants to hear them.
	sort.Slice(cached, func(i, j int) bool { return cached[i].accessed < cached[j].accessed })
	for _, s := range cached {
		c.policy.Added(s.id, s.cached)
	}
}

// awaitIndex waits for the start-up scan, starting it if need be: used is
// complete after it.
func (c *Cache) awaitIndex() {
	c.StartIndexScan()
	<-c.scan.ready
}

// mayHaveRecord is false when id surely has no record to believe: the
// scan is done, its snapshot held none for id, and id is not in memory
// (a record written since is an object's in memory, or an evicted one's,
// which is not believed either).
func (c *Cache) mayHaveRecord(id ObjectID) bool {
	select {
	case <-c.scan.ready:
		return c.scan.recorded == nil || c.scan.recorded.mayHave(id)
	default:
		return true
	}
}

// readRecord reads id's object record (index.DB.Object).
func (c *Cache) readRecord(id ObjectID) (rec record.Object, found bool, err error) {
	return c.disk.index.Object(record.ID(id))
}

// materialize returns the object for id: the one in memory, or one made
// from its record, or (with meta, which then describes id) a new empty
// one; nil, without meta, when id has no record. Chunk records are read
// later (load).
func (c *Cache) materialize(id ObjectID, meta *record.Meta) (*object, error) {
	for {
		c.table.mu.Lock()
		o, pruned := c.table.objects[id], c.table.pruned
		c.table.mu.Unlock()
		if o != nil {
			return o, nil
		}
		var rec record.Object
		found := false
		if c.mayHaveRecord(id) {
			var err error
			if rec, found, err = c.readRecord(id); err != nil {
				return nil, err
			}
		}
		c.table.mu.Lock()
		if o := c.table.objects[id]; o != nil {
			c.table.mu.Unlock()
			return o, nil
		}
		if c.table.pruned != pruned {
			// A delete committed while the record was read: the
			// record may be the one deleted, and its ID no longer
			// marked forgotten.
			c.table.mu.Unlock()
			continue
		}
		if _, ok := c.table.forgotten[id]; ok {
			found = false
		}
		switch {
		case found:
			o = c.newObject(id, rec.Meta)
			if rec.Pack != 0 && rec.CachedBytes > 0 {
				o.loc.Store(&store.Slot{Pack: c.disk.packs.Known(rec.Pack), Off: rec.PackOff})
			}
			o.cached = rec.CachedBytes
			o.durable.Store(rec.CachedBytes)
			o.accessed.Store(rec.Accessed)
		case meta != nil:
			o = c.newObject(id, *meta)
			o.loaded = true // no records in the index
			o.chunks = make([]chunk, meta.NumChunks())
		default:
			c.table.mu.Unlock()
			return nil, nil
		}
		c.table.objects[id] = o
		c.table.mu.Unlock()
		return o, nil
	}
}

// recordsDeleted hears from the committer that an evicted object's
// records are gone from the index: a record read from now on is not its.
func (c *Cache) recordsDeleted(o *object) {
	c.table.mu.Lock()
	defer c.table.mu.Unlock()
	if c.table.forgotten[o.id] == o {
		delete(c.table.forgotten, o.id)
		c.table.pruned++
	}
}

// sourceRecords lists the IDs of source's objects that have records in the
// index.
func (c *Cache) sourceRecords(source string) ([]ObjectID, error) {
	rids, err := c.disk.index.SourceObjects(source)
	ids := make([]ObjectID, len(rids))
	for i, id := range rids {
		ids[i] = ObjectID(id)
	}
	return ids, err
}
