package backend

import (
	"strings"
	"testing"
	"time"
)

func TestListingKeepsObjects(t *testing.T) {
	now := time.Unix(1700000000, 123456789)
	objs := []Object{
		{Key: "a/b.jpg", Size: 10, ModTime: now, Version: "etag1"},
		{Key: "", Size: 0},
		{Key: strings.Repeat("k", listingSlab+5), Size: 3, Version: strings.Repeat("v", 10)}, // longer than a slab
		{Key: "ü/文件", Size: -1, ModTime: time.Unix(0, 0), Version: ""},
	}
	for i := range 3000 {
		objs = append(objs, Object{Key: strings.Repeat("x", i%300), Size: int64(i), ModTime: now.Add(time.Duration(i)), Version: strings.Repeat("e", i%40)})
	}
	l := NewListing(objs)
	if l.Len() != len(objs) {
		t.Fatalf("Len = %d, want %d", l.Len(), len(objs))
	}
	for i, want := range objs {
		got := l.At(i)
		if got.Key != want.Key || got.Version != want.Version || got.Size != want.Size || !got.ModTime.Equal(want.ModTime) ||
			got.ModTime.IsZero() != want.ModTime.IsZero() || l.Key(i) != want.Key || l.Size(i) != want.Size {
			t.Fatalf("At(%d) = %+v, want %+v", i, got, want)
		}
	}
	if l.Bytes() <= 0 {
		t.Error("Bytes() should count the slabs")
	}
	var empty *Listing
	if empty.Len() != 0 {
		t.Error("a nil listing has no objects")
	}
}
