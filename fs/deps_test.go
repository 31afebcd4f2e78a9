package fs

import (
	"bytes"
	"context"
	"runtime/debug"
	"testing"

	"github.com/dsmount/dsmount/readahead"
)

// TestNilReadaheadIsAbsent: the daemon's Config{Readahead: ra} with ra a
// nil *readahead.Mount puts a non-nil interface in the Config; the mount
// must take it as no readahead: reads don't report to it (no panic),
// orders are refused, stats list no jobs.
func TestNilReadaheadIsAbsent(t *testing.T) {
	s := newStore(map[string]int{"f": 3*testChunk + 1})
	c := openCache(t)
	src := c.Source(s)
	t.Cleanup(src.Close)
	var ra *readahead.Mount
	m := New(Config{Cache: c, Source: src, Listing: s.listing(), Readahead: ra})
	if m.ra != nil {
		t.Fatalf("a nil *readahead.Mount became the mount's readahead: %#v", m.ra)
	}
	e, ok := m.tree.lookup("f")
	if !ok {
		t.Fatal("f is not in the tree")
	}
	dest := make([]byte, 3*testChunk+1)
	res, errno := m.newNode(e).Read(context.Background(), nil, dest, 0)
	if errno != 0 {
		t.Fatalf("read: %v", errno)
	}
	if got, _ := res.Bytes(nil); !bytes.Equal(got, payload("f", 3*testChunk+1)) {
		t.Errorf("read %d bytes, not the store's", len(got))
	}
	evs := send(m, Caller{UID: 0, Privileged: true}, []byte(`{"op":"order","job":"j","paths":["f"]}`+"\n"))
	if len(evs) != 1 || evs[0].Type != "error" {
		t.Errorf("an order without readahead: %+v; want an error", evs)
	}
	if jobs := m.Jobs(); jobs == nil || len(jobs) != 0 {
		t.Errorf("jobs without readahead: %#v; want an empty list", jobs)
	}
}

// TestReadAllocations: a read through a node costs what the source's
// ReadAt costs, and the reply (fuse.ReadResultData) alone besides: the
// interfaces fs reads through box nothing per read, and neither does the
// errno mapping of a read that succeeded (toErrno's errors.As target
// cost one a read while it was declared before the nil case). A file of
// one chunk (no sequential detector, whose stream reads take another
// path in the cache), cached, so that no fetch's allocations blur the
// count; the collector off, so that it doesn't empty the cache's buffer
// pools during one count and not the other.
func TestReadAllocations(t *testing.T) {
	s := newStore(map[string]int{"f": 3000})
	c := openCache(t)
	src := c.Source(s)
	t.Cleanup(src.Close)
	m := New(Config{Cache: c, Source: src, Listing: s.listing()})
	warmObject(t, src, s.objs["f"])
	e, _ := m.tree.lookup("f")
	n := m.newNode(e)
	if n.seq != nil {
		t.Fatal("a file of one chunk has a sequential detector")
	}
	ctx := context.Background()
	dest := make([]byte, 2048)
	obj := n.obj() // as the tree lists it
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var si Source = src // called as the node calls it
	direct := testing.AllocsPerRun(500, func() {
		if _, err := si.ReadAt(ctx, obj, dest, 0); err != nil {
			t.Fatal(err)
		}
	})
	through := testing.AllocsPerRun(500, func() {
		if _, errno := n.Read(ctx, nil, dest, 0); errno != 0 {
			t.Fatal(errno)
		}
	})
	if through > direct+1 {
		t.Errorf("a read through the node allocates %.1f times, the source's ReadAt %.1f; want one more at most (the reply)", through, direct)
	}
}
