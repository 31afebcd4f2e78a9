package cache

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
)

type opKind uint8

const (
	opAddChunk     opKind = iota // chunk bytes are in the file; make them durable, then record
	opDropChunk                  // chunk failed verification; forget its record
	opDeleteObject               // object evicted; forget all its records
	opTouch                      // object read; persist its access time
)

type commitOp struct {
	kind opKind
	o    *object
	idx  int
	rec  chunkRecord
	done chan struct{} // flush marker: closed once every earlier op is committed
}

// committer turns written chunks into index records, in groups: it syncs the
// files and directories of a batch, then commits the batch's records in one
// badger transaction. Syncing before recording is the crash-safety invariant;
// grouping amortises the syncs. It is the only writer of chunk and object
// records, so records are applied in the order ops were sent.
type committer struct {
	db   *badger.DB
	log  *slog.Logger
	ops  chan commitOp
	wg   sync.WaitGroup
	once sync.Once
}

const (
	maxBatch    = 512
	batchLinger = 5 * time.Millisecond
)

func startCommitter(db *badger.DB, log *slog.Logger) *committer {
	cm := &committer{db: db, log: log, ops: make(chan commitOp, 4096)}
	cm.wg.Add(1)
	go cm.run()
	return cm
}

func (cm *committer) send(op commitOp) { cm.ops <- op }

// flush returns once every op sent before it is committed.
func (cm *committer) flush() {
	done := make(chan struct{})
	cm.ops <- commitOp{done: done}
	<-done
}

func (cm *committer) close() error {
	cm.once.Do(func() { close(cm.ops) })
	cm.wg.Wait()
	return nil
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

func (cm *committer) commit(batch []commitOp) {
	defer func() {
		for _, op := range batch {
			if op.done != nil {
				close(op.done)
			}
		}
	}()
	cm.syncFiles(batch)

	// Byte deltas per object, applied to o.durable only after the commit.
	delta := make(map[*object]int64)
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
			case opDropChunk:
				if err := txn.Delete(chunkKey(op.o.id, op.idx)); err != nil {
					return err
				}
				delta[op.o] -= int64(op.rec.Len)
			case opDeleteObject:
				if err := deleteObjectRecords(txn, op.o.id); err != nil {
					return err
				}
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
// file once, and fsync the directory of each file that may be new. An op
// whose file can't be synced (evicted meanwhile, I/O error) is left out of
// the commit by clearing its record.
func (cm *committer) syncFiles(batch []commitOp) {
	synced := make(map[string]bool)
	dirs := make(map[string]bool)
	for i := range batch {
		op := &batch[i]
		if op.o == nil || op.kind != opAddChunk {
			continue
		}
		if op.o.gone.Load() {
			op.rec = chunkRecord{}
			continue
		}
		ok, seen := synced[op.o.path]
		if !seen {
			ok = syncPath(op.o.path, true)
			synced[op.o.path] = ok
			if ok && op.o.durable.Load() == 0 {
				dirs[filepath.Dir(op.o.path)] = true
			}
		}
		if !ok {
			op.rec = chunkRecord{}
		}
	}
	for d := range dirs {
		if !syncPath(d, false) {
			// Without a durable directory entry the file may vanish on power
			// loss; drop the records of files in it.
			for i := range batch {
				if batch[i].o != nil && filepath.Dir(batch[i].o.path) == d {
					batch[i].rec = chunkRecord{}
				}
			}
		}
	}
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

func deleteObjectRecords(txn *badger.Txn, id ObjectID) error {
	if err := txn.Delete(objectKey(id)); err != nil {
		return err
	}
	it := txn.NewIterator(badger.IteratorOptions{Prefix: chunkPrefix(id)})
	var keys [][]byte
	for it.Rewind(); it.Valid(); it.Next() {
		keys = append(keys, it.Item().KeyCopy(nil))
	}
	it.Close()
	for _, k := range keys {
		if err := txn.Delete(k); err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
	}
	return nil
}
