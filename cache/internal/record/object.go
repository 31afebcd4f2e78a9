package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// ErrCorrupt is what every decoder returns (wrapped) for bytes no encoder
// of this package wrote.
var ErrCorrupt = errors.New("corrupt index record")

// SlotAlign is the alignment of a pack slot's offset: the O_DIRECT
// alignment that slots are written with.
const SlotAlign = 4096

// Object is the persisted form of an object: its identity, the bytes of it
// that are durably cached (for capacity accounting at Open), and when it
// was last read, coarsely (for policies that rank by recency).
type Object struct {
	Meta
	CachedBytes int64
	Accessed    int64 // unix seconds
	// Pack and PackOff locate a packed object's slot; Pack is 0 for an
	// object stored in a file of its own. Records of version 1, from
	// before packs, have neither.
	Pack    uint64
	PackOff int64
}

// appendString appends s as a length-prefixed string.
func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Marshal encodes r in the current record version.
func (r *Object) Marshal() []byte {
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

// Unmarshal decodes an object record of any version.
func (r *Object) Unmarshal(b []byte) error { return r.decode(b, true) }

// UnmarshalCounts is Unmarshal without the strings (Source, Key and
// Version are left empty): the start-up scan reads a million records for
// their counts alone.
func (r *Object) UnmarshalCounts(b []byte) error { return r.decode(b, false) }

// SourceOf is the Source of an object record, aliasing b; "" if b is not a
// record.
func SourceOf(b []byte) string {
	if len(b) == 0 || (b[0] != 1 && b[0] != 2) {
		return ""
	}
	d := decoder{b: b[1:]}
	return d.bytesString()
}

func (r *Object) decode(b []byte, strs bool) error {
	if len(b) == 0 || (b[0] != 1 && b[0] != 2) {
		return fmt.Errorf("%w: object record version", ErrCorrupt)
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
	if d.err == nil && (r.Size < 0 || r.ChunkSize <= 0 || r.CachedBytes < 0 || r.CachedBytes > r.Size || r.PackOff < 0 || r.PackOff%SlotAlign != 0) {
		d.err = ErrCorrupt
	}
	return d.err
}

// decoder reads what appendString and binary.AppendVarint wrote; the
// first failure sticks (err).
type decoder struct {
	b   []byte
	err error
}

// more reports whether bytes are left and nothing failed.
func (d *decoder) more() bool { return len(d.b) > 0 && d.err == nil }

// varint reads what binary.AppendVarint wrote: a zigzag-encoded uvarint.
func (d *decoder) varint() int64 {
	u := d.uvarint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

// uvarint reads what binary.AppendUvarint wrote.
func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = ErrCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

// string reads what appendString wrote, as a copy.
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
		d.err = ErrCorrupt
		return ""
	}
	s := d.b[n : n+int(l)]
	d.b = d.b[n+int(l):]
	if len(s) == 0 {
		return ""
	}
	return unsafe.String(&s[0], len(s))
}
