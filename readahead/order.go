package readahead

import (
	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
)

// Item is one entry of a declared order: a file, by the declaring
// mount's reference (see Objects), and the cache's name for its version.
// 20 bytes: an ImageNet order is 1.28M of them, and a job holds two.
type Item struct {
	ID  cache.ObjectID
	Ref uint32
}

// Objects gives the object behind a reference of a declared Item (the
// mount's file table). Empty says whether it has no bytes, which a
// declaration asks of every item: it must not cost a lookup of the object.
type Objects interface {
	Object(ref uint32) backend.Object
	Empty(ref uint32) bool
}

// order is one epoch's declared sequence.
type order struct {
	epoch int
	items []Item
	objs  Objects
	pos   posIndex
	// meanSize is the mean size of the items, estimated from a sample
	// (what the prefetch window needs, without a lookup of a million
	// objects).
	meanSize int64
}

// sizeSample is how many items an order's mean size is estimated from.
const sizeSample = 4096

func newOrder(epoch int, items []Item, objs Objects) *order {
	o := &order{epoch: epoch, items: items, objs: objs, pos: newPosIndex(items)}
	// Evenly spaced items: a declared order is shuffled, and where it
	// isn't, spacing still covers all of it.
	var sum int64
	n := min(len(items), sizeSample)
	for k := range n {
		sum += objs.Object(items[k*len(items)/n].Ref).Size
	}
	if n > 0 {
		o.meanSize = sum / int64(n)
	}
	return o
}

// posOf returns id's position in the order, if there.
func (o *order) posOf(id cache.ObjectID) (int32, bool) { return o.pos.get(o.items, id) }

// sameItems reports whether o declares exactly items, in that order. (A
// job's orders all come from its mount's Objects; an Item's ID names its
// object's version.)
func (o *order) sameItems(items []Item) bool {
	if o == nil || len(o.items) != len(items) {
		return false
	}
	for i := range items {
		if o.items[i] != items[i] {
			return false
		}
	}
	return true
}
