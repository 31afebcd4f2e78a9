package cache

import "encoding/binary"

// idFilter is a Bloom filter of ObjectIDs: the IDs of the object records
// the start-up scan found. An object nobody has asked for since the
// restart is made from its record, a point read of the index, and
// `dsmount warm --check` of ImageNet asks about 1.28M objects, most
// never cached. With the filter, an ID it has never seen costs no read.
// False positives (a few at 10 bits an ID) only cost the read; there are
// no false negatives.
//
// Immutable once built; read without locks by whoever has seen it
// published (startupScan.ready closed).
type idFilter struct {
	bits []uint64
	mask uint64 // bit count - 1; a power of two
}

func newIDFilter(ids []ObjectID) *idFilter {
	n := uint64(64)
	for n < uint64(len(ids))*10 {
		n <<= 1
	}
	f := &idFilter{bits: make([]uint64, n/64), mask: n - 1}
	for _, id := range ids {
		f.each(id, func(b uint64) { f.bits[b/64] |= 1 << (b % 64) })
	}
	return f
}

// each calls fn with id's three bit positions. An ObjectID is a SHA-256
// prefix: its bytes are uniform, so three of its words are the hashes.
func (f *idFilter) each(id ObjectID, fn func(bit uint64)) {
	for _, off := range [3]int{0, 4, 8} {
		fn(binary.LittleEndian.Uint64(id[off:]) & f.mask)
	}
}

// mayHave reports whether id may have been added; false is certain.
func (f *idFilter) mayHave(id ObjectID) bool {
	have := true
	f.each(id, func(b uint64) { have = have && f.bits[b/64]&(1<<(b%64)) != 0 })
	return have
}
