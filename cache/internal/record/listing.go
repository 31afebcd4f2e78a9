package record

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/dsmount/dsmount/backend"
)

// A source's listing is stored as zstd-compressed pages under a generation
// number, and a meta record naming the generation (ListingMeta):
//
//	meta: gen (be64), page count (be32), saved at (unix ns, be64), format (1 byte)
//	page: zstd(entries), each entry key, size, mod time, version
//
// A listing stored in another format is not used (the source is listed
// again): the format changes when what a listing holds does, as when the
// backends' versions changed (2: a local file's version gained its ctime,
// an S3 object without ETag got one bound to Last-Modified), and a mount
// from an old listing would read with versions the backend no longer
// makes. Listings from before the format byte are format 1.

const (
	listingPageEntries = 20000
	// listingPageBytes bounds a page's encoded entries (about as many
	// compressed, for keys that don't compress): a page is one index
	// value, and the index refuses a value larger than its 4 MiB value
	// log files.
	listingPageBytes = 1 << 20
	// MaxListingPageDecoded bounds what a stored page may decode to: a
	// page holds listingPageBytes of entries, or one entry larger than
	// that. A page read back from disk is not trusted: a zstd frame
	// header can claim any size, and the decoder allocates what it
	// claims (up to 64 GiB by default) before it decodes a byte.
	MaxListingPageDecoded = 64 << 20
)

// ListingFormat is the format of the listings this dsmount stores.
const ListingFormat = 2

// ListingPageEnd is where the page of objs starting at start ends: at
// listingPageEntries entries or listingPageBytes of encoded keys and
// versions, whichever comes first, and never before one entry.
func ListingPageEnd(objs *backend.Listing, start int) int {
	end, n := start, 0
	for end < objs.Len() && end-start < listingPageEntries {
		o := objs.At(end)
		n += len(o.Key) + len(o.Version) + 24
		if n > listingPageBytes && end > start {
			break
		}
		end++
	}
	return end
}

// ListingMeta names the generation of a stored listing.
type ListingMeta struct {
	Gen    uint64
	Pages  int
	Saved  time.Time
	Format byte
}

// Unmarshal decodes a listing meta record.
func (m *ListingMeta) Unmarshal(v []byte) error {
	switch len(v) {
	case 20:
		m.Format = 1
	case 21:
		m.Format = v[20]
	default:
		return ErrCorrupt
	}
	m.Gen = binary.BigEndian.Uint64(v)
	m.Pages = int(binary.BigEndian.Uint32(v[8:]))
	m.Saved = time.Unix(0, int64(binary.BigEndian.Uint64(v[12:])))
	return nil
}

// Marshal encodes m.
func (m ListingMeta) Marshal() []byte {
	b := binary.BigEndian.AppendUint64(nil, m.Gen)
	b = binary.BigEndian.AppendUint32(b, uint32(m.Pages))
	b = binary.BigEndian.AppendUint64(b, uint64(m.Saved.UnixNano()))
	return append(b, m.Format)
}

// NewPageDecoder is the decoder of stored listing pages.
func NewPageDecoder() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderMaxMemory(MaxListingPageDecoded))
}

// DecodeListingPage appends the entries of stored page v to into,
// decoding it into raw, which it returns for the next page.
func DecodeListingPage(dec *zstd.Decoder, v, raw []byte, into *backend.Listing) ([]byte, error) {
	raw, err := dec.DecodeAll(v, raw[:0])
	if err != nil {
		return raw, fmt.Errorf("%w: listing page: %w", ErrCorrupt, err)
	}
	return raw, decodeEntries(raw, into)
}

// EncodeEntries appends the entries [start, end) of objs to b.
func EncodeEntries(b []byte, objs *backend.Listing, start, end int) []byte {
	for i := start; i < end; i++ {
		o := objs.At(i)
		b = appendString(b, o.Key)
		b = binary.AppendVarint(b, o.Size)
		b = binary.AppendVarint(b, o.ModTime.UnixNano())
		b = appendString(b, o.Version)
	}
	return b
}

// decodeEntries appends the entries of b to into. The entries' strings
// are copied (Append), so b may be reused.
func decodeEntries(b []byte, into *backend.Listing) error {
	d := decoder{b: b}
	for d.more() {
		var o backend.Object
		o.Key = d.bytesString()
		o.Size = d.varint()
		o.ModTime = time.Unix(0, d.varint())
		o.Version = d.bytesString()
		if d.err == nil {
			into.Append(o)
		}
	}
	return d.err
}
