package cache

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache/internal/record"
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
	v, err := c.disk.index.ListingMetaBytes("src")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.disk.index.SetListingBytes("src", -1, v[:20]); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := c.LoadListing("src"); ok || err != nil {
		t.Fatalf("format 1 listing: ok=%v err=%v; want it ignored", ok, err)
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
		if err := c.disk.index.SetListingBytes("src", 0, zstdClaiming(60<<30, single)); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, ok, err := c.LoadListing("src")
		runtime.ReadMemStats(&after)
		if ok || !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("single segment %v: ok=%v err=%v; want a corrupt record", single, ok, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<30 {
			t.Errorf("single segment %v: %d MiB allocated for a 17-byte page", single, n>>20)
		}
	}
}
