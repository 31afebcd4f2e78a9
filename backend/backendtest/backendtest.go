// Package backendtest holds the checks that the tests of every
// backend.Backend (backend/posix, backend/s3) share: what the interface
// promises, checked the same way whatever the store.
package backendtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sort"
	"testing"

	"github.com/dsmount/dsmount/backend"
)

// MustKind fails the test unless err is a *backend.Error of kind.
func MustKind(t testing.TB, err, kind error) {
	t.Helper()
	var be *backend.Error
	if !errors.As(err, &be) {
		t.Fatalf("error %v (%T) is not a *backend.Error", err, err)
	}
	if !errors.Is(err, kind) {
		t.Fatalf("error %q: want kind %q, got %q", err, kind, be.Kind)
	}
}

// ListAll lists b whole, by key; a key listed twice is an error of the
// test.
func ListAll(t testing.TB, b backend.Backend) map[string]backend.Object {
	t.Helper()
	got := map[string]backend.Object{}
	err := b.List(context.Background(), func(o backend.Object) error {
		if _, dup := got[o.Key]; dup {
			t.Errorf("key %q listed twice", o.Key)
		}
		got[o.Key] = o
		return nil
	})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return got
}

// SortedKeys are m's keys in order.
func SortedKeys(m map[string]backend.Object) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// CheckReadAt reads obj, whose bytes are data (8 KiB at least), through
// b.ReadAt: ranges at the start, inside, the whole object, its last byte,
// one across its end (the bytes up to it and io.EOF), at its end and past
// it (no bytes and io.EOF); each must return the right count and bytes. A
// negative offset must fail with ErrInvalid.
func CheckReadAt(t testing.TB, b backend.Backend, obj backend.Object, data []byte) {
	t.Helper()
	size := int64(len(data))
	if size < 8<<10 {
		t.Fatalf("CheckReadAt wants an object of 8 KiB at least, not %d bytes", size)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		off, n  int64
		wantN   int
		wantEOF bool
	}{
		{0, 100, 100, false},
		{4096, 4096, 4096, false},
		{0, size, int(size), false},
		{size - 1, 1, 1, false},
		{size - 1000, 4096, 1000, true}, // last partial range
		{size, 10, 0, true},             // at the end
		{size + 2345, 10, 0, true},      // past the end
		{2 * size, 10, 0, true},         // far past the end
	} {
		p := make([]byte, tc.n)
		n, err := b.ReadAt(ctx, obj, p, tc.off)
		if n != tc.wantN || (err == io.EOF) != tc.wantEOF || (err != nil && err != io.EOF) {
			t.Fatalf("ReadAt(off=%d, len=%d) = %d, %v; want %d, eof=%v", tc.off, tc.n, n, err, tc.wantN, tc.wantEOF)
		}
		if n > 0 && !bytes.Equal(p[:n], data[tc.off:tc.off+int64(n)]) {
			t.Fatalf("ReadAt(off=%d, len=%d) returned wrong bytes", tc.off, tc.n)
		}
	}
	_, err := b.ReadAt(ctx, obj, make([]byte, 8), -1)
	MustKind(t, err, backend.ErrInvalid)
}
