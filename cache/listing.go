package cache

import (
	"errors"
	"fmt"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache/internal/index"
)

// A source's listing is kept in the index so that remounting a large prefix
// doesn't relist it (index.DB.SaveListing; the format: package record).

// SaveListing stores objs as the listing of source, replacing any earlier one.
func (c *Cache) SaveListing(source string, objs *backend.Listing) error {
	err := c.disk.index.SaveListing(source, objs)
	if errors.Is(err, index.ErrNoRoom) {
		return fmt.Errorf("save listing: %w", ErrNoSpace)
	}
	return err
}

// LoadListing returns the stored listing of source and when it was saved;
// ok is false if there is none, or none in this dsmount's format.
func (c *Cache) LoadListing(source string) (objs *backend.Listing, saved time.Time, ok bool, err error) {
	return c.disk.index.LoadListing(source)
}
