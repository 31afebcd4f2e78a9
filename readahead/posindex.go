package readahead

import (
	"encoding/binary"

	"github.com/dsmount/dsmount/cache"
)

// posIndex finds an item's position in its order by the item's ID: an
// open-addressing table of positions + 1 (0: empty), at most half full,
// whose probe starts at the ID's own first bytes (an ID is a hash
// already). 8 bytes an item, a fraction of a Go map of ID to position:
// an ImageNet order is 1.28M items, and a job holds two. A probe
// compares the ID of the item at the position it finds.
type posIndex struct {
	slots []uint32
}

func newPosIndex(items []Item) posIndex {
	n := 8
	for n < 2*len(items) {
		n <<= 1
	}
	x := posIndex{slots: make([]uint32, n)}
	mask := uint64(n - 1)
	for i, it := range items {
		h := binary.LittleEndian.Uint64(it.ID[:]) & mask
		for x.slots[h] != 0 {
			h = (h + 1) & mask
		}
		x.slots[h] = uint32(i) + 1
	}
	return x
}

// get returns the position of id among items (those the index was made
// of), if there.
func (x posIndex) get(items []Item, id cache.ObjectID) (int32, bool) {
	if len(x.slots) == 0 {
		return 0, false
	}
	mask := uint64(len(x.slots) - 1)
	for h := binary.LittleEndian.Uint64(id[:]) & mask; x.slots[h] != 0; h = (h + 1) & mask {
		p := x.slots[h] - 1
		if items[p].ID == id {
			return int32(p), true
		}
	}
	return 0, false
}
