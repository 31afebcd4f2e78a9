package cache

import (
	"sync"

	"github.com/dsmount/dsmount/cache/internal/bufs"
)

// Priority orders backend fetches when the fetch slots are all taken.
type Priority int

const (
	// Foreground is a fetch someone is waiting for now: a read that missed,
	// or a warm request.
	Foreground Priority = iota
	// Background is a fetch for the future: readahead and prefetch. It
	// never takes the slots reserved for foreground fetches, and a waiting
	// foreground fetch always gets the next free slot first.
	Background
)

// chunkFlight is what a chunk's flight carries (flight.Flight.Val): its
// bytes, on their way to the readers that joined and then to the staging
// area or the pool (bufs.Buf), and whether they came from the backend.
type chunkFlight struct {
	buf         *bufs.Buf
	fromBackend bool
	// counted is closed once the cache has decided whether to keep the
	// chunk and, if so, counted it against its capacity (or the flight
	// failed): a warm's reservation for the chunk may go then, neither
	// earlier (a gap where nobody counts it let a warm over-admit) nor
	// once written (it would count twice meanwhile).
	counted   chan struct{}
	countOnce sync.Once
}

// chunkResult is what a caller of a chunk's flight gets: the chunk's bytes
// (for a reader that joined; nil for the others), and whether they came
// from the backend.
type chunkResult struct {
	data        []byte
	fromBackend bool
}

// newChunkFlight is the flight group's maker of a chunk flight's state.
func (c *Cache) newChunkFlight(key chunkID) *chunkFlight {
	return &chunkFlight{
		counted: make(chan struct{}),
		buf: bufs.NewBuf(bufs.Sink{
			Stage:   func(data []byte, took int64) { c.fetch.staged.put(key, data, took) },
			Recycle: c.bufs.Put,
		}),
	}
}

// markCounted closes counted; later calls do nothing.
func (f *chunkFlight) markCounted() { f.countOnce.Do(func() { close(f.counted) }) }

// result is the flight's result as a caller sees it: with the bytes for a
// reader, without for the others.
func (f *chunkFlight) result(reader bool) chunkResult {
	res := chunkResult{fromBackend: f.fromBackend}
	if reader {
		res.data = f.buf.Data()
	}
	return res
}
