package cache

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/klauspost/compress/zstd"

	"github.com/dsmount/dsmount/backend"
)

// zstdClaiming is a zstd frame of one byte whose header claims size
// bytes of content: single-segment (the window is the size) or with a
// 16 MiB window, which a decoder accepts for any claimed size.
func zstdClaiming(size uint64, singleSegment bool) []byte {
	b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xc0, 0x70} // magic; 8-byte size; window 2^24
	if singleSegment {
		b = []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0}
	}
	b = binary.LittleEndian.AppendUint64(b, size)
	return append(b, 0x09, 0, 0, 'x') // last block, raw, 1 byte
}

// encodePage is a listing page as SaveListing stores it.
func encodePage(tb testing.TB, objs *backend.Listing) []byte {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		tb.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(encodeEntries(nil, objs, 0, objs.Len()), nil)
}

// TestListingPageClaimingHugeSizeIsRefused: a stored listing page whose
// zstd header claims 60 GiB (17 bytes on disk: a corrupt index, or one
// written by hand) is refused as corrupt without allocating what it
// claims, and the mount lists its source again. Without the decoder's
// bound, the daemon died at every mount with "runtime: out of memory".
func TestListingPageClaimingHugeSizeIsRefused(t *testing.T) {
	c := openCache(t, t.TempDir(), Options{})
	defer c.Close()
	objs := backend.NewListing([]backend.Object{{Key: "a", Size: 1, Version: "v", ModTime: time.Unix(1, 0)}})
	if err := c.SaveListing("src", objs); err != nil {
		t.Fatal(err)
	}
	for _, single := range []bool{false, true} {
		err := c.db.Update(func(txn *badger.Txn) error {
			m, _, err := c.listingMeta(txn, "src")
			if err != nil {
				return err
			}
			return txn.Set(listingPageKey("src", m.gen, 0), zstdClaiming(60<<30, single))
		})
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, ok, err := c.LoadListing("src")
		runtime.ReadMemStats(&after)
		if ok || !errors.Is(err, errCorruptRecord) {
			t.Errorf("single segment %v: ok=%v err=%v; want a corrupt record", single, ok, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<30 {
			t.Errorf("single segment %v: %d MiB allocated for a 17-byte page", single, n>>20)
		}
	}
}

// FuzzListingPage: a stored listing page, whatever its bytes (truncated,
// not zstd, a frame claiming gigabytes), decodes to entries or a corrupt
// record error, never a panic or an allocation of what it claims; what
// it accepts, stored again, reads back the same.
func FuzzListingPage(f *testing.F) {
	dec, err := newPageDecoder()
	if err != nil {
		f.Fatal(err)
	}
	defer dec.Close()
	page := encodePage(f, backend.NewListing([]backend.Object{
		{Key: "d/ü", Size: 7, Version: "v", ModTime: time.Unix(9, 1)}, {Key: "a\x00b", Size: 0, Version: ""}, {Key: "../x", Size: 1 << 40},
	}))
	f.Add(page)
	f.Add(page[:len(page)/2])
	f.Add(zstdClaiming(60<<30, false))
	f.Add(zstdClaiming(400<<20, true))
	f.Add(zstdClaiming(1, false))
	f.Add([]byte{})
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd})
	f.Fuzz(func(t *testing.T, v []byte) {
		objs := &backend.Listing{}
		raw, err := decodeListingPage(dec, v, nil, objs)
		if err != nil {
			if !errors.Is(err, errCorruptRecord) {
				t.Fatalf("page %x: %v, not a corrupt record", v, err)
			}
			return
		}
		if len(raw) > maxListingPageDecoded {
			t.Fatalf("page of %d bytes decoded to %d", len(v), len(raw))
		}
		again := &backend.Listing{}
		if _, err := decodeListingPage(dec, encodePage(t, objs), nil, again); err != nil || again.Len() != objs.Len() {
			t.Fatalf("%d entries stored again read as %d (%v)", objs.Len(), again.Len(), err)
		}
		for i := range objs.Len() {
			if a, o := again.At(i), objs.At(i); a.Key != o.Key || a.Version != o.Version || a.Size != o.Size || !a.ModTime.Equal(o.ModTime) {
				t.Fatalf("entry %d %+v stored again reads as %+v", i, o, a)
			}
		}
	})
}

// FuzzObjectRecordCounts: the start-up scan reads object records without
// their strings (unmarshalCounts) and purges by their source alone
// (recordSource); both agree with the whole record: the same records
// are corrupt, the counts are the same, the source is the same.
func FuzzObjectRecordCounts(f *testing.F) {
	f.Add((&objectRecord{objectMeta: objectMeta{Source: "s3://b/p", Key: "k", Size: 10, Version: "v", ChunkSize: 4096}, CachedBytes: 10, Accessed: 7, Pack: 3, PackOff: 4096}).marshal())
	f.Add((&objectRecord{objectMeta: objectMeta{Source: "", Key: "", Size: 0, ChunkSize: 1}}).marshal())
	f.Add([]byte{1, 1, 'x', 0, 0, 0, 2, 0, 0})
	f.Add([]byte{2, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var whole, counts objectRecord
		errWhole, errCounts := whole.unmarshal(b), counts.unmarshalCounts(b)
		if (errWhole == nil) != (errCounts == nil) {
			t.Fatalf("%x: unmarshal %v, unmarshalCounts %v", b, errWhole, errCounts)
		}
		if errWhole != nil {
			return
		}
		if counts.Source != "" || counts.Key != "" || counts.Version != "" {
			t.Fatalf("unmarshalCounts kept strings: %+v", counts)
		}
		counts.Source, counts.Key, counts.Version = whole.Source, whole.Key, whole.Version
		if counts != whole {
			t.Fatalf("%x: counts %+v, whole %+v", b, counts, whole)
		}
		if src := recordSource(b); src != whole.Source {
			t.Fatalf("%x: recordSource %q, record's %q", b, src, whole.Source)
		}
	})
}
