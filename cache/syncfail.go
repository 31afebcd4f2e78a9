package cache

import "sync"

// A chunk whose bytes could not be made durable (fsync or fdatasync of its
// file or pack failed) is not trusted any more: the committer leaves its
// record out of the index, and the chunk is dropped from memory too, so
// nothing serves it again. What a failed sync leaves on disk is unknown:
// Linux may drop the dirty pages it could not write, after which a read
// returns whatever the disk holds, and FUSE passthrough would hand exactly
// that to the kernel. Reads of a cache file are checked against their
// CRC32C anyway (readChecked); dropping the chunk also keeps it out of
// passthrough and out of the capacity it no longer fills.
//
// The committer can't drop chunks itself: dropping takes an object's mu
// exclusively, and a store holding mu shared may be blocked sending to
// the committer. So the committer hands its failures to a dropper
// goroutine, owned by the Cache and stopped by Close.

// dropper drops chunks whose sync failed, off the committer's goroutine.
type dropper struct {
	c    *Cache
	mu   sync.Mutex
	ops  []commitOp // failed adds not dropped yet
	wake chan struct{}
	quit chan struct{}
	wg   sync.WaitGroup
}

func startDropper(c *Cache) *dropper {
	d := &dropper{c: c, wake: make(chan struct{}, 1), quit: make(chan struct{})}
	d.wg.Add(1)
	go d.run()
	return d
}

// failed hands over adds whose bytes could not be synced. It never blocks
// on a lock a store may hold.
func (d *dropper) failed(ops []commitOp) {
	d.mu.Lock()
	d.ops = append(d.ops, ops...)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *dropper) run() {
	defer d.wg.Done()
	for {
		select {
		case <-d.wake:
			d.drain()
		case <-d.quit:
			d.drain()
			return
		}
	}
}

func (d *dropper) drain() {
	d.mu.Lock()
	ops := d.ops
	d.ops = nil
	d.mu.Unlock()
	c := d.c
	for _, op := range ops {
		c.stats.syncFailures.Add(1)
		c.warn.sync.warn(c.log, "cache: a chunk's bytes could not be made durable (the cache disk failed a sync); dropped, it will be fetched again", "key", op.o.meta.Key, "chunk", op.idx, "path", op.path())
		if op.slot != nil {
			c.dropChunkIf(op.o, op.idx, op.crc)
			continue
		}
		// A file's writeback error is reported to one sync only: chunks
		// of the file written before it failed but synced in a later
		// batch would be recorded as durable. So every chunk of the file
		// that this process stored goes (pending: those loaded from the
		// index were durable before). A pack's other slots can't be
		// handed to the kernel, and every read of them is checked.
		c.dropWhere(op.o, func(idx int, ch chunk) bool { return ch.state == chunkPending })
	}
}

// close stops the dropper once what it was handed is dropped. Called
// after the committer has stopped, so nothing more is handed over.
func (d *dropper) close() {
	close(d.quit)
	d.wg.Wait()
}
