package cache

import (
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache/internal/record"
	"github.com/dsmount/dsmount/cache/internal/store"
)

// ObjectID names one version of one object of one source, at one chunk size.
type ObjectID [16]byte

func (id ObjectID) String() string { return record.ID(id).String() }

// chunkID names one chunk of one object version.
type chunkID struct {
	obj ObjectID
	idx int
}

// metaOf is the identity of obj's version as read from source at chunkSize.
func metaOf(source string, obj backend.Object, chunkSize int64) record.Meta {
	return record.NewMeta(source, obj.Key, obj.Size, obj.Version, chunkSize)
}

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
	meta record.Meta
	// file is where its chunks live, unless it is packed (loc).
	file store.File

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
	stamp atomic.Pointer[store.Stamp]
	// loc is where a packed object's bytes are (a pack slot); nil for an
	// object whose chunks live in the file at path. Set when its chunk is
	// stored (before the chunk is marked present) or loaded, cleared when
	// the slot is freed (under mu held exclusively).
	loc atomic.Pointer[store.Slot]
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
	c.disk.commits.send(commitOp{kind: opTouch, o: o})
}

func (c *Cache) newObject(id ObjectID, meta record.Meta) *object {
	h := id.String()
	return &object{id: id, meta: meta, file: store.File(filepath.Join(c.dir, "data", h[:2], h))}
}

// object returns the live object for meta, creating it and loading its
// chunk records on first use.
func (c *Cache) object(meta record.Meta) (*object, error) {
	o, err := c.materialize(ObjectID(meta.ID()), &meta)
	if err != nil {
		return nil, err
	}
	return c.load(o)
}

// existing is object for an object the cache already knows, and nil
// otherwise: queries about what is cached must not create state for every
// object they ask about.
func (c *Cache) existing(meta record.Meta) (*object, error) {
	o, err := c.materialize(ObjectID(meta.ID()), nil)
	if o == nil || err != nil {
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
	o.chunks = make([]chunk, o.meta.NumChunks())
	var total int64
	err := c.disk.index.Chunks(record.ID(o.id), func(idx int, rec record.Chunk) {
		if idx >= len(o.chunks) || int64(rec.Len) != o.meta.ChunkLen(idx) {
			return
		}
		ch := chunk{whole: rec.Whole, crc: rec.Sums[0]}
		if !rec.Whole {
			ch = o.setSums(idx, rec.Sums)
		}
		ch.state = chunkDurable
		o.chunks[idx] = ch
		total += int64(rec.Len)
	})
	if err != nil {
		return err
	}
	c.budget.used.Add(total - o.cached)
	o.cached = total
	o.durable.Store(total)
	o.loaded = true
	return nil
}

// readAt reads len(dst) cached bytes of o at off; o.mu is held shared and
// the chunks read are present.
func (o *object) readAt(dst []byte, off int64) error {
	if sl := o.loc.Load(); sl != nil {
		return sl.ReadAt(dst, off)
	}
	return o.file.ReadAt(dst, off)
}

// freeSlot gives the space of o's packed bytes back: its slot, or the file
// of its own that an object cached before packs existed (a version 1
// record) has. Nothing for an object of several chunks. o.mu is held
// exclusively (nobody reads them).
func (c *Cache) freeSlot(o *object) {
	if !o.meta.Packed() {
		return // its chunks share its file
	}
	if sl := o.loc.Swap(nil); sl != nil {
		c.disk.packs.Free(*sl, o.meta.Size)
		return
	}
	c.removeFile(o)
}

// removeFile deletes o's file of its own, if it has one.
func (c *Cache) removeFile(o *object) {
	if err := o.file.Remove(); err != nil {
		c.log.Warn("cache: remove evicted file", "path", o.file, "err", err)
	}
}

// evict drops o from the cache: memory state, file and index records.
func (c *Cache) evict(id ObjectID) (evicted bool) {
	// An object cached by an earlier process is made from its record
	// first: that is where its slot and byte count are.
	if _, err := c.materialize(id, nil); err != nil {
		c.log.Warn("cache: evicting", "id", id, "err", err)
	}
	c.table.mu.Lock()
	o := c.table.objects[id]
	if o == nil {
		c.table.mu.Unlock()
		c.policy.Removed(id)
		return false
	}
	o.mu.Lock()
	o.dead = true
	o.gone.Store(true)
	delete(c.table.objects, id)
	c.table.forgotten[id] = o
	freed := o.cached
	o.cached = 0
	o.chunks = nil
	if o.meta.Packed() {
		c.freeSlot(o)
	} else {
		c.removeFile(o)
	}
	// Queued while both locks are held so that a later incarnation's records
	// are committed after this deletion. The committer takes no locks.
	c.disk.commits.send(commitOp{kind: opDeleteObject, o: o})
	o.mu.Unlock()
	c.table.mu.Unlock()
	c.budget.used.Add(-freed)
	c.policy.Removed(id)
	c.stats.evictions.Add(1)
	c.log.Debug("cache: evicted", "key", o.meta.Key, "bytes", freed)
	return true
}
