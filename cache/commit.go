package cache

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/dsmount/dsmount/cache/internal/index"
	"github.com/dsmount/dsmount/cache/internal/record"
	"github.com/dsmount/dsmount/cache/internal/store"
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
	rec  record.Chunk
	slot *store.Slot   // opAddChunk of a packed object: where its bytes were written
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
		return op.slot.Pack.Path()
	}
	return string(op.o.file)
}

// committer turns written chunks into index records, in groups: it syncs the
// files and directories of a batch, then commits the batch's records in one
// badger transaction. Syncing before recording is the crash-safety invariant;
// grouping amortises the syncs. It is the only writer of chunk and object
// records, so records are applied in the order ops were sent.
type committer struct {
	index   *index.DB
	log     *slog.Logger
	dataDir *os.File // the cache's data dir, for syncfs; may be nil
	packs   *store.PackStore
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
	// batchLinger is how long a batch gathers after its first op: long
	// enough for a cold epoch's stores to fill a batch worth one syncfs
	// rather than a sync per file. A record committed later only risks
	// being forgotten by a crash.
	batchLinger = 25 * time.Millisecond
)

func startCommitter(x *index.DB, dataDir string, packs *store.PackStore, log *slog.Logger, syncFailed func([]commitOp), deleted func(*object)) *committer {
	cm := &committer{index: x, log: log, packs: packs, ops: make(chan commitOp, 4096), syncFailed: syncFailed, deleted: deleted}
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
	if !cm.index.Prepare() {
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
	// Evictions first, each on its own (a large object has more chunk
	// records than one transaction may hold). A later incarnation's
	// records, queued after the eviction, are written after it below.
	for _, op := range batch {
		if op.kind == opDeleteObject {
			if err := cm.index.DeleteObject(record.ID(op.o.id)); err != nil {
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
	slots := make(map[*object]*store.Slot)
	err := cm.index.Update(func(w index.Writer) error {
		for _, op := range batch {
			if op.o == nil {
				continue
			}
			switch op.kind {
			case opAddChunk:
				if !op.synced() {
					continue
				}
				if err := w.SetChunk(record.ID(op.o.id), op.idx, op.rec); err != nil {
					return err
				}
				delta[op.o] += int64(op.rec.Len)
				if op.slot != nil {
					slots[op.o] = op.slot
				}
			case opDropChunk:
				if err := w.DeleteChunk(record.ID(op.o.id), op.idx); err != nil {
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
			rec := record.Object{Meta: o.meta, CachedBytes: min(max(o.durable.Load()+d, 0), o.meta.Size), Accessed: o.accessed.Load()}
			sl := slots[o]
			if sl == nil {
				sl = o.loc.Load()
			}
			if sl != nil {
				// A record naming a slot whose bytes are not durable, or no
				// longer there, is caught by the CRC32C check of the first
				// read after a restart.
				rec.Pack, rec.PackOff = sl.Pack.ID(), sl.Off
			}
			if err := w.SetObject(record.ID(o.id), &rec); err != nil {
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
				op.rec = record.Chunk{}
			}
			continue
		}
		if op.slot != nil {
			continue // synced with its pack
		}
		if _, seen := index[string(op.o.file)]; !seen {
			index[string(op.o.file)] = op.o
			paths = append(paths, string(op.o.file))
		}
	}
	synced := make(map[string]bool, len(paths))
	dirs := make(map[string]bool)
	if len(paths) >= syncfsThreshold && store.Syncfs(cm.dataDir) {
		// One syncfs makes every file of the batch and every new directory
		// entry durable in one journal commit, where per-file syncs cost one
		// each (the cold-epoch and warm case: many small files per batch).
		for _, p := range paths {
			index[p].created.Store(false)
		}
		return
	}
	var mu sync.Mutex
	store.Parallel(paths, syncWorkers, func(p string) {
		ok := store.SyncPath(p, true)
		mu.Lock()
		defer mu.Unlock()
		synced[p] = ok
		if ok && index[p].created.Swap(false) {
			dirs[filepath.Dir(p)] = true
		}
	})
	for i := range batch {
		if op := &batch[i]; op.kind == opAddChunk && op.slot == nil && op.synced() && !synced[string(op.o.file)] {
			op.rec = record.Chunk{}
			op.syncFailed = true
		}
	}
	for d := range dirs {
		if !store.SyncPath(d, false) {
			// Without a durable directory entry the file may vanish on power
			// loss; drop the records of files in it.
			for i := range batch {
				if op := &batch[i]; op.kind == opAddChunk && op.slot == nil && filepath.Dir(string(op.o.file)) == d {
					op.rec = record.Chunk{}
					op.o.created.Store(true) // sync the directory next time
				}
			}
		}
	}
}

// syncPacks fdatasyncs every pack that a packed chunk of the batch was
// written to, once, and drops the records of chunks whose pack failed.
func (cm *committer) syncPacks(batch []commitOp) {
	synced := make(map[*store.Pack]bool)
	for i := range batch {
		op := &batch[i]
		if op.kind != opAddChunk || op.slot == nil || op.o.gone.Load() {
			continue
		}
		p := op.slot.Pack
		ok, seen := synced[p]
		if !seen {
			ok = cm.packs.Sync(p)
			synced[p] = ok
		}
		if !ok {
			op.rec = record.Chunk{}
			op.syncFailed = true
		}
	}
}

const (
	syncWorkers = 16
	// syncfsThreshold: from this many files in a batch, one syncfs of the
	// cache's filesystem is cheaper than a sync per file.
	syncfsThreshold = 8
)

// synced reports whether syncFiles kept op: a zero Len marks a dropped op
// (real chunks are never empty).
func (op *commitOp) synced() bool { return op.rec.Len > 0 }
