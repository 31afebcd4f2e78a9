package fs

import (
	"context"
	"errors"
	"fmt"

	"github.com/dsmount/dsmount/internal/control"
)

// cached serves a "cached" request: which files of a path table are
// wholly in the node's cache, as a bitmap over the table. A distributed
// sampler gathers every node's answer to hand each sample to a rank whose
// node holds it (python/dsmount/locality.py).
//
// What it reports is a snapshot: a file may be evicted or fetched the
// moment after. It creates no state for files never cached, and costs per
// file what warm --check does (Source.CachedBytes: the object's cache
// name, a lookup of the in-memory objects, and for a file cached on disk
// but not yet loaded, its index records). The sampler asks once an epoch
// from one rank a node.
func (m *Mount) cached(ctx context.Context, req control.Request, emit func(control.Event)) {
	fail := func(err error) { emit(control.Event{Type: control.EventError, Error: "cached: " + err.Error()}) }
	if req.Table == "" {
		fail(errors.New("name a path table (table, and table_bytes with the table to send it)"))
		return
	}
	if len(req.Paths)+len(req.Next)+len(req.Indices)+len(req.NextIndices) > 0 {
		fail(errors.New("a cached request takes a table alone, no paths or indices"))
		return
	}
	t, err := m.table(req)
	if errors.Is(err, ErrUnknownTable) {
		emit(control.Event{Type: control.EventError, Error: "cached: " + err.Error(), Code: control.CodeUnknownTable})
		return
	}
	if err != nil {
		fail(err)
		return
	}
	res := &control.CachedResult{Files: len(t.refs), Bitmap: make([]byte, (len(t.refs)+7)/8)}
	failed := 0
	for i, ref := range t.refs {
		if i%4096 == 0 && ctx.Err() != nil {
			fail(fmt.Errorf("interrupted: %w", ctx.Err()))
			return
		}
		if ref == noFile {
			continue
		}
		obj := m.tree.obj(entry{idx: ref})
		n, err := m.src.CachedBytes(obj)
		if err != nil {
			// An index that can't be read answers "not cached": the
			// sampler only loses a hit. Said once a request.
			if failed == 0 {
				m.log.Warn("cached: reading the cache index", "key", obj.Key, "err", err)
			}
			failed++
			continue
		}
		if n != obj.Size {
			continue
		}
		res.Bitmap[i/8] |= 1 << (i % 8)
		res.Cached++
	}
	emit(control.Event{Type: control.EventResult, Cached: res})
}
