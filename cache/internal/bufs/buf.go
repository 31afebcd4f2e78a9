package bufs

import "sync"

// Buf is one chunk buffer on its way from the flight that filled it to
// its next holder, and the decision where it goes then. While the flight
// runs and after, the readers that joined it may copy from it; once the
// flight is over and the last of them is done, the buffer is handed on,
// once: to the staging area (Sink.Stage) when it was fetched ahead of any
// reader, or when a reader that will read the rest of the chunk (a
// sequential stream, whose reads of one chunk come concurrently and in any
// order) joined; otherwise back to the pool (Sink.Recycle). Callers that
// don't read the bytes never touch them.
//
// Without the count, a read that caught up with a prefetch left its
// buffer to the garbage collector: half the buffers of a cold epoch.
//
// Join must be ordered with End (the flight's group calls both under its
// lock), so that no reader joins a buffer already handed on.
type Buf struct {
	sink Sink

	mu   sync.Mutex
	data []byte
	// refs counts the readers that joined and have not released since;
	// took sums the bytes they copied out, so a staged buffer keeps only
	// what is still to be read.
	refs int
	took int64
	// readers: a reader joined. ahead: fetched ahead of any reader.
	// keepRest: a joined reader will read the rest. ended: the flight is
	// over, and the last release hands the buffer on.
	readers, ahead, keepRest, ended bool
}

// Sink is where a Buf goes once nobody reads it.
type Sink struct {
	// Stage keeps data for readers still to come, of which took bytes
	// were read already; it owns data from then on.
	Stage func(data []byte, took int64)
	// Recycle gives data back to the pool.
	Recycle func(data []byte)
}

// NewBuf is a Buf with nothing in it yet, that goes to sink.
func NewBuf(sink Sink) *Buf { return &Buf{sink: sink} }

// Join counts a reader in; keepRest says it will read the rest of the
// chunk. The reader must Release once it no longer uses the bytes.
func (b *Buf) Join(keepRest bool) {
	b.mu.Lock()
	b.readers = true
	b.refs++
	b.keepRest = b.keepRest || keepRest
	b.mu.Unlock()
}

// Set gives the buffer its bytes, before its flight publishes them; ahead
// says they were fetched ahead of any reader.
func (b *Buf) Set(data []byte, ahead bool) {
	b.mu.Lock()
	b.data, b.ahead = data, ahead
	b.mu.Unlock()
}

// Data is the buffer's bytes, nil if it has none. Only readers that
// joined may use them, until they Release.
func (b *Buf) Data() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.data
}

// staged says where the buffer goes once nobody reads it; b.mu is held.
func (b *Buf) staged() bool { return b.keepRest || (b.ahead && !b.readers) }

// End says the flight is over: the buffer is handed on now if no reader
// holds it, else by the last Release.
func (b *Buf) End() {
	b.mu.Lock()
	var recycle []byte
	switch {
	case b.data == nil:
	case b.refs > 0:
		// Readers are still copying. A read arriving before the last is
		// done finds the chunk in neither the flight nor the staging
		// area and reads it from its cache file; its bytes are not
		// counted in took, so a staged rest may stay until pushed out.
		b.ended = true
	case b.staged() && b.sink.Stage != nil:
		// Staged before End returns, under the flight group's lock: a
		// reader arriving now finds it either in the flight or staged.
		b.sink.Stage(b.data, b.took)
	default:
		recycle = b.data
	}
	b.mu.Unlock()
	if recycle != nil && b.sink.Recycle != nil {
		b.sink.Recycle(recycle)
	}
}

// Release ends a reader's use of the bytes, of which it copied took; the
// last one out of an ended flight hands the buffer on.
func (b *Buf) Release(took int) {
	b.mu.Lock()
	b.refs--
	b.took += int64(took)
	last := b.refs == 0 && b.ended
	if last && b.staged() && b.sink.Stage != nil {
		b.sink.Stage(b.data, b.took)
		last = false
	}
	data := b.data
	b.mu.Unlock()
	if last && b.sink.Recycle != nil {
		b.sink.Recycle(data)
	}
}

// Readers is the number of readers holding the buffer now.
func (b *Buf) Readers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refs
}
