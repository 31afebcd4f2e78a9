package index

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/dsmount/dsmount/cache/internal/record"
)

func openTest(t *testing.T, dir string) *DB {
	t.Helper()
	x, err := Open(filepath.Join(dir, "index"), dir, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func closeTest(t *testing.T, x *DB) {
	t.Helper()
	if closed, err := x.Close(); !closed || err != nil {
		t.Fatalf("close: closed %v, %v", closed, err)
	}
}

// TestRecordsReadBack: what the committer writes reads back through
// Object, Chunks, SourceObjects and the start-up scan, across a reopen;
// DeleteObject takes the chunk records and the object record, and only
// that object's.
func TestRecordsReadBack(t *testing.T) {
	dir := t.TempDir()
	x := openTest(t, dir)
	a := record.NewMeta("src", "a", 300<<10, "v1", 128<<10)
	b := record.NewMeta("other", "b", 10, "v1", 128<<10)
	err := x.Update(func(w Writer) error {
		for _, m := range []record.Meta{a, b} {
			rec := record.Object{Meta: m, CachedBytes: m.Size, Accessed: 7}
			if err := w.SetObject(m.ID(), &rec); err != nil {
				return err
			}
			for idx := range m.NumChunks() {
				if err := w.SetChunk(m.ID(), idx, record.Chunk{Len: uint32(m.ChunkLen(idx)), Sums: []uint32{uint32(idx + 1)}}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	closeTest(t, x)

	x = openTest(t, dir)
	defer closeTest(t, x)
	rec, found, err := x.Object(a.ID())
	if err != nil || !found || rec.Key != "a" || rec.CachedBytes != a.Size {
		t.Fatalf("object record: %+v found %v, %v", rec, found, err)
	}
	var idxs []int
	if err := x.Chunks(a.ID(), func(idx int, rec record.Chunk) { idxs = append(idxs, idx) }); err != nil || len(idxs) != 3 {
		t.Fatalf("chunk records %v, %v; want 3", idxs, err)
	}
	if ids, err := x.SourceObjects("src"); err != nil || len(ids) != 1 || ids[0] != a.ID() {
		t.Fatalf("source objects %v, %v", ids, err)
	}
	snap := x.Snapshot()
	var scanned int64
	snap.ScanObjects(func() bool { return false }, func(id record.ID, rec *record.Object, err error) {
		if err == nil {
			scanned += rec.CachedBytes
		}
	})
	snap.Discard()
	if scanned != a.Size+b.Size {
		t.Fatalf("scan counted %d bytes; want %d", scanned, a.Size+b.Size)
	}

	if err := x.DeleteObject(a.ID()); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := x.Object(a.ID()); found {
		t.Fatal("object record outlived DeleteObject")
	}
	n := 0
	x.Chunks(a.ID(), func(int, record.Chunk) { n++ })
	if n != 0 {
		t.Fatalf("%d chunk records outlived DeleteObject", n)
	}
	if _, found, _ := x.Object(b.ID()); !found {
		t.Fatal("DeleteObject took another object's record")
	}
}

// TestCorruptRecordsReadAsNone: an object record or chunk record that
// doesn't decode reads as none, so its chunks are fetched again.
func TestCorruptRecordsReadAsNone(t *testing.T) {
	x := openTest(t, t.TempDir())
	defer closeTest(t, x)
	m := record.NewMeta("src", "a", 10, "v", 4096)
	err := x.Update(func(w Writer) error {
		if err := w.SetObjectBytes(m.ID(), []byte{2, 0xff}); err != nil {
			return err
		}
		return w.SetChunk(m.ID(), 0, record.Chunk{Len: 0, Sums: []uint32{1}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, err := x.Object(m.ID()); found || err != nil {
		t.Fatalf("corrupt object record: found %v, %v; want none", found, err)
	}
	n := 0
	x.Chunks(m.ID(), func(int, record.Chunk) { n++ })
	if n != 0 {
		t.Fatal("a corrupt chunk record was read")
	}
}

// TestFormatIsChecked: an index of another format is refused with a
// message naming the cache directory and the format found.
func TestFormatIsChecked(t *testing.T) {
	dir := t.TempDir()
	x := openTest(t, dir)
	if err := x.db.Update(func(txn *badger.Txn) error {
		return txn.Set([]byte(record.FormatKey), []byte("dsmount-cache-0"))
	}); err != nil {
		t.Fatal(err)
	}
	closeTest(t, x)
	_, err := Open(filepath.Join(dir, "index"), dir, slog.New(slog.DiscardHandler), nil)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "dsmount-cache-0") {
		t.Fatalf("open of another format: %v", err)
	}
}
