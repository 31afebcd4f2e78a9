package cache

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsmount/dsmount/backend/memory"
	"github.com/dsmount/dsmount/test/testenv"
)

// TestIndexSurvivesAFullDisk: with its filesystem full and before the
// space guard has noticed, the cache keeps storing into room it holds (a
// pack's preallocated space) and committing index records; another writer
// then takes the room the reserve gave back too. The index writes its log
// and tables through memory maps, where a page written with no block left
// is a SIGBUS that would kill this test process: its log must have been
// allocated beforehand, and no flush may start without room (Close then
// leaves the index for its log to be replayed at the next start, which the
// crash tests under test/ cover).
func TestIndexSurvivesAFullDisk(t *testing.T) {
	dir := testenv.SmallFS(t, "160m")
	mem := memory.New()
	objs := putRandom(mem, rand.New(rand.NewPCG(43, 44)), "o%04d", 2000, 4<<10)
	c := openCache(t, filepath.Join(dir, "cache"), Options{spaceCheckEvery: time.Hour})
	s := c.Source(mem)
	readAll(t, s, objs[0]) // a pack, with room preallocated for the rest
	testenv.FillFS(t, dir)
	for i, o := range objs[1:] {
		if i == 100 {
			// The first commits gave the reserve back: take that too.
			c.Settle()
			c.disk.commits.barrier()
			testenv.FillFS(t, dir)
		}
		if got := readAll(t, s, o); !bytes.Equal(got, mem.Data(o.Key)) {
			t.Fatalf("%s: wrong bytes", o.Key)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}
