package record

import "encoding/binary"

// Index key prefixes. Keys are binary; the prefix byte keeps kinds apart.
const (
	prefixObject  = 'o'
	prefixChunk   = 'c'
	prefixListing = 'l'
)

// FormatKey holds the format version of a cache directory.
const FormatKey = "f"

// FormatVersion is the format of the cache directories this dsmount makes
// and reads.
const FormatVersion = "dsmount-cache-1"

// ObjectKey is the key of id's object record.
func ObjectKey(id ID) []byte {
	return append([]byte{prefixObject}, id[:]...)
}

// ObjectPrefix is the prefix of every object record's key.
func ObjectPrefix() []byte { return []byte{prefixObject} }

// ObjectKeyID is the ID of an object record's key; false for a key of
// another shape.
func ObjectKeyID(k []byte) (ID, bool) {
	var id ID
	if len(k) != 1+len(id) || k[0] != prefixObject {
		return id, false
	}
	copy(id[:], k[1:])
	return id, true
}

// ChunkKey is the key of chunk idx's record.
func ChunkKey(id ID, idx int) []byte {
	k := make([]byte, 0, 1+16+4)
	k = append(k, prefixChunk)
	k = append(k, id[:]...)
	return binary.BigEndian.AppendUint32(k, uint32(idx))
}

// ChunkPrefix is the prefix of the keys of id's chunk records.
func ChunkPrefix(id ID) []byte {
	return append([]byte{prefixChunk}, id[:]...)
}

// ChunkKeyIndex is the chunk index of a chunk record's key; false for a
// key of another shape.
func ChunkKeyIndex(k []byte) (int, bool) {
	if len(k) != 1+16+4 || k[0] != prefixChunk {
		return 0, false
	}
	return int(binary.BigEndian.Uint32(k[17:])), true
}

func listingPrefix(source string) []byte {
	return append(append([]byte{prefixListing}, source...), 0)
}

// ListingMetaKey is the key of source's listing meta record.
func ListingMetaKey(source string) []byte { return append(listingPrefix(source), 'm') }

// ListingPageKey is the key of page page of generation gen of source's
// listing.
func ListingPageKey(source string, gen uint64, page int) []byte {
	k := append(listingPrefix(source), 'p')
	k = binary.BigEndian.AppendUint64(k, gen)
	return binary.BigEndian.AppendUint32(k, uint32(page))
}
