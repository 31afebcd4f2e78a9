package cache

// Object records at start-up: read once in the background, and each object
// made on first use from its own record.
//
// A cache of ImageNet holds 1.28M object records. Reading them all at Open
// and keeping an object for each took 17 s and 1.3 GB before the daemon
// could mount. Now Open reads none: a background scan (loadIndex) of a
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
// object's ID stays in Cache.forgotten until its delete is committed, and
// materialize doesn't believe a record of a forgotten ID.
//
// Until the scan is done (Cache.ready), used is short of the truth: what
// decides by it starts the scan if need be and waits (reserve, and with it
// every store and eviction; Used, Stats, EvictStale). Reads of cached data
// don't wait. A daemon starts the scan once its mounts are up
// (StartIndexScan): counting 1.28M records is a CPU-second, which on a
// loaded node would otherwise be taken from the mount.

import (
	"errors"
	"fmt"
	"sort"

	"github.com/dgraph-io/badger/v4"
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
	c.scanOnce.Do(func() {
		c.maintenance.Add(1)
		go c.loadIndex(c.snap)
	})
}

// loadIndex is the start-up scan; it runs on the maintenance group and
// closes c.ready when done (or when Close cancels it). snap is a read
// transaction opened before anything could write.
func (c *Cache) loadIndex(snap *badger.Txn) {
	defer c.maintenance.Done()
	defer close(c.ready)
	defer snap.Discard()
	var used int64
	live := make(map[uint64]int64)
	var cached []recordSummary
	var ids []ObjectID // every record's, for c.recorded
	tell := StartupTell(c.policy)
	// Values not prefetched: read in place, they cost no copy.
	it := snap.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixObject}})
	n := 0
	for it.Rewind(); it.Valid(); it.Next() {
		if n++; n%4096 == 0 && c.ctx.Err() != nil {
			it.Close()
			return
		}
		item := it.Item()
		if len(item.Key()) != 17 {
			continue
		}
		var s recordSummary
		copy(s.id[:], item.Key()[1:])
		ids = append(ids, s.id)
		var rec objectRecord
		if err := item.Value(rec.unmarshalCounts); err != nil {
			c.log.Warn("cache: skipping corrupt object record", "id", s.id, "err", err)
			continue
		}
		if rec.CachedBytes == 0 {
			continue
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
	}
	it.Close()
	c.used.Add(used)
	if c.capFunc != nil {
		c.capacity.Store(max(c.capFunc(c.used.Load()), 0))
	}
	for id, n := range live {
		c.packs.known(id).live.Add(n)
	}
	c.packs.removeUnused()
	c.recorded = newIDFilter(ids)
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
	<-c.ready
}

// mayHaveRecord is false when id surely has no record to believe: the
// scan is done, its snapshot held none for id, and id is not in memory
// (a record written since is an object's in memory, or an evicted one's,
// which is not believed either).
func (c *Cache) mayHaveRecord(id ObjectID) bool {
	select {
	case <-c.ready:
		return c.recorded == nil || c.recorded.mayHave(id)
	default:
		return true
	}
}

// readRecord reads id's object record. A corrupt record reads as none, as
// the scan skips it: its object starts empty and its chunks are fetched
// again.
func (c *Cache) readRecord(id ObjectID) (rec objectRecord, found bool, err error) {
	err = c.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(objectKey(id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := item.Value(rec.unmarshal); err != nil {
			c.log.Warn("cache: ignoring corrupt object record", "id", id, "err", err)
			return nil
		}
		found = true
		return nil
	})
	if err != nil {
		return objectRecord{}, false, fmt.Errorf("cache: read object record: %w", err)
	}
	return rec, found, nil
}

// materialize returns the object for id: the one in memory, or one made
// from its record, or (with meta, which then describes id) a new empty
// one; nil, without meta, when id has no record. Chunk records are read
// later (load).
func (c *Cache) materialize(id ObjectID, meta *objectMeta) (*object, error) {
	for {
		c.mu.Lock()
		o, pruned := c.objects[id], c.pruned
		c.mu.Unlock()
		if o != nil {
			return o, nil
		}
		var rec objectRecord
		found := false
		if c.mayHaveRecord(id) {
			var err error
			if rec, found, err = c.readRecord(id); err != nil {
				return nil, err
			}
		}
		c.mu.Lock()
		if o := c.objects[id]; o != nil {
			c.mu.Unlock()
			return o, nil
		}
		if c.pruned != pruned {
			// A delete committed while the record was read: the
			// record may be the one deleted, and its ID no longer
			// marked forgotten.
			c.mu.Unlock()
			continue
		}
		if _, ok := c.forgotten[id]; ok {
			found = false
		}
		switch {
		case found:
			o = c.newObject(id, rec.objectMeta)
			if rec.Pack != 0 && rec.CachedBytes > 0 {
				o.loc.Store(&slot{p: c.packs.known(rec.Pack), off: rec.PackOff})
			}
			o.cached = rec.CachedBytes
			o.durable.Store(rec.CachedBytes)
			o.accessed.Store(rec.Accessed)
		case meta != nil:
			o = c.newObject(id, *meta)
			o.loaded = true // no records in the index
			o.chunks = make([]chunk, meta.numChunks())
		default:
			c.mu.Unlock()
			return nil, nil
		}
		c.objects[id] = o
		c.mu.Unlock()
		return o, nil
	}
}

// recordsDeleted hears from the committer that an evicted object's
// records are gone from the index: a record read from now on is not its.
func (c *Cache) recordsDeleted(o *object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.forgotten[o.id] == o {
		delete(c.forgotten, o.id)
		c.pruned++
	}
}

// sourceRecords lists the IDs of source's objects that have records in the
// index.
func (c *Cache) sourceRecords(source string) ([]ObjectID, error) {
	var ids []ObjectID
	err := c.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixObject}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			if len(item.Key()) != 17 {
				continue
			}
			var match bool
			if err := item.Value(func(v []byte) error { match = recordSource(v) == source; return nil }); err != nil {
				return err
			}
			if match {
				var id ObjectID
				copy(id[:], item.Key()[1:])
				ids = append(ids, id)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cache: list object records: %w", err)
	}
	return ids, nil
}
