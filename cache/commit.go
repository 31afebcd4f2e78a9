package cache

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"
)

type opKind uint8

const (
	opAddChunk     opKind = iota // chunk bytes are in the file; make them durable, then record
	opDropChunk                  // chunk failed verification; forget its record
	opDeleteObject               // object evicted; forget all its records
	opTouch                      // object read; persist its access time
	opBarrier                    // nothing to write: done is closed once the ops before it are committed
)

type commitOp struct {
	kind opKind
	o    *object
	idx  int
	rec  chunkRecord
	slot *slot         // opAddChunk of a packed object: where its bytes were written
	done chan struct{} // opBarrier
	// crc is the CRC32C of the chunk's first check block (opAddChunk),
	// kept when rec is cleared.
	crc uint32
	// syncFailed: the add's bytes could not be made durable (opAddChunk).
	syncFailed bool
}

// path is the file an add's bytes were written to, for messages.
func (op *commitOp) path() string {
	if op.slot != nil {
		return op.slot.p.path
	}
	return op.o.path
}

// committer turns written chunks into index records, in groups: it syncs the
// files and directories of a batch, then commits the batch's records in one
// badger transaction. Syncing before recording is the crash-safety invariant;
// grouping amortises the syncs. It is the only writer of chunk and object
// records, so records are applied in the order ops were sent.
type committer struct {
	db      *badger.DB
	log     *slog.Logger
	dataDir *os.File // the cache's data dir, for syncfs; may be nil
	packs   *packStore
	index   *indexFiles
	skipped rateLimitedLog
	ops     chan commitOp
	wg      sync.WaitGroup
	// syncFailed hears of adds whose bytes could not be synced; it must
	// not block on object locks (see dropper).
	syncFailed func([]commitOp)
	// deleted hears of an evicted object whose records are deleted.
	deleted func(*object)

	// closeMu fences send against close: a read or eviction racing with
	// Cache.Close may still try to queue an op, which is then dropped
	// (losing a record is allowed; a send on a closed channel is not).
	closeMu sync.RWMutex
	closed  bool
}

const (
	maxBatch = 512
	// batchLinger is how long a batch gathers after its first op. A cold
	// epoch read through a mount stores ~1,000 files/s: 5 ms made batches
	// of ~5 files, each synced file by file (fdatasync and a directory
	// fsync each); 25 ms makes them large enough for one syncfs. A record
	// committed later only risks being forgotten by a crash.
	batchLinger = 25 * time.Millisecond
)

func startCommitter(db *badger.DB, dataDir string, packs *packStore, index *indexFiles, log *slog.Logger, syncFailed func([]commitOp), deleted func(*object)) *committer {
	cm := &committer{db: db, log: log, packs: packs, index: index, ops: make(chan commitOp, 4096), syncFailed: syncFailed, deleted: deleted}
	if d, err := os.Open(dataDir); err == nil {
		cm.dataDir = d
	}
	cm.wg.Add(1)
	go cm.run()
	return cm
}

// send queues op; after close it drops it. It never takes a lock the
// committer goroutine waits on, so callers may hold object locks.
func (cm *committer) send(op commitOp) {
	cm.closeMu.RLock()
	defer cm.closeMu.RUnlock()
	if !cm.closed {
		cm.ops <- op
	}
}

// close commits what is queued and stops the committer.
func (cm *committer) close() {
	cm.closeMu.Lock()
	if !cm.closed {
		cm.closed = true
		close(cm.ops)
	}
	cm.closeMu.Unlock()
	cm.wg.Wait()
	if cm.dataDir != nil {
		cm.dataDir.Close()
	}
}

func (cm *committer) run() {
	defer cm.wg.Done()
	for first := range cm.ops {
		batch := []commitOp{first}
		timer := time.NewTimer(batchLinger)
	gather:
		for len(batch) < maxBatch {
			select {
			case op, ok := <-cm.ops:
				if !ok {
					break gather
				}
				batch = append(batch, op)
			case <-timer.C:
				break gather
			}
		}
		timer.Stop()
		cm.commit(batch)
	}
}

