package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/dsmount/dsmount/backend"
)

func TestObjectRecordRoundTrip(t *testing.T) {
	in := Object{
		Meta:        Meta{Source: "s3://b/p/", Key: "dir/ünï 文件.bin", Size: 123456789, Version: "abc-1", ChunkSize: 4 << 20},
		CachedBytes: 4 << 20,
		Accessed:    1_790_000_000,
		Pack:        0xfedcba9876543210,
		PackOff:     3 << 30,
	}
	var out Object
	if err := out.Unmarshal(in.Marshal()); err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Fatalf("round trip: %+v != %+v", out, in)
	}
	b := in.Marshal()
	for _, bad := range [][]byte{nil, {2}, {3}, b[:len(b)-3]} {
		if err := out.Unmarshal(bad); err == nil {
			t.Errorf("unmarshal(%x) accepted a truncated or unknown record", bad)
		}
	}
	in.CachedBytes = in.Size + 1
	if err := out.Unmarshal(in.Marshal()); err == nil {
		t.Error("accepted cached bytes beyond the object's size")
	}
}

// TestObjectRecordVersion1 reads a record written before packs: no
// location, the object's bytes are in its own file.
func TestObjectRecordVersion1(t *testing.T) {
	in := Object{
		Meta:        Meta{Source: "file:///d", Key: "a/b", Size: 1000, Version: "v", ChunkSize: 4 << 20},
		CachedBytes: 1000,
		Accessed:    7,
	}
	b := in.Marshal()
	b[0] = 1
	// Version 1 ends after Accessed: drop the location fields (Pack 0 and
	// PackOff 0 take one byte each).
	b = b[:len(b)-2]
	var out Object
	if err := out.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Fatalf("version 1: %+v != %+v", out, in)
	}
}

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
	return enc.EncodeAll(EncodeEntries(nil, objs, 0, objs.Len()), nil)
}

// FuzzListingPage: a stored listing page, whatever its bytes (truncated,
// not zstd, a frame claiming gigabytes), decodes to entries or a corrupt
// record error, never a panic or an allocation of what it claims; what
// it accepts, stored again, reads back the same.
func FuzzListingPage(f *testing.F) {
	dec, err := NewPageDecoder()
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
		raw, err := DecodeListingPage(dec, v, nil, objs)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("page %x: %v, not a corrupt record", v, err)
			}
			return
		}
		if len(raw) > MaxListingPageDecoded {
			t.Fatalf("page of %d bytes decoded to %d", len(v), len(raw))
		}
		again := &backend.Listing{}
		if _, err := DecodeListingPage(dec, encodePage(t, objs), nil, again); err != nil || again.Len() != objs.Len() {
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
// their strings (UnmarshalCounts) and purges by their source alone
// (SourceOf); both agree with the whole record: the same records
// are corrupt, the counts are the same, the source is the same.
func FuzzObjectRecordCounts(f *testing.F) {
	f.Add((&Object{Meta: Meta{Source: "s3://b/p", Key: "k", Size: 10, Version: "v", ChunkSize: 4096}, CachedBytes: 10, Accessed: 7, Pack: 3, PackOff: 4096}).Marshal())
	f.Add((&Object{Meta: Meta{Source: "", Key: "", Size: 0, ChunkSize: 1}}).Marshal())
	f.Add([]byte{1, 1, 'x', 0, 0, 0, 2, 0, 0})
	f.Add([]byte{2, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var whole, counts Object
		errWhole, errCounts := whole.Unmarshal(b), counts.UnmarshalCounts(b)
		if (errWhole == nil) != (errCounts == nil) {
			t.Fatalf("%x: unmarshal %v, UnmarshalCounts %v", b, errWhole, errCounts)
		}
		if errWhole != nil {
			return
		}
		if counts.Source != "" || counts.Key != "" || counts.Version != "" {
			t.Fatalf("UnmarshalCounts kept strings: %+v", counts)
		}
		counts.Source, counts.Key, counts.Version = whole.Source, whole.Key, whole.Version
		if counts != whole {
			t.Fatalf("%x: counts %+v, whole %+v", b, counts, whole)
		}
		if src := SourceOf(b); src != whole.Source {
			t.Fatalf("%x: recordSource %q, record's %q", b, src, whole.Source)
		}
	})
}

// Records read back from disk (the index) are parsed by these; whatever
// the bytes, they return an error or a value, never panic, and what they
// accept marshals back to what they read.
func FuzzListingMeta(f *testing.F) {
	f.Add(ListingMeta{Gen: 3, Pages: 2, Saved: time.Unix(5, 6), Format: ListingFormat}.Marshal())
	f.Add(make([]byte, 20))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m ListingMeta
		if err := m.Unmarshal(b); err != nil {
			return
		}
		if len(b) == 21 && !bytes.Equal(m.Marshal(), b) {
			t.Fatalf("%x read as %+v, written back as %x", b, m, m.Marshal())
		}
	})
}

func FuzzListingEntries(f *testing.F) {
	seed := backend.NewListing([]backend.Object{{Key: "d/ü", Size: 7, Version: "v", ModTime: time.Unix(9, 1)}, {Key: "", Size: -1}})
	f.Add(EncodeEntries(nil, seed, 0, seed.Len()))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		objs := &backend.Listing{}
		if err := decodeEntries(b, objs); err != nil {
			return
		}
		again := &backend.Listing{}
		if err := decodeEntries(EncodeEntries(nil, objs, 0, objs.Len()), again); err != nil || again.Len() != objs.Len() {
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
	f.Add((&Object{Meta: Meta{Source: "s", Key: "k", Size: 10, Version: "v", ChunkSize: 4096}, CachedBytes: 10}).Marshal())
	f.Add([]byte{1})
	f.Add([]byte{2, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Object
		if err := r.Unmarshal(b); err != nil {
			return
		}
		if r.Size < 0 || r.ChunkSize <= 0 || r.CachedBytes < 0 || r.CachedBytes > r.Size || r.PackOff < 0 {
			t.Fatalf("accepted an impossible record %+v from %x", r, b)
		}
		var again Object
		if err := again.Unmarshal(r.Marshal()); err != nil || again != r {
			t.Fatalf("%+v written back reads as %+v (%v)", r, again, err)
		}
	})
}

func FuzzChunkRecord(f *testing.F) {
	f.Add(Chunk{Len: 2, Sums: []uint32{1}}.Marshal())
	f.Add(Chunk{Len: 300 << 10, Sums: []uint32{1, 2, 3}}.Marshal())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Chunk
		if err := r.Unmarshal(b); err != nil {
			return
		}
		if len(r.Sums) == 0 || (!r.Whole && len(r.Sums) != BlocksIn(int64(r.Len))) || !bytes.Equal(r.Marshal(), b) {
			t.Fatalf("%x read as %+v", b, r)
		}
	})
}
