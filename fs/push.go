package fs

import (
	"errors"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
	"github.com/dsmount/dsmount/readahead"
)

// Pushing a declared order's cached files into the kernel's page cache.
//
// A cached file the kernel's page cache no longer holds costs its reader
// a READ: a round trip through the daemon with the disk read inside it.
// For a declared job, the readahead registry knows the next files and
// asks the mount to push them (Push): one goroutine per mount (pushLoop)
// reads them from the cache disk many at once (cache.Batch: one system
// call and one doorbell to the disk per batch, completions through the
// runtime's poller) and writes each into the page cache of the file's
// inode (FUSE_NOTIFY_STORE). The readers' reads of those files are then
// page-cache hits, which never reach the daemon.
//
// A push needs the kernel to hold the file's inode (a store to an inode
// it let go of finds nothing to fill): known tracks the files between
// their LOOKUP and their FORGET. Files the kernel holds no inode for,
// files not wholly cached, empty or large files, and every file of a
// passthrough mount (whose reads bypass the page cache) are not pushed;
// their readers read them as before.

// maxPush is the largest file pushed: the small files whose one READ each
// costs a round trip. A large one is streamed.
const maxPush = 1 << 20

// pushNice is the scheduling priority of the push goroutine's thread.
// Readers of page-cache hits never block, and on a busy core they take
// the CPU from the one thread that pushes their next files; a file they
// reach before its push costs a READ through the daemon, which costs the
// daemon more than the push would have. Raising it needs CAP_SYS_NICE;
// without, the thread keeps the process's.
const pushNice = -10

// pushDepth is how many cache-disk reads a mount's pushes keep in flight,
// and pushQueue how many requests may wait for them.
const (
	pushDepth = 32
	pushQueue = 4 * pushDepth
)

// known maps a file's tree index to its node while the kernel holds the
// inode (from its LOOKUP to its FORGET).
type known struct {
	mu    sync.Mutex
	nodes map[uint32]*node
}

func (k *known) add(n *node) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.nodes == nil {
		k.nodes = make(map[uint32]*node)
	}
	k.nodes[n.e.idx] = n
}

func (k *known) forget(n *node) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.nodes[n.e.idx] == n {
		delete(k.nodes, n.e.idx)
	}
}

func (k *known) get(idx uint32) *node {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.nodes[idx]
}

// OnForget drops the node from the pushable files: the kernel has let go
// of its inode.
func (n *node) OnForget() {
	if !n.e.isDir() {
		n.m.known.forget(n)
	}
}

// pushReq is one item to push, and whom to tell how it went: file ref
// (a tree index) whole, or where obj is set, the range object obj stored
// at at in file ref.
type pushReq struct {
	ref  uint32
	obj  backend.Object
	at   int64
	done func(pushed bool)
}

// pusher is a mount's push goroutine and its queue. Invariant: the
// goroutine runs from the first Push until Close.
type pusher struct {
	loop
	queue chan pushReq
}

// Push queues item ref of objs (a file's tree index, or a declared range
// of one: rangeObjects) to be pushed into the kernel's page cache, and
// calls done once, from the mount's push goroutine, with whether it was.
// It returns false, and never calls done, when the queue is full or the
// mount closed.
func (m *Mount) Push(objs readahead.Objects, ref uint32, done func(pushed bool)) bool {
	req := pushReq{ref: ref, done: done}
	if ro, ok := objs.(*rangeObjects); ok && ref&rangeRef != 0 {
		d := ro.ranges[ref&^rangeRef]
		req = pushReq{ref: d.file, obj: ro.Object(ref), at: d.off, done: done}
	}
	p := &m.push
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if p.queue == nil {
		p.queue = make(chan pushReq, pushQueue)
	}
	p.startLocked(m.pushLoop)
	select {
	case p.queue <- req:
		return true
	default:
		return false
	}
}

// Close cancels the mount's control requests and waits for them, and
// stops its pushes and batched reads (after its server ended, before its
// Source closes).
func (m *Mount) Close() {
	m.requests.close()
	m.batched.stop()
	m.push.stop()
}

// pushTag is what a batched read carries back: the node to fill and the
// request.
type pushTag struct {
	n   *node
	req pushReq
}

