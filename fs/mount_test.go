package fs

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
	"github.com/dsmount/dsmount/cache"
)

// The tests of this file and control_test.go mount the package as the
// daemon does: a real cache in a temporary directory, a real FUSE mount
// (go-fuse, Mount.Serve), and a store in memory (backend/memory) standing
// for the bucket or directory. They need /dev/fuse, and root or
// fusermount.

// testChunk is the cache's chunk size in these tests: small, so that a
// file of a few KiB has several chunks.
const testChunk = 4096

// store is a dataset in memory: what backend/memory stands for.
type store struct {
	*memory.Backend
	objs map[string]backend.Object // as listed
}

// newStore puts files (key: size) in a fresh store, each with bytes of its
// own (payload).
func newStore(files map[string]int) *store {
	s := &store{Backend: memory.New(), objs: map[string]backend.Object{}}
	for k, n := range files {
		s.objs[k] = s.Put(k, payload(k, n))
	}
	return s
}

// payload is key's bytes: pseudo-random, seeded by the key, so that a read
// served from the wrong file or offset shows.
func payload(key string, n int) []byte {
	h := fnv.New64a()
	h.Write([]byte(key))
	r := rand.New(rand.NewPCG(h.Sum64(), uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// listing is the store's listing as the daemon would load it, in key
// order.
func (s *store) listing() *backend.Listing {
	l := &backend.Listing{}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range s.objs {
			if !yield(k) {
				return
			}
		}
	}) {
		l.Append(s.objs[k])
	}
	return l
}

// failingStore is a store whose reads of some keys fail as a real one's
// would: a *backend.Error of the kind given.
type failingStore struct {
	*store
	fail map[string]error
}

func (s failingStore) ReadAt(ctx context.Context, obj backend.Object, p []byte, off int64) (int, error) {
	if kind, ok := s.fail[obj.Key]; ok {
		return 0, backend.Wrap("read", obj.Key, kind, fmt.Errorf("the store refused %s", obj.Key))
	}
	return s.store.ReadAt(ctx, obj, p, off)
}

// openCache opens a real cache in a temporary directory, closed at the
// test's end.
func openCache(t *testing.T) *cache.Cache {
	t.Helper()
	c, err := cache.Open(t.TempDir(), cache.Options{ChunkSize: testChunk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// served is a mount being served, and the parts it was built of.
type served struct {
	m   *Mount
	dir string // the mountpoint
	c   *cache.Cache
	src *cache.Source
	log *logBuffer
}

// serve builds a mount of l over b (tweak may change its Config) and
// serves it in a temporary directory, unmounted at the test's end.
func serve(t *testing.T, b backend.Backend, l *backend.Listing, tweak func(*Config)) *served {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse here:", err)
	}
	c := openCache(t)
	src := c.Source(b)
	t.Cleanup(src.Close)
	log := &logBuffer{}
	cfg := Config{Cache: c, Source: src, Listing: l, Logger: slog.New(slog.NewTextHandler(log, nil))}
	if tweak != nil {
		tweak(&cfg)
	}
	m := New(cfg)
	dir := t.TempDir()
	if err := m.Serve(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Not m.Unmount alone: it waits for the server, forever if the
		// unmount failed (a test left a file open).
		if err := m.server.Unmount(); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
			syscall.Unmount(dir, syscall.MNT_DETACH)
			return
		}
		if err := m.Unmount(); err != nil {
			t.Errorf("Unmount after the server's: %v", err)
		}
	})
	return &served{m: m, dir: dir, c: c, src: src, log: log}
}

// logBuffer keeps a mount's log; go-fuse and the mount write to it
// concurrently.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// checkFile reads key through the mount and compares it with the store's
// bytes.
func (sv *served) checkFile(t *testing.T, key string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(sv.dir, key))
	if err != nil {
		t.Fatalf("reading %s through the mount: %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s through the mount: %d bytes, not the store's %d", key, len(got), len(want))
	}
}

// warmObject caches every chunk of obj through the source, as a warm does.
func warmObject(t *testing.T, src *cache.Source, obj backend.Object) {
	t.Helper()
	for idx := range src.NumChunks(obj) {
		if _, err := src.Warm(context.Background(), obj, idx, cache.Foreground, nil); err != nil {
			t.Fatalf("warming chunk %d of %s: %v", idx, obj.Key, err)
		}
	}
	if n, err := src.CachedBytes(obj); err != nil || n != obj.Size {
		t.Fatalf("%s after a warm: %d of %d bytes cached (%v)", obj.Key, n, obj.Size, err)
	}
}
