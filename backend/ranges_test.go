package backend_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
)

func TestRangeObjects(t *testing.T) {
	m := memory.New()
	data := make([]byte, 10000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	parent := m.Put("d/train.bin", data)
	b := backend.WithRanges(m)
	ctx := context.Background()
	r := backend.RangeOf(parent, 4096, 3000)
	if r.Size != 3000 || r.Version != parent.Version {
		t.Fatalf("range object %+v of %+v", r, parent)
	}
	// A read past the range's end stops there, with io.EOF, as a read
	// past an object's end does.
	p := make([]byte, 3500)
	got, err := b.ReadAt(ctx, r, p, 100)
	if got != 2900 || err != io.EOF || !bytes.Equal(p[:got], data[4196:7096]) {
		t.Fatalf("read %d, %v; bytes right: %v", got, err, bytes.Equal(p[:got], data[4196:7096]))
	}
	got, err = b.ReadAt(ctx, r, p[:3000], 0)
	if got != 3000 || err != nil || !bytes.Equal(p[:got], data[4096:7096]) {
		t.Fatalf("whole range: %d, %v", got, err)
	}
	if st, err := b.Stat(ctx, r.Key); err != nil || st != r {
		t.Fatalf("stat %+v, %v; want %+v", st, err, r)
	}
	// The parent changed: its range reads as changed.
	m.Put("d/train.bin", data[:5000])
	if _, err := b.Stat(ctx, r.Key); !errors.Is(err, backend.ErrChanged) {
		t.Fatalf("stat of a range past the new end: %v", err)
	}
	if _, err := b.ReadAt(ctx, r, p[:10], 0); !errors.Is(err, backend.ErrChanged) {
		t.Fatalf("read of a range of a changed parent: %v", err)
	}
	// Other objects are the backend's own.
	other := m.Put("x", []byte("hello"))
	if got, err := b.ReadAt(ctx, other, p[:5], 0); got != 5 || err != nil || string(p[:5]) != "hello" {
		t.Fatalf("plain object: %d %v", got, err)
	}
}

// FuzzParseRangeKey: a key parses as a range only if RangeOf makes it
// back from the parts, and never panics.
func FuzzParseRangeKey(f *testing.F) {
	f.Add(backend.RangeOf(backend.Object{Key: "a/b.bin", Size: 1 << 30}, 8192, 2050).Key)
	f.Add("plain/key")
	f.Add("k\x00@-1+5")
	f.Add("k\x00@01+5")
	f.Fuzz(func(t *testing.T, key string) {
		parent, off, n, ok := backend.ParseRangeKey(key)
		if !ok {
			return
		}
		if off < 0 || n <= 0 {
			t.Fatalf("%q: range %d+%d", key, off, n)
		}
		if back := backend.RangeOf(backend.Object{Key: parent}, off, n).Key; back != key {
			t.Fatalf("%q parsed to %q %d+%d, made back as %q", key, parent, off, n, back)
		}
	})
}
