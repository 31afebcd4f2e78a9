package record

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// ID names one version of one object of one source, at one chunk size.
type ID [16]byte

func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Meta is what identifies an object version; it is persisted in the object
// record so the cache can be inspected without the backend.
type Meta struct {
	Source    string
	Key       string
	Size      int64
	Version   string
	ChunkSize int64

	// oid memoises ID for metas built by NewMeta: the read, warm and
	// prefetch paths ask for it several times per chunk. Not persisted.
	oid    ID
	hasOID bool
}

// NewMeta is the Meta of an object version, with its ID computed once.
func NewMeta(source, key string, size int64, version string, chunkSize int64) Meta {
	m := Meta{Source: source, Key: key, Size: size, Version: version, ChunkSize: chunkSize}
	m.oid, m.hasOID = m.hash(), true
	return m
}

// ID is the object version's ID.
func (m *Meta) ID() ID {
	if m.hasOID {
		return m.oid
	}
	return m.hash()
}

func (m *Meta) hash() ID {
	// The fields, each followed by a NUL, hashed in one call from a
	// buffer on the stack (for the usual key): a declared order hashes a
	// million of them.
	var stack [256]byte
	b := append(stack[:0], m.Source...)
	b = append(b, 0)
	b = append(b, m.Key...)
	return finishID(b, m.Size, m.Version, m.ChunkSize)
}

// HashID is NewMeta(source, string(key), size, version, chunkSize).ID()
// without the key as a string: a declaration of a million ranges names
// each by a key it needn't make.
func HashID(source string, key []byte, size int64, version string, chunkSize int64) ID {
	var stack [256]byte
	b := append(stack[:0], source...)
	b = append(b, 0)
	b = append(b, key...)
	return finishID(b, size, version, chunkSize)
}

// finishID appends the fields after the key to b (source, NUL, key) and
// hashes it.
func finishID(b []byte, size int64, version string, chunkSize int64) ID {
	b = append(b, 0)
	b = strconv.AppendInt(b, size, 10)
	b = append(b, 0)
	b = append(b, version...)
	b = append(b, 0)
	b = strconv.AppendInt(b, chunkSize, 10)
	b = append(b, 0)
	sum := sha256.Sum256(b)
	var id ID
	copy(id[:], sum[:])
	return id
}

// NumChunks is the number of chunks the object is cached in.
func (m *Meta) NumChunks() int {
	if m.Size == 0 {
		return 0
	}
	return int((m.Size + m.ChunkSize - 1) / m.ChunkSize)
}

// ChunkLen is the length of chunk idx: ChunkSize except for the last one.
func (m *Meta) ChunkLen(idx int) int64 {
	start := int64(idx) * m.ChunkSize
	return min(m.ChunkSize, m.Size-start)
}

// Packed reports whether an object of this shape is stored in a pack slot
// (one chunk) rather than a file of its own.
func (m *Meta) Packed() bool { return m.NumChunks() == 1 }