// pushLoop serves the mount's pushes: it takes requests while the batch
// has room, sends their reads to the disk together, and fills the page
// cache as they finish. Where batched reads are unavailable it reads each
// file on its own (cache.Source.ReadCached).
func (m *Mount) pushLoop() {
	p := &m.push
	// The thread is the push's alone, and ends with it (a goroutine that
	// exits locked takes its thread along), so its priority goes nowhere
	// else.
	runtime.LockOSThread()
	if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), pushNice); err != nil {
		m.log.Debug("push: keeping the process's priority", "err", err)
	}
	batch, err := m.src.NewBatch(pushDepth, maxPush)
	if err != nil {
		m.log.Debug("pushing without batched reads", "err", err)
		batch = nil
	} else {
		defer batch.Close()
	}
	buf := make([]byte, maxPush)
	for {
		inFlight := batch != nil && batch.InFlight() > 0
		var req pushReq
		if inFlight {
			select {
			case req = <-p.queue:
			case <-p.quit:
				return
			default:
				batch = m.pushFinished(batch)
				continue
			}
		} else {
			select {
			case req = <-p.queue:
			case <-p.quit:
				return
			}
		}
		n, obj, ok := m.pushable(req)
		if !ok {
			req.done(false)
			continue
		}
		if batch != nil {
			added, err := batch.Add(obj, pushTag{n, req})
			if added {
				if batch.Room() == 0 {
					batch = m.pushFinished(batch)
				}
				continue
			}
			if err != nil {
				m.log.Debug("push: batched read refused", "key", obj.Key, "err", err)
			}
		}
		req.done(m.pushOne(n, obj, req.at, buf))
	}
}

// pushFinished waits for the batch's next reads to finish and stores
// each into its file's page cache. It returns the batch, or nil where it
// failed: its pushes are then reported not done, and the next read one
// at a time.
func (m *Mount) pushFinished(batch *cache.Batch) *cache.Batch {
	done, err := batch.Wait()
	for _, d := range done {
		t := d.Tag.(pushTag)
		ok := d.Err == nil && m.store(t.n, t.req.at, d.Data)
		batch.Release(d)
		t.req.done(ok)
	}
	if err == nil {
		return batch
	}
	m.log.Warn("push: batched reads failed; reading one at a time from now on", "err", err)
	for _, tag := range batch.Abort() {
		tag.(pushTag).req.done(false)
	}
	return nil
}

// pushable is the node of req's file and the object to push into it, if
// it may be pushed.
func (m *Mount) pushable(req pushReq) (*node, backend.Object, bool) {
	// A passthrough open of a wholly cached file reads past the page
	// cache. A file with ranges declared is bigger than the cache: never
	// wholly cached, never opened so.
	if req.obj.Key == "" && m.FastPathMode() == FastPathPassthrough {
		return nil, backend.Object{}, false
	}
	n := m.known.get(req.ref)
	if n == nil {
		return nil, backend.Object{}, false
	}
	obj := req.obj
	if obj.Key == "" {
		obj = n.obj()
	}
	if obj.Size == 0 || obj.Size > maxPush {
		return nil, backend.Object{}, false
	}
	return n, obj, true
}

// pushOne reads obj (n's file, or a range of it at at) from the cache
// alone, into buf, and stores it.
func (m *Mount) pushOne(n *node, obj backend.Object, at int64, buf []byte) bool {
	got, err := m.src.ReadCached(obj, buf[:obj.Size], 0)
	if err != nil {
		if !errors.Is(err, cache.ErrNotCached) {
			m.log.Debug("push: read", "key", obj.Key, "err", err)
		}
		return false
	}
	return m.store(n, at, buf[:got])
}

// store writes data, n's file's bytes from at (its whole file, or a
// range object's pages), into its inode's page cache.
func (m *Mount) store(n *node, at int64, data []byte) bool {
	switch errno := n.WriteCache(at, data); errno {
	case 0:
		m.pushed.Add(1)
		return true
	case syscall.ENOENT:
		// The kernel let go of the inode since: nothing to fill.
	default:
		m.log.Debug("push: store into the page cache", "err", errno)
	}
	return false
}
