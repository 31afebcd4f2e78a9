package cache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"
)

type chunkState uint8

const (
	chunkAbsent  chunkState = iota
	chunkPending            // written by this process; its index record is not durable yet
	chunkDurable            // its index record is committed
)

type chunk struct {
	state chunkState
	// whole: crc is the CRC32C of the whole chunk, from a record written
	// before check blocks; the chunk is read and checked whole.
	whole bool
	// crc is the CRC32C of the chunk's first check block (check.go): its
	// only one for most chunks, the others in object.sums.
	crc uint32
}

// object is the in-memory state of one cached object version.
//
// Invariants: once dead is set (under mu held exclusively) the object is out
// of Cache.objects, its file is unlinked, and nothing is written to it or read
// from it again. cached is the sum of the lengths of non-absent chunks.
type object struct {
	id   ObjectID
	meta objectMeta
	path string

	// mu guards the file's life: held shared by whoever reads or writes
	// the file or needs dead to stay false, exclusively to load the chunk
	// records, to evict (set dead, unlink) and to drop a chunk.
	mu     sync.RWMutex
	loaded bool // chunk records read from the index
	dead   bool
	// bits guards chunks and cached for holders of mu in shared mode: a
	// store flips a chunk present while other stores still write and
	// readers read. (An exclusive mu would wait for every write in
	// progress, and RWMutex makes new readers queue behind it.)
	bits   sync.Mutex
	chunks []chunk
	cached int64
	// sums holds the check blocks' CRC32Cs of chunks of several blocks
	// (sumsAt); nil until one is stored or loaded.
	sums []uint32

	// durable is the byte count the committer last wrote in the object
	// record; only the committer changes it after load.
	durable atomic.Int64
	// gone mirrors dead for the committer, which takes no locks.
	gone atomic.Bool
	// accessed is the last access time (unix seconds) sent to the index.
	accessed atomic.Int64
	// created: the file was created and its directory not yet synced.
	created atomic.Bool
	// stamp identifies the cache file (of an object of several chunks)
	// whose every chunk was last checked for FUSE passthrough, where the
	// kernel reads the file itself (passthrough.go); nil until then.
	stamp atomic.Pointer[fileStamp]
	// loc is where a packed object's bytes are (pack.go); nil for an
	// object whose chunks live in the file at path. Set when its chunk is
	// stored (before the chunk is marked present) or loaded, cleared when
	// the slot is freed (under mu held exclusively).
	loc atomic.Pointer[slot]
}

// chunkAt returns chunk idx's state; o.mu is held (shared or exclusive)
// and o is not dead.
func (o *object) chunkAt(idx int) chunk {
	o.bits.Lock()
	defer o.bits.Unlock()
	return o.chunks[idx]
}

// cachedBytes is the bytes of o's present chunks; o.mu is held.
func (o *object) cachedBytes() int64 {
	o.bits.Lock()
	defer o.bits.Unlock()
	return o.cached
}

// present reports whether chunk idx of o is marked present.
func (o *object) present(idx int) bool {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return !o.dead && o.chunkAt(idx).state != chunkAbsent
}

// presentChunks lists the chunks of o marked present; o.mu is held.
func (o *object) presentChunks() []int {
	o.bits.Lock()
	defer o.bits.Unlock()
	var idxs []int
	for i, ch := range o.chunks {
		if ch.state != chunkAbsent {
			idxs = append(idxs, i)
		}
	}
	return idxs
}

// accessPersistInterval bounds how often a read refreshes an object's
// persisted access time: recency across restarts needs hours, not
// microseconds, and a write per hit would tax the hot path.
const accessPersistInterval = int64(time.Hour / time.Second)

// touched notes a read of o, queueing an index update if the persisted
// access time is stale.
func (c *Cache) touched(o *object) {
	c.policy.Accessed(o.id)
	now := time.Now().Unix()
	prev := o.accessed.Load()
	if now-prev < accessPersistInterval || !o.accessed.CompareAndSwap(prev, now) {
		return
	}
	c.commits.send(commitOp{kind: opTouch, o: o})
}

func (c *Cache) newObject(id ObjectID, meta objectMeta) *object {
	h := id.String()
	return &object{id: id, meta: meta, path: filepath.Join(c.dir, "data", h[:2], h)}
}

// object returns the live object for meta, creating it and loading its
// chunk records on first use.
func (c *Cache) object(meta objectMeta) (*object, error) {
	o, err := c.materialize(meta.id(), &meta)
	if err != nil {
		return nil, err
	}
	return c.load(o)
}

