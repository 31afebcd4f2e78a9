package backend

import (
	"context"
	"time"
)

// Object describes one object (file) under a backend's root.
type Object struct {
	// Key is the path relative to the backend root, '/'-separated, with no
	// leading '/'. S3 directory-marker objects keep their trailing '/'.
	Key string
	// Size in bytes.
	Size int64
	// ModTime is the last-modified time reported by the store.
	ModTime time.Time
	// Version identifies the object's contents: equal Key and Version imply
	// equal bytes. Opaque to callers.
	Version string
}

// Backend is a read-only view of a dataset's storage.
//
// Implementations: backend/s3.Backend, backend/posix.Backend.
type Backend interface {
	// ID names the source stably across restarts and processes
	// ("s3://bucket/prefix", "file:///abs/path"). Cache entries are keyed by it.
	ID() string
	// List calls fn for every object under the root, in no particular order.
	// It stops early and returns fn's error if fn fails.
	List(ctx context.Context, fn func(Object) error) error
	// Stat returns the current description of one object.
	Stat(ctx context.Context, key string) (Object, error)
	// ReadAt fills p with the bytes of obj (its Key at its Version) starting
	// at off. It returns len(p) bytes unless the object ends first, in which
	// case it returns the bytes up to the end and io.EOF. It fails with
	// ErrChanged when the object no longer has obj.Version.
	ReadAt(ctx context.Context, obj Object, p []byte, off int64) (int, error)
	// Close releases the client's resources.
	Close() error
}
