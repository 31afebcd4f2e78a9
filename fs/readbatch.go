package fs

import (
	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
)

// Batched READs of small cached files.
//
// A READ of a cached small file the kernel's page cache no longer holds
// used to cost its handler a blocking pread of the cache disk: a thread
// parked on the disk, the runtime handing its P on (and sysmon waking to
// do so), a doorbell to the disk per file. Readers that read many files
// at once (a loader's workers) send their READs together; the mount's
// read goroutine (readLoop) sends them to the disk together through a
// cache.Batch, whose completions come through the runtime's poller, and
// each handler waits for its own on a channel, with no thread blocked.
// Every read is checked as a plain one is (cache.Batch).
//
// Only a whole file's first READ goes this way, of a file of at most
// readBatchMax bytes that is cached: the READ each small file costs. A
// file a fetch ahead of its reader left in memory (the cache's staging
// area) is copied from there instead. A READ with no other READ being
// served beside it is read the plain way too: nothing would share its
// system call. A
// file not cached, a larger one, a READ of part of a file, and every READ
// where the kernel offers no asynchronous O_DIRECT reads, are read the
// plain way (Source.ReadAt).

// readBatchDepth is how many READs a mount's batch keeps on the disk at
// once (the readers a loader runs, and then some), and readBatchMax the
// largest file read through it: its buffers take depth × max bytes.
const (
	readBatchDepth = 16
	readBatchMax   = 256 << 10
)

// batchedRead is one READ handed to the read goroutine: n and ok are set,
// then done closed.
type batchedRead struct {
	obj  backend.Object
	dest []byte
	n    int
	ok   bool
	done chan struct{}
}

// batchedReads is a mount's read goroutine and its queue. Invariant: the
// goroutine runs from the first batched READ until Close, and every
// request queued is answered (done closed) before it returns.
type batchedReads struct {
	loop
	queue       chan *batchedRead
	unavailable bool // no batch here: every READ is read the plain way; under mu
}

// readBatched reads obj, a whole small cached file, into dest through
// the mount's batch. It returns false, having read nothing, where the
// READ is to be read the plain way.
func (m *Mount) readBatched(obj backend.Object, dest []byte) (int, bool) {
	// A READ alone (readers that work between reads) would pay the trip
	// to the read goroutine and an io_submit for nothing shared: its own
	// pread costs less. One chunk (the batch reads packed objects alone),
	// cached: else the READ would only make the trip and come back.
	if m.readsActive.Load() < 2 || obj.Size <= 0 || obj.Size > readBatchMax || int64(len(dest)) < obj.Size ||
		m.src.ChunkLen(obj, 0) != obj.Size || !m.src.ChunkCached(obj, 0) {
		return 0, false
	}
	if n, ok := m.src.ReadStaged(obj, dest); ok {
		return n, true
	}
	r := &m.batched
	req := &batchedRead{obj: obj, dest: dest, done: make(chan struct{})}
	r.mu.Lock()
	if r.closed || r.unavailable {
		r.mu.Unlock()
		return 0, false
	}
	if r.queue == nil {
		batch, err := m.src.NewBatch(readBatchDepth, readBatchMax)
		if err != nil {
			r.unavailable = true
			r.mu.Unlock()
			m.log.Debug("reading without batched reads", "err", err)
			return 0, false
		}
		r.queue = make(chan *batchedRead, 4*readBatchDepth)
		r.startLocked(func() { m.readLoop(batch) })
	}
	select {
	case r.queue <- req:
	default:
		r.mu.Unlock()
		return 0, false
	}
	r.mu.Unlock()
	<-req.done
	return req.n, req.ok
}

// readLoop serves the mount's batched READs: it takes requests while the
// batch has room, sends their reads to the disk together, and answers
// each as it finishes. A request the batch won't take (its file dropped
// or moved meanwhile) is answered at once, to be read the plain way.
func (m *Mount) readLoop(batch *cache.Batch) {
	r := &m.batched
	defer batch.Close()
	failed := false // the batch failed: every READ goes the plain way
	for {
		var req *batchedRead
		if !failed && batch.InFlight() > 0 {
			select {
			case req = <-r.queue:
			default:
				failed = !m.readsFinished(batch)
				continue
			}
		} else {
			select {
			case req = <-r.queue:
			case <-r.quit:
				// Closed after the last send: what is queued is all.
				for {
					select {
					case req = <-r.queue:
						close(req.done)
					default:
						return
					}
				}
			}
		}
		if failed {
			close(req.done)
			continue
		}
		added, err := batch.Add(req.obj, req)
		if err != nil {
			m.log.Debug("batched read refused", "key", req.obj.Key, "err", err)
		}
		if !added {
			close(req.done)
			continue
		}
		if batch.Room() == 0 {
			failed = !m.readsFinished(batch)
		}
	}
}

// readsFinished waits for the batch's next reads to finish and answers
// each. Should the batch fail, it answers every READ it holds, to be
// read the plain way, turns the mount's READs away from batching, and
// returns false.
func (m *Mount) readsFinished(batch *cache.Batch) bool {
	done, err := batch.Wait()
	for _, d := range done {
		req := d.Tag.(*batchedRead)
		if d.Err == nil {
			req.n = copy(req.dest, d.Data)
			req.ok = true
			m.batchedReads.Add(1)
		}
		batch.Release(d)
		close(req.done)
	}
	if err == nil {
		return true
	}
	m.log.Warn("batched reads failed; reading one at a time from now on", "err", err)
	r := &m.batched
	r.mu.Lock()
	r.unavailable = true
	r.mu.Unlock()
	for _, tag := range batch.Abort() {
		close(tag.(*batchedRead).done)
	}
	return false
}
