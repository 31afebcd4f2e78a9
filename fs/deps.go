package fs

import (
	"context"
	"os"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
	"github.com/dsmount/dsmount/readahead"
)

// What a mount needs of the packages below it, as interfaces fs owns:
// each lists the methods fs calls and no more, so that the package can be
// read (and tested) against what it uses. The daemon passes the concrete
// types (*cache.Cache, *cache.Source, *readahead.Mount), which implement
// them (checked below); tests in this package do the same, over a store
// in memory. The interfaces take and return cache and readahead types
// (ObjectID, Priority, Declaration, ...): those are values, not
// dependencies.
//
// Reads and lookups go through these interfaces: a method call through an
// interface costs no allocation, and nothing here takes a func value or
// boxes a value per call.

// Cache is what a mount needs of the cache its Source belongs to.
type Cache interface {
	// ChunkSize says which files get a sequential detector (those of
	// more than one chunk) and is the detector's unit.
	ChunkSize() int64
	// Dir is where the passthrough probe makes its backing file: the
	// filesystem the cache files that passthrough hands over live on.
	Dir() string
	// Capacity (0: unlimited) and Used size a warm's plan (the room
	// left) and bound its fetches, so that earlier paths keep their room.
	Capacity() int64
	Used() int64
}

// Source is what a mount needs of the cache's view of its store: the
// bytes of its objects, and what it reports about them.
type Source interface {
	// Backend names the store (the mount's FsName and stats' source) and
	// may count its requests (backend.StatsReporter).
	Backend() backend.Backend
	// ReadAt serves a read; ReadAtStream one that a file's sequential
	// detector took for part of a stream (it stages the rest of a
	// chunk for the reader's next reads). Both are the read hot path.
	ReadAt(ctx context.Context, obj backend.Object, p []byte, off int64) (int, error)
	ReadAtStream(ctx context.Context, obj backend.Object, p []byte, off int64) (int, error)
	// ReadAtRandom serves a read of a file read at random (its reads
	// jump): an object bigger than the cache is then fetched in blocks
	// around what is read, not in chunks.
	ReadAtRandom(ctx context.Context, obj backend.Object, p []byte, off int64) (int, error)
	// PrefetchWatched fetches a chunk ahead of a sequential reader,
	// reporting its arrival to the detector's stream budget.
	PrefetchWatched(obj backend.Object, idx int, arrived func(n int), ended func())
	// ObjectID is the cache's name for an object: what the readahead
	// registry and path tables know files by.
	ObjectID(obj backend.Object) cache.ObjectID
	// RangeID is ObjectID(backend.RangeOf(parent, off, n)).
	RangeID(parent backend.Object, off, n int64) cache.ObjectID
	// OpenCached opens a wholly cached object's cache file, for a
	// passthrough open (cache.ErrNotCached otherwise).
	OpenCached(obj backend.Object) (*os.File, error)
	// ReadCached reads cached bytes only (cache.ErrNotCached where a
	// read would fetch): what a push into the page cache sends (push.go).
	ReadCached(obj backend.Object, p []byte, off int64) (int, error)
	// NewBatch reads many cached small files at once, for pushes and
	// batched READs; ReadStaged serves a small file from memory where a
	// fetch ahead of its reader left it, before a batched READ would
	// read it from disk.
	NewBatch(depth int, maxSize int64) (*cache.Batch, error)
	ReadStaged(obj backend.Object, p []byte) (int, bool)
	// CachedBytes, NumChunks, ChunkLen, ChunkCached and Warm serve the
	// control entry's warm: its plan, then a fetch of each chunk not
	// cached, through the same flights as reads. CachedBytes also
	// answers which files of a table are cached (cached.go).
	CachedBytes(obj backend.Object) (int64, error)
	NumChunks(obj backend.Object) int
	ChunkLen(obj backend.Object, idx int) int64
	ChunkCached(obj backend.Object, idx int) bool
	Warm(ctx context.Context, obj backend.Object, idx int, prio cache.Priority, fetched func()) (cache.WarmOutcome, error)
	// Stats are the source's figures, reported in the mount's stats.
	Stats() cache.SourceStats
}

// Readahead is a mount's view of the readahead registry (optional: a
// mount without one refuses orders and reports no jobs).
type Readahead interface {
	// Declare and End serve the control entry's order requests.
	Declare(d readahead.Declaration) (readahead.Declared, error)
	End(name string, owner uint32, override bool) bool
	// Jobs are the declared jobs, for stats.
	Jobs() []readahead.JobStats
	// Observe is told of every read before it is served (the reading
	// process and user attribute it to a job); done, if not nil, is
	// called when the read is.
	Observe(obj backend.Object, id cache.ObjectID, pid int, uid uint32) (done func())
	// Pick is which of ids, declared ranges that share a read's bytes,
	// the read is: the one a job wants nearest its furthest read; -1 if
	// none is wanted.
	Pick(ids []cache.ObjectID) int
}

// The types the daemon passes.
var (
	_ Cache     = (*cache.Cache)(nil)
	_ Source    = (*cache.Source)(nil)
	_ Readahead = (*readahead.Mount)(nil)
)

// readaheadOf is cfg's readahead, or nil for none. A nil pointer stored
// in an interface is not a nil interface: the daemon's `Readahead: ra`,
// with ra a nil *readahead.Mount, must read as absent, not as a registry
// whose every call panics.
func readaheadOf(r Readahead) Readahead {
	if m, ok := r.(*readahead.Mount); ok && m == nil {
		return nil
	}
	return r
}