// load reads o's chunk records from the index the first time o is used.
func (c *Cache) load(o *object) (*object, error) {
	o.mu.RLock()
	loaded := o.loaded
	o.mu.RUnlock()
	if loaded {
		return o, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.loaded && !o.dead {
		if err := c.loadChunks(o); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// loadChunks reads o's chunk records; o.mu is held exclusively. Records that
// don't fit the object's shape are ignored (and so refetched).
func (c *Cache) loadChunks(o *object) error {
	o.chunks = make([]chunk, o.meta.numChunks())
	var total int64
	err := c.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 64, Prefix: chunkPrefix(o.id)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) != 21 {
				continue
			}
			idx := int(uint32(k[17])<<24 | uint32(k[18])<<16 | uint32(k[19])<<8 | uint32(k[20]))
			var rec chunkRecord
			if err := it.Item().Value(rec.unmarshal); err != nil || idx >= len(o.chunks) || int64(rec.Len) != o.meta.chunkLen(idx) {
				continue
			}
			ch := chunk{whole: rec.Whole, crc: rec.Sums[0]}
			if !rec.Whole {
				ch = o.setSums(idx, rec.Sums)
			}
			ch.state = chunkDurable
			o.chunks[idx] = ch
			total += int64(rec.Len)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cache: load chunk records: %w", err)
	}
	c.used.Add(total - o.cached)
	o.cached = total
	o.durable.Store(total)
	o.loaded = true
	return nil
}

// packed reports whether an object of this shape is stored in a pack slot
// (one chunk) rather than a file of its own.
func (m *objectMeta) packed() bool { return m.numChunks() == 1 }

// readAt reads len(dst) cached bytes of o at off; o.mu is held shared and
// the chunks read are present.
func (o *object) readAt(dst []byte, off int64) error {
	if sl := o.loc.Load(); sl != nil {
		return sl.readAt(dst, off)
	}
	return preadFull(o.path, dst, off)
}

// write writes chunk idx's bytes to o's file or, for a packed object, to a
// new slot, which it returns; o.mu is held shared. stale lists the chunks
// that were marked present when the write had to create o's file: their
// bytes were in a file that is gone.
func (c *Cache) write(o *object, idx int, data []byte) (sl *slot, stale []int, err error) {
	if !o.meta.packed() {
		stale, err = pwriteFull(o, data, int64(idx)*o.meta.ChunkSize)
		return nil, stale, err
	}
	if int64(cap(data)) < alignUp(int64(len(data))) {
		// Too small a buffer for a whole-block write (an unpooled one, for
		// a tiny object): copy it into a pooled one.
		buf := c.bufs.getPooled(len(data))
		defer c.bufs.put(buf)
		copy(buf, data)
		data = buf
	}
	put, err := c.packs.put(data)
	if err != nil {
		return nil, nil, err
	}
	return &put, nil, nil
}

// freeSlot gives the space of o's packed bytes back: its slot, or the file
// of its own that an object cached before packs existed (a version 1
// record) has. Nothing for an object of several chunks. o.mu is held
// exclusively (nobody reads them).
func (c *Cache) freeSlot(o *object) {
	if !o.meta.packed() {
		return // its chunks share its file
	}
	if sl := o.loc.Swap(nil); sl != nil {
		c.packs.free(*sl, o.meta.Size)
		return
	}
	c.removeFile(o)
}

// removeFile deletes o's file of its own, if it has one.
func (c *Cache) removeFile(o *object) {
	if err := os.Remove(o.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		c.log.Warn("cache: remove evicted file", "path", o.path, "err", err)
	}
}

// openForWrite opens (creating, sized to the object) o's file, with
// O_DIRECT set when the filesystem allows it (see writeChunk). Called with
// o.mu held shared: concurrent creators race harmlessly, since O_CREATE and
// truncating to the same size are idempotent. A file it creates while
// chunks of o are marked present means the file that held them is gone
// (deleted under the daemon): it returns them as stale.
func (o *object) openForWrite() (f *os.File, direct bool, stale []int, err error) {
	// One open in the common case of a new file (small objects: every
	// chunk is a first chunk); an existing file costs a second.
	// Listed before the create: a store into the file this one creates
	// may mark its chunk present before the create returns here.
	before := o.presentChunks()
	f, direct, err = openDirect(o.path, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err == nil {
		stale = before
		// A new directory entry: the committer must sync the directory
		// before recording any chunk of this file.
		o.created.Store(true)
		// A multi-chunk object's file takes its full size at once (sparse
		// until complete). A single chunk's pwrite sets the size itself, and
		// a file left short by a crash is still right: only chunks written
		// and recorded are ever read, and the last one ends at the size.
		if o.meta.numChunks() > 1 {
			if err := f.Truncate(o.meta.Size); err != nil {
				f.Close()
				return nil, false, nil, err
			}
		}
		return f, direct, stale, nil
	}
	if errors.Is(err, os.ErrExist) {
		f, direct, err = openDirect(o.path, os.O_RDWR|unix.O_NOFOLLOW, 0)
		return f, direct, nil, err
	}
	return nil, false, nil, err
}

// evict drops o from the cache: memory state, file and index records.
func (c *Cache) evict(id ObjectID) (evicted bool) {
	// An object cached by an earlier process is made from its record
	// first: that is where its slot and byte count are.
	if _, err := c.materialize(id, nil); err != nil {
		c.log.Warn("cache: evicting", "id", id, "err", err)
	}
	c.mu.Lock()
	o := c.objects[id]
	if o == nil {
		c.mu.Unlock()
		c.policy.Removed(id)
		return false
	}
	o.mu.Lock()
	o.dead = true
	o.gone.Store(true)
	delete(c.objects, id)
	c.forgotten[id] = o
	freed := o.cached
	o.cached = 0
	o.chunks = nil
	if o.meta.packed() {
		c.freeSlot(o)
	} else {
		c.removeFile(o)
	}
	// Queued while both locks are held so that a later incarnation's records
	// are committed after this deletion. The committer takes no locks.
	c.commits.send(commitOp{kind: opDeleteObject, o: o})
	o.mu.Unlock()
	c.mu.Unlock()
	c.used.Add(-freed)
	c.policy.Removed(id)
	c.stats.evictions.Add(1)
	c.log.Debug("cache: evicted", "key", o.meta.Key, "bytes", freed)
	return true
}