// barrier returns once every op sent before it has been committed (or
// dropped): tests use it to know what the index holds.
func (cm *committer) barrier() {
	done := make(chan struct{})
	cm.closeMu.RLock()
	if cm.closed {
		cm.closeMu.RUnlock()
		return
	}
	cm.ops <- commitOp{kind: opBarrier, done: done}
	cm.closeMu.RUnlock()
	<-done
}

func (cm *committer) commit(batch []commitOp) {
	defer func() {
		for _, op := range batch {
			if op.kind == opBarrier {
				close(op.done)
			}
		}
	}()
	if cm.index != nil && !cm.index.prepare() {
		// The index has no room to log the batch: a write there would
		// fault. The chunks stay valid in memory, just not remembered
		// across a restart.
		cm.skipped.warn(cm.log, "cache: the cache filesystem is full; index records are not written", "ops", len(batch))
		return
	}
	cm.syncFiles(batch)
	var failed []commitOp
	for _, op := range batch {
		if op.syncFailed {
			failed = append(failed, op)
		}
	}
	if len(failed) > 0 && cm.syncFailed != nil {
		cm.syncFailed(failed)
	}
	// Evictions first, each in batches of its own: a large object has more
	// chunk records than one transaction may hold. A later incarnation's
	// records, queued after the eviction, are written after it below.
	for _, op := range batch {
		if op.kind == opDeleteObject {
			if err := deleteObjectRecords(cm.db, op.o.id); err != nil {
				cm.log.Warn("cache: deleting an evicted object's records failed; its space is counted until it is read again", "key", op.o.meta.Key, "err", err)
			} else if cm.deleted != nil {
				cm.deleted(op.o)
			}
		}
	}

	// Byte deltas per object, applied to o.durable only after the commit.
	delta := make(map[*object]int64)
	// Where each packed object's recorded chunk is: the slot of its last
	// add in the batch, else wherever it is now.
	slots := make(map[*object]*slot)
	err := cm.db.Update(func(txn *badger.Txn) error {
		for _, op := range batch {
			if op.o == nil {
				continue
			}
			switch op.kind {
			case opAddChunk:
				if !op.synced() {
					continue
				}
				if err := txn.Set(chunkKey(op.o.id, op.idx), op.rec.marshal()); err != nil {
					return err
				}
				delta[op.o] += int64(op.rec.Len)
				if op.slot != nil {
					slots[op.o] = op.slot
				}
			case opDropChunk:
				if err := txn.Delete(chunkKey(op.o.id, op.idx)); err != nil {
					return err
				}
				delta[op.o] -= int64(op.rec.Len)
			case opDeleteObject:
				delete(delta, op.o)
			case opTouch:
				if !op.o.gone.Load() {
					delta[op.o] += 0 // rewrites the record with o.accessed
				}
			}
		}
		for o, d := range delta {
			// Clamped: a drop of a chunk whose add never committed would
			// otherwise go below zero. loadChunks recounts from chunk records.
			rec := objectRecord{objectMeta: o.meta, CachedBytes: min(max(o.durable.Load()+d, 0), o.meta.Size), Accessed: o.accessed.Load()}
			sl := slots[o]
			if sl == nil {
				sl = o.loc.Load()
			}
			if sl != nil {
				// A record naming a slot whose bytes are not durable, or no
				// longer there, is caught by the CRC32C check of the first
				// read after a restart.
				rec.Pack, rec.PackOff = sl.p.id, sl.off
			}
			if err := txn.Set(objectKey(o.id), rec.marshal()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		// The chunks stay valid in memory for this process; they are just
		// not remembered across a restart.
		cm.log.Warn("cache: index commit failed; recent chunks won't survive a restart", "err", err)
		return
	}
	for o, d := range delta {
		o.durable.Add(d)
	}
}

// syncFiles makes the bytes of every added chunk durable: fdatasync each
// pack and file once, and fsync the directory of each that may be new. An
// op whose bytes can't be synced (evicted meanwhile, I/O error) is left out
// of the commit by clearing its record.
func (cm *committer) syncFiles(batch []commitOp) {
	cm.syncPacks(batch)
	// One sync per distinct file, run in parallel: the device queues them.
	var paths []string
	index := make(map[string]*object)
	for i := range batch {
		op := &batch[i]
		if op.kind != opAddChunk || op.o.gone.Load() {
			if op.kind == opAddChunk {
				op.rec = chunkRecord{}
			}
			continue
		}
		if op.slot != nil {
			continue // synced with its pack
		}
		if _, seen := index[op.o.path]; !seen {
			index[op.o.path] = op.o
			paths = append(paths, op.o.path)
		}
	}
	synced := make(map[string]bool, len(paths))
	dirs := make(map[string]bool)
	if len(paths) >= syncfsThreshold && cm.syncfs() {
		// One syncfs makes every file of the batch and every new directory
		// entry durable in one journal commit, where per-file syncs cost one
		// each (the cold-epoch and warm case: many small files per batch).
		for _, p := range paths {
			index[p].created.Store(false)
		}
		return
	}
	var mu sync.Mutex
	parallel(paths, syncWorkers, func(p string) {
		ok := syncPath(p, true)
		mu.Lock()
		defer mu.Unlock()
		synced[p] = ok
		if ok && index[p].created.Swap(false) {
			dirs[filepath.Dir(p)] = true
		}
	})
	for i := range batch {
		if op := &batch[i]; op.kind == opAddChunk && op.slot == nil && op.synced() && !synced[op.o.path] {
			op.rec = chunkRecord{}
			op.syncFailed = true
		}
	}
	for d := range dirs {
		if !syncPath(d, false) {
			// Without a durable directory entry the file may vanish on power
			// loss; drop the records of files in it.
			for i := range batch {
				if op := &batch[i]; op.kind == opAddChunk && op.slot == nil && filepath.Dir(op.o.path) == d {
					op.rec = chunkRecord{}
					op.o.created.Store(true) // sync the directory next time
				}
			}
		}
	}
}

// syncPacks fdatasyncs every pack that a packed chunk of the batch was
// written to, once, and drops the records of chunks whose pack failed.
func (cm *committer) syncPacks(batch []commitOp) {
	synced := make(map[*pack]bool)
	for i := range batch {
		op := &batch[i]
		if op.kind != opAddChunk || op.slot == nil || op.o.gone.Load() {
			continue
		}
		p := op.slot.p
		ok, seen := synced[p]
		if !seen {
			ok = cm.packs.sync(p)
			synced[p] = ok
		}
		if !ok {
			op.rec = chunkRecord{}
			op.syncFailed = true
		}
	}
}

const (
	syncWorkers = 16
	// syncfsThreshold: from this many files in a batch, one syncfs of the
	// cache's filesystem is cheaper than a sync per file. It also syncs
	// other writers' data on that filesystem, which only delays the commit.
	syncfsThreshold = 8
)

// syncfs flushes the whole filesystem holding the cache; false if it fails
// (the caller then syncs file by file).
func (cm *committer) syncfs() bool {
	if cm.dataDir == nil {
		return false
	}
	return unix.Syncfs(int(cm.dataDir.Fd())) == nil
}

// parallel runs fn on every item with at most n at a time.
func parallel(items []string, n int, fn func(string)) {
	if len(items) <= 1 {
		for _, it := range items {
			fn(it)
		}
		return
	}
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(n, len(items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				fn(it)
			}
		}()
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
}

// synced reports whether syncFiles kept op: a zero Len marks a dropped op
// (real chunks are never empty).
func (op *commitOp) synced() bool { return op.rec.Len > 0 }

// syncPath fdatasyncs a file (dataOnly) or fsyncs a directory.
func syncPath(path string, dataOnly bool) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if dataOnly {
		return syscall.Fdatasync(int(f.Fd())) == nil
	}
	return f.Sync() == nil
}

// deleteObjectRecords removes an object's chunk records, then its object
// record, so an interrupted deletion never leaves chunks without an owner
// that Open would count.
func deleteObjectRecords(db *badger.DB, id ObjectID) error {
	var keys [][]byte
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: chunkPrefix(id)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		return nil
	})
	if err != nil {
		return err
	}
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return err
		}
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	return db.Update(func(txn *badger.Txn) error { return txn.Delete(objectKey(id)) })
}
