package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/klauspost/compress/zstd"

	"github.com/dsmount/dsmount/backend"
)

// A source's listing is kept in the index so that remounting a large prefix
// doesn't relist it. It is stored as zstd-compressed pages under a
// generation number; the meta record naming the generation is written after
// all of its pages, so a crash mid-save leaves the previous listing whole.
//
//	l<source>\0m              → gen (be64), page count (be32), saved at (unix ns, be64), format (1 byte)
//	l<source>\0p<gen><page>   → zstd(entries)
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
	// maxListingPageDecoded bounds what a stored page may decode to: a
	// page holds listingPageBytes of entries, or one entry larger than
	// that. A page read back from disk is not trusted: a zstd frame
	// header can claim any size, and the decoder allocates what it
	// claims (up to 64 GiB by default) before it decodes a byte.
	maxListingPageDecoded = 64 << 20
)

// listingPageEnd is where the page of objs starting at start ends: at
// listingPageEntries entries or listingPageBytes of encoded keys and
// versions, whichever comes first, and never before one entry.
func listingPageEnd(objs *backend.Listing, start int) int {
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

func listingPrefix(source string) []byte {
	return append(append([]byte{prefixListing}, source...), 0)
}

func listingMetaKey(source string) []byte { return append(listingPrefix(source), 'm') }

func listingPageKey(source string, gen uint64, page int) []byte {
	k := append(listingPrefix(source), 'p')
	k = binary.BigEndian.AppendUint64(k, gen)
	return binary.BigEndian.AppendUint32(k, uint32(page))
}

// listingFormat is the format of the listings this dsmount stores.
const listingFormat = 2

type listingMeta struct {
	gen    uint64
	pages  int
	saved  time.Time
	format byte
}

func (c *Cache) listingMeta(txn *badger.Txn, source string) (listingMeta, bool, error) {
	item, err := txn.Get(listingMetaKey(source))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return listingMeta{}, false, nil
	}
	if err != nil {
		return listingMeta{}, false, err
	}
	var m listingMeta
	err = item.Value(func(v []byte) error {
		return m.unmarshal(v)
	})
	return m, err == nil, err
}

func (m *listingMeta) unmarshal(v []byte) error {
	switch len(v) {
	case 20:
		m.format = 1
	case 21:
		m.format = v[20]
	default:
		return errCorruptRecord
	}
	m.gen = binary.BigEndian.Uint64(v)
	m.pages = int(binary.BigEndian.Uint32(v[8:]))
	m.saved = time.Unix(0, int64(binary.BigEndian.Uint64(v[12:])))
	return nil
}

func (m listingMeta) marshal() []byte {
	b := binary.BigEndian.AppendUint64(nil, m.gen)
	b = binary.BigEndian.AppendUint32(b, uint32(m.pages))
	b = binary.BigEndian.AppendUint64(b, uint64(m.saved.UnixNano()))
	return append(b, m.format)
}

// SaveListing stores objs as the listing of source, replacing any earlier one.
func (c *Cache) SaveListing(source string, objs *backend.Listing) error {
	var old listingMeta
	var hadOld bool
	if err := c.db.View(func(txn *badger.Txn) (err error) {
		old, hadOld, err = c.listingMeta(txn, source)
		return err
	}); err != nil {
		return fmt.Errorf("save listing: %w", err)
	}
	gen := old.gen + 1
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return err
	}
	defer enc.Close()
	pages := 0
	var raw []byte
	for start, end := 0, 0; start < objs.Len() || pages == 0; start = end {
		end = listingPageEnd(objs, start)
		raw = encodeEntries(raw[:0], objs, start, end)
		data := enc.EncodeAll(raw, nil)
		if !c.indexRoom() {
			return fmt.Errorf("save listing: %w", ErrNoSpace)
		}
		if err := c.db.Update(func(txn *badger.Txn) error {
			return txn.Set(listingPageKey(source, gen, pages), data)
		}); err != nil {
			return fmt.Errorf("save listing: %w", err)
		}
		pages++
		if objs.Len() == 0 {
			break
		}
	}
	meta := listingMeta{gen: gen, pages: pages, saved: time.Now(), format: listingFormat}.marshal()
	if !c.indexRoom() {
		return fmt.Errorf("save listing: %w", ErrNoSpace)
	}
	err = c.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(listingMetaKey(source), meta); err != nil {
			return err
		}
		if hadOld {
			for p := range old.pages {
				if err := txn.Delete(listingPageKey(source, old.gen, p)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save listing: %w", err)
	}
	return nil
}

// LoadListing returns the stored listing of source and when it was saved;
// ok is false if there is none, or none in this dsmount's format.
func (c *Cache) LoadListing(source string) (objs *backend.Listing, saved time.Time, ok bool, err error) {
	dec, err := newPageDecoder()
	if err != nil {
		return nil, time.Time{}, false, err
	}
	defer dec.Close()
	err = c.db.View(func(txn *badger.Txn) error {
		m, found, err := c.listingMeta(txn, source)
		if err != nil || !found || m.format != listingFormat {
			return err
		}
		objs = &backend.Listing{}
		var raw []byte
		for p := range m.pages {
			item, err := txn.Get(listingPageKey(source, m.gen, p))
			if err != nil {
				return err
			}
			if err := item.Value(func(v []byte) error {
				var err error
				raw, err = decodeListingPage(dec, v, raw, objs)
				return err
			}); err != nil {
				return err
			}
		}
		saved, ok = m.saved, true
		return nil
	})
	if err != nil {
		return nil, time.Time{}, false, fmt.Errorf("load listing: %w", err)
	}
	return objs, saved, ok, nil
}

// newPageDecoder is the decoder of stored listing pages.
func newPageDecoder() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxListingPageDecoded))
}

// decodeListingPage appends the entries of stored page v to into,
// decoding it into raw, which it returns for the next page.
func decodeListingPage(dec *zstd.Decoder, v, raw []byte, into *backend.Listing) ([]byte, error) {
	raw, err := dec.DecodeAll(v, raw[:0])
	if err != nil {
		return raw, fmt.Errorf("%w: listing page: %w", errCorruptRecord, err)
	}
	return raw, decodeEntries(raw, into)
}

func encodeEntries(b []byte, objs *backend.Listing, start, end int) []byte {
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
	for len(d.b) > 0 && d.err == nil {
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
