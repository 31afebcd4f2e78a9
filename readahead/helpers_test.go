package readahead

import (
	"fmt"
	"testing"

	"github.com/dsmount/dsmount/backend/memory"
	"github.com/dsmount/dsmount/cache"
)

// newTestMount returns a Registry with no prefetch, its mount "m" over n
// one-byte objects in memory (cached in a fresh cache dir), and the
// objects as items, in key order. Both are closed when the test ends.
func newTestMount(t *testing.T, n int) (*Registry, *Mount, []Item) {
	t.Helper()
	mem := memory.New()
	reg := New(Config{NoPrefetch: true})
	t.Cleanup(reg.Close)
	c, err := cache.Open(t.TempDir(), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	src := c.Source(mem)
	items := make([]Item, n)
	for i := range items {
		obj := mem.Put(fmt.Sprintf("f%06d", i), []byte{byte(i)})
		items[i] = Item{Obj: obj, ID: src.ObjectID(obj)}
	}
	return reg, reg.Mount("m", src), items
}
