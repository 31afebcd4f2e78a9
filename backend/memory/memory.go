// Package memory is an in-memory backend.Backend for unit tests of the
// packages above the backend (cache, readahead): objects live in a map,
// reads are counted, and they can be held until a test releases them. Real
// stores (MinIO, local directories) are what integration tests use.
package memory

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsmount/dsmount/backend"
)

// Backend holds objects in memory. Safe for concurrent use.
type Backend struct {
	mu   sync.Mutex
	objs map[string][]byte
	vers map[string]string
	seq  int
	// Reads counts ReadAt calls.
	Reads atomic.Int64
	gate  chan struct{}
}

// New returns an empty backend.
func New() *Backend {
	return &Backend{objs: map[string][]byte{}, vers: map[string]string{}}
}

// Put stores data under key as a new version and returns its object.
func (m *Backend) Put(key string, data []byte) backend.Object {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	m.objs[key] = data
	m.vers[key] = fmt.Sprintf("v%d", m.seq)
	return backend.Object{Key: key, Size: int64(len(data)), Version: m.vers[key], ModTime: time.Unix(1, 0)}
}

// Data returns the bytes stored under key (nil if none).
func (m *Backend) Data(key string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.objs[key]
}

// Hold makes reads wait until the returned func is called.
func (m *Backend) Hold() (release func()) {
	ch := make(chan struct{})
	m.mu.Lock()
	m.gate = ch
	m.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func (m *Backend) ID() string   { return "mem://test" }
func (m *Backend) Close() error { return nil }

func (m *Backend) List(ctx context.Context, fn func(backend.Object) error) error {
	m.mu.Lock()
	var objs []backend.Object
	for k, d := range m.objs {
		objs = append(objs, backend.Object{Key: k, Size: int64(len(d)), Version: m.vers[k], ModTime: time.Unix(1, 0)})
	}
	m.mu.Unlock()
	for _, o := range objs {
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

func (m *Backend) Stat(ctx context.Context, key string) (backend.Object, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.objs[key]
	if !ok {
		return backend.Object{}, backend.Wrap("stat", key, backend.ErrNotFound, nil)
	}
	return backend.Object{Key: key, Size: int64(len(d)), Version: m.vers[key], ModTime: time.Unix(1, 0)}, nil
}

// ReadAt serves obj's version; a replaced object fails with ErrChanged.
func (m *Backend) ReadAt(ctx context.Context, obj backend.Object, p []byte, off int64) (int, error) {
	m.Reads.Add(1)
	m.mu.Lock()
	gate := m.gate
	m.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	m.mu.Lock()
	data, ver := m.objs[obj.Key], m.vers[obj.Key]
	m.mu.Unlock()
	if ver != obj.Version {
		return 0, backend.Wrap("read", obj.Key, backend.ErrChanged, nil)
	}
	if off >= int64(len(data)) {
		return 0, io.EOF
	}
	n := copy(p, data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
