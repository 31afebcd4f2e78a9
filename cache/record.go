package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/dsmount/dsmount/backend"
)

// ObjectID names one version of one object of one source, at one chunk size.
type ObjectID [16]byte

func (id ObjectID) String() string { return hex.EncodeToString(id[:]) }

// chunkID names one chunk of one object version.
type chunkID struct {
	obj ObjectID
	idx int
}

// objectMeta is what identifies an object version; it is persisted in the
// object record so the cache can be inspected without the backend.
type objectMeta struct {
	Source    string
	Key       string
	Size      int64
	Version   string
	ChunkSize int64

	// oid memoises id for metas built by metaOf: the read, warm and
	// prefetch paths ask for it several times per chunk, and hashing was
	// 2% of a warm's CPU. Not persisted.
	oid    ObjectID
	hasOID bool
}

func (m *objectMeta) id() ObjectID {
	if m.hasOID {
		return m.oid
	}
	return m.hash()
}

func (m *objectMeta) hash() ObjectID {
	// The fields, each followed by a NUL, hashed in one call from a
	// buffer on the stack (for the usual key): a declared order hashes a
	// million of them.
	var stack [256]byte
	b := append(stack[:0], m.Source...)
	b = append(b, 0)
	b = append(b, m.Key...)
	b = append(b, 0)
	b = strconv.AppendInt(b, m.Size, 10)
	b = append(b, 0)
	b = append(b, m.Version...)
	b = append(b, 0)
	b = strconv.AppendInt(b, m.ChunkSize, 10)
	b = append(b, 0)
	sum := sha256.Sum256(b)
	var id ObjectID
	copy(id[:], sum[:])
	return id
}

func (m *objectMeta) numChunks() int {
	if m.Size == 0 {
		return 0
	}
	return int((m.Size + m.ChunkSize - 1) / m.ChunkSize)
}

// chunkLen is the length of chunk idx: ChunkSize except for the last one.
func (m *objectMeta) chunkLen(idx int) int64 {
	start := int64(idx) * m.ChunkSize
	return min(m.ChunkSize, m.Size-start)
}

func metaOf(source string, obj backend.Object, chunkSize int64) objectMeta {
	m := objectMeta{Source: source, Key: obj.Key, Size: obj.Size, Version: obj.Version, ChunkSize: chunkSize}
	m.oid, m.hasOID = m.hash(), true
	return m
}

// Index key prefixes. Keys are binary; the prefix byte keeps kinds apart.
const (
	prefixObject  = 'o' // o<id>            → objectRecord
	prefixChunk   = 'c' // c<id><idx be32>  → chunkRecord
	prefixListing = 'l' // l<source>\0...   → listing pages (listing.go)
	keyFormat     = "f" // format version of the cache directory
)

const formatVersion = "dsmount-cache-1"

func objectKey(id ObjectID) []byte {
	return append([]byte{prefixObject}, id[:]...)
}

func chunkKey(id ObjectID, idx int) []byte {
	k := make([]byte, 0, 1+16+4)
	k = append(k, prefixChunk)
	k = append(k, id[:]...)
	return binary.BigEndian.AppendUint32(k, uint32(idx))
}

func chunkPrefix(id ObjectID) []byte {
	return append([]byte{prefixChunk}, id[:]...)
}

