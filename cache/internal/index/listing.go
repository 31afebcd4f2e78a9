package index

import (
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/klauspost/compress/zstd"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache/internal/record"
)

// A source's listing is kept in the index so that remounting a large
// prefix doesn't relist it (the layout and format: record/listing.go).

// ErrNoRoom is returned by SaveListing when the index may not be written
// (Prepare said no).
var ErrNoRoom = errors.New("no room for an index write")

func (x *DB) listingMeta(txn *badger.Txn, source string) (record.ListingMeta, bool, error) {
	item, err := txn.Get(record.ListingMetaKey(source))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return record.ListingMeta{}, false, nil
	}
	if err != nil {
		return record.ListingMeta{}, false, err
	}
	var m record.ListingMeta
	err = item.Value(m.Unmarshal)
	return m, err == nil, err
}

// SaveListing stores objs as the listing of source, replacing any earlier
// one.
func (x *DB) SaveListing(source string, objs *backend.Listing) error {
	var old record.ListingMeta
	var hadOld bool
	if err := x.db.View(func(txn *badger.Txn) (err error) {
		old, hadOld, err = x.listingMeta(txn, source)
		return err
	}); err != nil {
		return fmt.Errorf("save listing: %w", err)
	}
	gen := old.Gen + 1
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return err
	}
	defer enc.Close()
	pages := 0
	var raw []byte
	for start, end := 0, 0; start < objs.Len() || pages == 0; start = end {
		end = record.ListingPageEnd(objs, start)
		raw = record.EncodeEntries(raw[:0], objs, start, end)
		data := enc.EncodeAll(raw, nil)
		if !x.Prepare() {
			return fmt.Errorf("save listing: %w", ErrNoRoom)
		}
		if err := x.db.Update(func(txn *badger.Txn) error {
			return txn.Set(record.ListingPageKey(source, gen, pages), data)
		}); err != nil {
			return fmt.Errorf("save listing: %w", err)
		}
		pages++
		if objs.Len() == 0 {
			break
		}
	}
	meta := record.ListingMeta{Gen: gen, Pages: pages, Saved: time.Now(), Format: record.ListingFormat}.Marshal()
	if !x.Prepare() {
		return fmt.Errorf("save listing: %w", ErrNoRoom)
	}
	err = x.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(record.ListingMetaKey(source), meta); err != nil {
			return err
		}
		if hadOld {
			for p := range old.Pages {
				if err := txn.Delete(record.ListingPageKey(source, old.Gen, p)); err != nil {
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
func (x *DB) LoadListing(source string) (objs *backend.Listing, saved time.Time, ok bool, err error) {
	dec, err := record.NewPageDecoder()
	if err != nil {
		return nil, time.Time{}, false, err
	}
	defer dec.Close()
	err = x.db.View(func(txn *badger.Txn) error {
		m, found, err := x.listingMeta(txn, source)
		if err != nil || !found || m.Format != record.ListingFormat {
			return err
		}
		objs = &backend.Listing{}
		var raw []byte
		for p := range m.Pages {
			item, err := txn.Get(record.ListingPageKey(source, m.Gen, p))
			if err != nil {
				return err
			}
			if err := item.Value(func(v []byte) error {
				var err error
				raw, err = record.DecodeListingPage(dec, v, raw, objs)
				return err
			}); err != nil {
				return err
			}
		}
		saved, ok = m.Saved, true
		return nil
	})
	if err != nil {
		return nil, time.Time{}, false, fmt.Errorf("load listing: %w", err)
	}
	return objs, saved, ok, nil
}

// SetListingBytes overwrites source's listing meta record (page < 0) or
// page page of its current generation with b: for tests of what a
// corrupt or older index holds.
func (x *DB) SetListingBytes(source string, page int, b []byte) error {
	return x.db.Update(func(txn *badger.Txn) error {
		if page < 0 {
			return txn.Set(record.ListingMetaKey(source), b)
		}
		m, _, err := x.listingMeta(txn, source)
		if err != nil {
			return err
		}
		return txn.Set(record.ListingPageKey(source, m.Gen, page), b)
	})
}

// ListingMetaBytes is source's listing meta record as stored.
func (x *DB) ListingMetaBytes(source string) ([]byte, error) {
	var b []byte
	err := x.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(record.ListingMetaKey(source))
		if err != nil {
			return err
		}
		b, err = item.ValueCopy(nil)
		return err
	})
	return b, err
}
