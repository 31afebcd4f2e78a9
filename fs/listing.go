package fs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
)

// LoadListing returns the objects of b: the listing stored in c's index when
// there is one and refresh is false, otherwise a fresh listing from the
// backend, which is then stored for the next mount.
func LoadListing(ctx context.Context, c *cache.Cache, b backend.Backend, refresh bool, log *slog.Logger) (*backend.Listing, error) {
	if !refresh {
		objs, saved, ok, err := c.LoadListing(b.ID())
		if err != nil {
			log.Warn("stored listing unreadable; relisting", "err", err)
		} else if ok {
			log.Info("using stored listing (--refresh to relist)", "objects", objs.Len(), "listed", saved.Format(time.RFC3339))
			return objs, nil
		}
	}
	start := time.Now()
	objs := &backend.Listing{}
	err := b.List(ctx, func(o backend.Object) error {
		objs.Append(o)
		if objs.Len()%100000 == 0 {
			log.Info("listing", "objects", objs.Len())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", b.ID(), err)
	}
	log.Info("listed", "objects", objs.Len(), "took", time.Since(start).Round(time.Millisecond))
	if err := c.SaveListing(b.ID(), objs); err != nil {
		log.Warn("could not store listing; the next mount will relist", "err", err)
	}
	if n := c.EvictStale(b.ID(), objs); n > 0 {
		log.Info("dropped cached versions of objects that changed or vanished", "objects", n)
	}
	return objs, nil
}
