package readahead

import (
	"testing"

	"github.com/dsmount/dsmount/cache"
)

func TestPosIndexFindsEveryItem(t *testing.T) {
	items := make([]Item, 5000)
	for i := range items {
		// IDs whose first bytes collide often: the table must probe on.
		items[i].ID = cache.ObjectID{byte(i % 7), 0, 0, 0, 0, 0, 0, 0, byte(i), byte(i >> 8)}
	}
	x := newPosIndex(items)
	for i, it := range items {
		if p, ok := x.get(items, it.ID); !ok || int(p) != i {
			t.Fatalf("item %d found at %d, %v", i, p, ok)
		}
	}
	if _, ok := x.get(items, cache.ObjectID{0xff}); ok {
		t.Error("an ID not declared was found")
	}
	var empty posIndex
	if _, ok := empty.get(nil, cache.ObjectID{}); ok {
		t.Error("an empty index found something")
	}
}
