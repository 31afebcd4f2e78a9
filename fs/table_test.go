package fs

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
	"github.com/dsmount/dsmount/cache"
	"github.com/dsmount/dsmount/internal/control"
)

// tableMount is a Mount of l with just what declarations by table need:
// its tree and a source on a fresh cache.
func tableMount(tb testing.TB, l *backend.Listing) *Mount {
	_, src := emptySource(tb)
	return &Mount{tree: buildTree(l, time.Now(), ControlName), src: src}
}

// emptySource is a fresh cache (default options) and its source over an
// empty store in memory, both closed when the test ends.
func emptySource(tb testing.TB) (*cache.Cache, *cache.Source) {
	tb.Helper()
	c, err := cache.Open(tb.TempDir(), cache.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	src := c.Source(memory.New())
	tb.Cleanup(src.Close)
	return c, src
}

// TestTableResolvesAsLookup: a table resolves each path to what a lookup
// finds, whether the paths come in the listing's order (where the next
// file is tried first) or not, with directories, missing, repeated and
// unclean paths among them.
func TestTableResolvesAsLookup(t *testing.T) {
	l := &backend.Listing{}
	var sorted []string
	for d := range 5 {
		for f := range 7 {
			key := fmt.Sprintf("d%d/f%02d.jpg", d, f)
			l.Append(backend.Object{Key: key, Size: 10, Version: "v", ModTime: time.Unix(1, 0)})
			sorted = append(sorted, key)
		}
	}
	m := tableMount(t, l)
	src := m.src

	shuffled := append([]string(nil), sorted...)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	odd := []string{"d0/f00.jpg", "d0/f01.jpg", "d0", "d0/f02.jpg", "d0//f03.jpg", "d0/./f04.jpg", "d0/f04.jpg", "d0/f04.jpg",
		"nope.jpg", "d0/f06.jpg", "d1/f00.jpg", "d1/f02.jpg", "d1/f01.jpg", "d9/f00.jpg", "d4/f06.jpg"}
	for name, paths := range map[string][]string{"sorted": sorted, "shuffled": shuffled, "odd": odd} {
		t.Run(name, func(t *testing.T) {
			var payload []byte
			for _, p := range paths {
				payload = append(append(payload, p...), 0)
			}
			m.tables = tables{}
			tab, err := m.table(control.Request{Table: control.TableName(payload), TablePayload: payload})
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range paths {
				e, ok := m.tree.lookup(p)
				want := noFile
				if ok && !e.isDir() {
					want = e.idx
				}
				if tab.refs[i] != want {
					t.Errorf("%q: table says file %d, lookup %d", p, tab.refs[i], want)
				}
				if want != noFile && tab.ids[i] != src.ObjectID(m.tree.obj(e)) {
					t.Errorf("%q: wrong object ID", p)
				}
			}
		})
	}
}
