package index

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/dsmount/dsmount/cache/internal/record"
)

// Snapshot is the index as it was when taken: the start-up scan reads it
// while the cache writes on.
type Snapshot struct{ txn *badger.Txn }

// Snapshot takes a snapshot of the index; Discard it when done.
func (x *DB) Snapshot() *Snapshot { return &Snapshot{txn: x.db.NewTransaction(false)} }

// Discard releases the snapshot.
func (s *Snapshot) Discard() { s.txn.Discard() }

// ScanObjects calls fn with every object record of the snapshot, decoded
// without its strings (record.Object.UnmarshalCounts), or with the error
// that its decoding met. It stops early, returning false, when stop says
// so (asked every few thousand records).
func (s *Snapshot) ScanObjects(stop func() bool, fn func(id record.ID, rec *record.Object, err error)) bool {
	// Values not prefetched: read in place, they cost no copy.
	it := s.txn.NewIterator(badger.IteratorOptions{Prefix: record.ObjectPrefix()})
	defer it.Close()
	n := 0
	for it.Rewind(); it.Valid(); it.Next() {
		if n++; n%4096 == 0 && stop() {
			return false
		}
		item := it.Item()
		id, ok := record.ObjectKeyID(item.Key())
		if !ok {
			continue
		}
		var rec record.Object
		err := item.Value(rec.UnmarshalCounts)
		fn(id, &rec, err)
	}
	return true
}

// Object reads id's object record. A corrupt record reads as none (and is
// logged), as the scan skips it: its object starts empty and its chunks
// are fetched again.
func (x *DB) Object(id record.ID) (rec record.Object, found bool, err error) {
	err = x.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(record.ObjectKey(id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := item.Value(rec.Unmarshal); err != nil {
			x.log.Warn("cache: ignoring corrupt object record", "id", id, "err", err)
			return nil
		}
		found = true
		return nil
	})
	if err != nil {
		return record.Object{}, false, fmt.Errorf("cache: read object record: %w", err)
	}
	return rec, found, nil
}

// Chunks calls fn with each of id's chunk records that decodes.
func (x *DB) Chunks(id record.ID, fn func(idx int, rec record.Chunk)) error {
	err := x.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 64, Prefix: record.ChunkPrefix(id)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			idx, ok := record.ChunkKeyIndex(it.Item().Key())
			if !ok {
				continue
			}
			var rec record.Chunk
			if err := it.Item().Value(rec.Unmarshal); err != nil {
				continue
			}
			fn(idx, rec)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cache: load chunk records: %w", err)
	}
	return nil
}

// SourceObjects lists the IDs of source's objects that have records.
func (x *DB) SourceObjects(source string) ([]record.ID, error) {
	var ids []record.ID
	err := x.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: record.ObjectPrefix()})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			id, ok := record.ObjectKeyID(item.Key())
			if !ok {
				continue
			}
			var match bool
			if err := item.Value(func(v []byte) error { match = record.SourceOf(v) == source; return nil }); err != nil {
				return err
			}
			if match {
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

// DeleteObject removes an object's chunk records, then its object record,
// so an interrupted deletion never leaves chunks without an owner that the
// start-up scan would count. Its chunk records go in batches of their own:
// a large object has more of them than one transaction may hold.
func (x *DB) DeleteObject(id record.ID) error {
	var keys [][]byte
	err := x.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: record.ChunkPrefix(id)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		return nil
	})
	if err != nil {
		return err
	}
	wb := x.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return err
		}
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	return x.db.Update(func(txn *badger.Txn) error { return txn.Delete(record.ObjectKey(id)) })
}

// Writer writes records in one Update or Load.
type Writer struct {
	w interface {
		Set(k, v []byte) error
		Delete(k []byte) error
	}
}

// SetChunk writes chunk idx's record.
func (w Writer) SetChunk(id record.ID, idx int, rec record.Chunk) error {
	return w.w.Set(record.ChunkKey(id, idx), rec.Marshal())
}

// DeleteChunk deletes chunk idx's record.
func (w Writer) DeleteChunk(id record.ID, idx int) error {
	return w.w.Delete(record.ChunkKey(id, idx))
}

// SetObject writes an object record.
func (w Writer) SetObject(id record.ID, rec *record.Object) error {
	return w.w.Set(record.ObjectKey(id), rec.Marshal())
}

// SetObjectBytes writes an object record's bytes as given: for tests and
// tools that write one as an older dsmount did.
func (w Writer) SetObjectBytes(id record.ID, b []byte) error {
	return w.w.Set(record.ObjectKey(id), b)
}

// Update runs fn's writes as one transaction: all of them are committed,
// or none.
func (x *DB) Update(fn func(Writer) error) error {
	return x.db.Update(func(txn *badger.Txn) error { return fn(Writer{w: txn}) })
}

// Load runs fn's writes in batches, as many as they take, with no
// all-or-nothing guarantee: for bulk writes (benchmarks filling an index).
func (x *DB) Load(fn func(Writer) error) error {
	wb := x.db.NewWriteBatch()
	defer wb.Cancel()
	if err := fn(Writer{w: wb}); err != nil {
		return err
	}
	return wb.Flush()
}

// RunValueLogGC collects the value log's garbage every interval until ctx
// ends: badger's is manual. Most records are small and live in the LSM
// tree; listing pages go to the value log and leave garbage behind when a
// listing is replaced. full says the cache filesystem is short of room:
// a rewrite is an index write.
func (x *DB) RunValueLogGC(ctx context.Context, interval time.Duration, full func() bool) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			// Each successful run rewrote one file; go again while it pays.
			for ctx.Err() == nil && !full() && x.Prepare() && x.db.RunValueLogGC(0.5) == nil {
			}
		}
	}
}
