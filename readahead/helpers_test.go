package readahead

import (
	"fmt"
	"testing"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
	"github.com/dsmount/dsmount/cache"
)

// objList resolves an item's Ref as an index into it.
type objList []backend.Object

func (l objList) Object(ref uint32) backend.Object { return l[ref] }
func (l objList) Empty(ref uint32) bool            { return l[ref].Size == 0 }

// sized resolves every Ref to an object of that many bytes.
type sized int64

func (s sized) Object(uint32) backend.Object { return backend.Object{Size: int64(s)} }
func (s sized) Empty(uint32) bool            { return s == 0 }

// newTestMount returns a Registry with no prefetch, its mount "m" over n
// one-byte objects in memory (cached in a fresh cache dir), and the
// objects as items, in key order. Both are closed when the test ends.
func newTestMount(t testing.TB, n int) (*Registry, *testMount, []Item) {
	t.Helper()
	mem := memory.New()
	reg := New(Config{NoPrefetch: true})
	t.Cleanup(reg.Close)
	src, objs, items := cachedObjects(t, mem, mem, n)
	return reg, &testMount{reg.Mount("m", src), objs}, items
}

// cachedObjects puts n one-byte objects in mem, in key order, and opens a
// fresh cache (closed when the test ends) whose source reads through b (mem
// or a wrapper of it); it returns the source, the objects, and them as
// items.
func cachedObjects(t testing.TB, mem *memory.Backend, b backend.Backend, n int) (*cache.Source, objList, []Item) {
	t.Helper()
	c, err := cache.Open(t.TempDir(), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	src := c.Source(b)
	items := make([]Item, n)
	objs := make(objList, n)
	for i := range items {
		objs[i] = mem.Put(fmt.Sprintf("f%06d", i), []byte{byte(i)})
		items[i] = Item{Ref: uint32(i), ID: src.ObjectID(objs[i])}
	}
	return src, objs, items
}

// testMount declares with its objects.
type testMount struct {
	*Mount
	objs objList
}

func (m *testMount) Declare(d Declaration) (Declared, error) {
	d.Objects = m.objs
	return m.Mount.Declare(d)
}
