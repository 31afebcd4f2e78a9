package cache

import (
	"bytes"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/dsmount/dsmount/backend"
)

// TestOldFormatListingIsNotUsed: a listing stored by a dsmount whose
// backends made other versions (format 1, before the format byte) is not
// used; the mount lists its source again.
func TestOldFormatListingIsNotUsed(t *testing.T) {
	c := openCache(t, t.TempDir(), Options{})
	defer c.Close()
	objs := []backend.Object{{Key: "a", Size: 1, Version: "1-2-3", ModTime: time.Unix(1, 0)}}
	if err := c.SaveListing("src", backend.NewListing(objs)); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := c.LoadListing("src"); !ok || err != nil {
		t.Fatalf("listing just saved: ok=%v err=%v", ok, err)
	}
	// As an older dsmount wrote it: the same meta without its last byte.
	err := c.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(listingMetaKey("src"))
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		return txn.Set(listingMetaKey("src"), v[:20])
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := c.LoadListing("src"); ok || err != nil {
		t.Fatalf("format 1 listing: ok=%v err=%v; want it ignored", ok, err)
	}
}

// Records read back from disk (the index) are parsed by these; whatever
// the bytes, they return an error or a value, never panic, and what they
// accept marshals back to what they read.
func FuzzListingMeta(f *testing.F) {
	f.Add(listingMeta{gen: 3, pages: 2, saved: time.Unix(5, 6), format: listingFormat}.marshal())
	f.Add(make([]byte, 20))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m listingMeta
		if err := m.unmarshal(b); err != nil {
			return
		}
		if len(b) == 21 && !bytes.Equal(m.marshal(), b) {
			t.Fatalf("%x read as %+v, written back as %x", b, m, m.marshal())
		}
	})
}

func FuzzListingEntries(f *testing.F) {
	seed := backend.NewListing([]backend.Object{{Key: "d/ü", Size: 7, Version: "v", ModTime: time.Unix(9, 1)}, {Key: "", Size: -1}})
	f.Add(encodeEntries(nil, seed, 0, seed.Len()))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		objs := &backend.Listing{}
		if err := decodeEntries(b, objs); err != nil {
			return
		}
		again := &backend.Listing{}
		if err := decodeEntries(encodeEntries(nil, objs, 0, objs.Len()), again); err != nil || again.Len() != objs.Len() {
			t.Fatalf("%d entries read from %x decode to %d (%v) once written back", objs.Len(), b, again.Len(), err)
		}
		for i := range objs.Len() {
			if a, o := again.At(i), objs.At(i); a.Key != o.Key || a.Version != o.Version || a.Size != o.Size || !a.ModTime.Equal(o.ModTime) {
				t.Fatalf("entry %d %+v written back reads as %+v", i, o, a)
			}
		}
	})
}

func FuzzObjectRecord(f *testing.F) {
	f.Add((&objectRecord{objectMeta: objectMeta{Source: "s", Key: "k", Size: 10, Version: "v", ChunkSize: 4096}, CachedBytes: 10}).marshal())
	f.Add([]byte{1})
	f.Add([]byte{2, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r objectRecord
		if err := r.unmarshal(b); err != nil {
			return
		}
		if r.Size < 0 || r.ChunkSize <= 0 || r.CachedBytes < 0 || r.CachedBytes > r.Size || r.PackOff < 0 {
			t.Fatalf("accepted an impossible record %+v from %x", r, b)
		}
		var again objectRecord
		if err := again.unmarshal(r.marshal()); err != nil || again != r {
			t.Fatalf("%+v written back reads as %+v (%v)", r, again, err)
		}
	})
}

func FuzzChunkRecord(f *testing.F) {
	f.Add(chunkRecord{Len: 2, Sums: []uint32{1}}.marshal())
	f.Add(chunkRecord{Len: 300 << 10, Sums: []uint32{1, 2, 3}}.marshal())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r chunkRecord
		if err := r.unmarshal(b); err != nil {
			return
		}
		if len(r.Sums) == 0 || (!r.Whole && len(r.Sums) != blocksIn(int64(r.Len))) || !bytes.Equal(r.marshal(), b) {
			t.Fatalf("%x read as %+v", b, r)
		}
	})
}