// objectRecord is the persisted form of an object: its identity, the bytes
// of it that are durably cached (for capacity accounting at Open), and when
// it was last read, coarsely (for policies that rank by recency).
type objectRecord struct {
	objectMeta
	CachedBytes int64
	Accessed    int64 // unix seconds; refreshed at most every accessPersistInterval
	// Pack and PackOff locate a packed object's slot (pack.go); Pack is 0
	// for an object stored in a file of its own. Records of version 1,
	// from before packs, have neither.
	Pack    uint64
	PackOff int64
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func (r *objectRecord) marshal() []byte {
	b := make([]byte, 0, 64+len(r.Source)+len(r.Key)+len(r.Version))
	b = append(b, 2) // record version
	b = appendString(b, r.Source)
	b = appendString(b, r.Key)
	b = binary.AppendVarint(b, r.Size)
	b = appendString(b, r.Version)
	b = binary.AppendVarint(b, r.ChunkSize)
	b = binary.AppendVarint(b, r.CachedBytes)
	b = binary.AppendVarint(b, r.Accessed)
	b = binary.AppendUvarint(b, r.Pack)
	b = binary.AppendVarint(b, r.PackOff)
	return b
}

var errCorruptRecord = errors.New("corrupt index record")

type decoder struct {
	b   []byte
	err error
}

// varint reads what binary.AppendVarint wrote: a zigzag-encoded uvarint.
func (d *decoder) varint() int64 {
	u := d.uvarint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errCorruptRecord
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string { return strings.Clone(d.bytesString()) }

// stringIf is string when keep is set; otherwise it skips the string and
// returns "".
func (d *decoder) stringIf(keep bool) string {
	if keep {
		return d.string()
	}
	d.bytesString()
	return ""
}

// bytesString is string without the copy: the result aliases the
// record's bytes, so it must be copied (or dropped) before they are
// reused. Decoding a million-entry listing would otherwise allocate two
// strings per entry only to copy them into the Listing.
func (d *decoder) bytesString() string {
	if d.err != nil {
		return ""
	}
	l, n := binary.Uvarint(d.b)
	if n <= 0 || uint64(len(d.b)-n) < l {
		d.err = errCorruptRecord
		return ""
	}
	s := d.b[n : n+int(l)]
	d.b = d.b[n+int(l):]
	if len(s) == 0 {
		return ""
	}
	return unsafe.String(&s[0], len(s))
}

func (r *objectRecord) unmarshal(b []byte) error { return r.decode(b, true) }

// unmarshalCounts is unmarshal without the strings (Source, Key and
// Version are left empty): the start-up scan reads a million records for
// their counts alone.
func (r *objectRecord) unmarshalCounts(b []byte) error { return r.decode(b, false) }

// recordSource is the Source of an object record, aliasing b; "" if b is
// not a record.
func recordSource(b []byte) string {
	if len(b) == 0 || (b[0] != 1 && b[0] != 2) {
		return ""
	}
	d := decoder{b: b[1:]}
	return d.bytesString()
}

func (r *objectRecord) decode(b []byte, strs bool) error {
	if len(b) == 0 || (b[0] != 1 && b[0] != 2) {
		return fmt.Errorf("%w: object record version", errCorruptRecord)
	}
	d := decoder{b: b[1:]}
	r.Source = d.stringIf(strs)
	r.Key = d.stringIf(strs)
	r.Size = d.varint()
	r.Version = d.stringIf(strs)
	r.ChunkSize = d.varint()
	r.CachedBytes = d.varint()
	r.Accessed = d.varint()
	r.Pack, r.PackOff = 0, 0
	if b[0] == 2 {
		r.Pack = d.uvarint()
		r.PackOff = d.varint()
	}
	if d.err == nil && (r.Size < 0 || r.ChunkSize <= 0 || r.CachedBytes < 0 || r.CachedBytes > r.Size || r.PackOff < 0 || r.PackOff%directAlign != 0) {
		d.err = errCorruptRecord
	}
	return d.err
}

// chunkRecord is a durable chunk's length and the CRC32C (Castagnoli) of
// each of its check blocks (check.go). A chunk of one block is stored as
// before blocks, CRC then length, 8 bytes; one of several as its length
// then its sums. An 8-byte record of a chunk of several blocks is from
// before blocks: its one CRC is the whole chunk's (Whole).
type chunkRecord struct {
	Len   uint32
	Sums  []uint32
	Whole bool // read back only: Sums[0] is the whole chunk's CRC32C
}

func (c chunkRecord) marshal() []byte {
	if len(c.Sums) == 1 {
		b := binary.BigEndian.AppendUint32(nil, c.Sums[0])
		return binary.BigEndian.AppendUint32(b, c.Len)
	}
	b := make([]byte, 0, 4+4*len(c.Sums))
	b = binary.BigEndian.AppendUint32(b, c.Len)
	for _, s := range c.Sums {
		b = binary.BigEndian.AppendUint32(b, s)
	}
	return b
}

func (c *chunkRecord) unmarshal(b []byte) error {
	if len(b) == 8 {
		c.Sums = []uint32{binary.BigEndian.Uint32(b)}
		c.Len = binary.BigEndian.Uint32(b[4:])
		c.Whole = blocksIn(int64(c.Len)) > 1
		if c.Len == 0 {
			// No chunk is empty (an empty object has none), and a
			// sum of no block is no record this dsmount wrote.
			return errCorruptRecord
		}
		return nil
	}
	if len(b) < 12 || len(b)%4 != 0 {
		return errCorruptRecord
	}
	c.Len = binary.BigEndian.Uint32(b)
	c.Whole = false
	c.Sums = make([]uint32, (len(b)-4)/4)
	if blocksIn(int64(c.Len)) != len(c.Sums) {
		return errCorruptRecord
	}
	for i := range c.Sums {
		c.Sums[i] = binary.BigEndian.Uint32(b[4+4*i:])
	}
	return nil
}
