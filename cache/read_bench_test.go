package cache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
)

// Reads of chunks already in the cache, as the daemon serves them when the
// kernel's page cache of the mount doesn't hold them (hot reads never reach
// it). Every such read is checked against its CRC32C (doc.go, "Trust");
// these measure what that costs per pattern. With DSMOUNT_BENCH_COLD set, the cache files
// are dropped from the page cache before each pass, so reads come from the
// disk.
//
//	[DSMOUNT_BENCH_COLD=1] go test ./cache -run XXX -bench CachedRead -benchtime 2s

var benchCold = os.Getenv("DSMOUNT_BENCH_COLD") != ""

type readBench struct {
	c     *Cache
	s     *Source
	small []backend.Object
	large backend.Object
}

func newReadBench(b *testing.B) *readBench {
	b.Helper()
	mem := memory.New()
	r := rand.New(rand.NewPCG(1, 2))
	rb := &readBench{}
	for i := range 200 {
		rb.small = append(rb.small, mem.Put(fmt.Sprintf("s%03d", i), randBytes(r, 110_000)))
	}
	rb.large = mem.Put("large", randBytes(r, 64<<20))
	dir := b.TempDir()
	c, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	rb.c, rb.s = c, c.Source(mem)
	for _, o := range append(append([]backend.Object{}, rb.small...), rb.large) {
		buf := make([]byte, o.Size)
		if _, err := rb.s.ReadAt(context.Background(), o, buf, 0); err != nil {
			b.Fatal(err)
		}
	}
	c.Settle()
	c.disk.commits.barrier()
	return rb
}

// dropPageCache drops the cache files from the page cache when -cold.
func (rb *readBench) dropPageCache(b *testing.B) {
	if !benchCold {
		return
	}
	b.StopTimer()
	defer b.StartTimer()
	filepath.WalkDir(rb.c.dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if f, err := os.Open(p); err == nil {
				unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
				f.Close()
			}
		}
		return nil
	})
}

func BenchmarkCachedReadSmallWhole(b *testing.B) {
	rb := newReadBench(b)
	buf := make([]byte, 110_000)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%len(rb.small) == 0 {
			rb.dropPageCache(b)
		}
		if _, err := rb.s.ReadAt(context.Background(), rb.small[i%len(rb.small)], buf, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCachedReadLargeSequential1M(b *testing.B) {
	rb := newReadBench(b)
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	pieces := int(rb.large.Size / int64(len(buf)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%pieces == 0 {
			rb.dropPageCache(b)
		}
		if _, err := rb.s.ReadAtStream(context.Background(), rb.large, buf, int64(i%pieces)*int64(len(buf))); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRandom(b *testing.B, size int) {
	rb := newReadBench(b)
	buf := make([]byte, size)
	b.SetBytes(int64(size))
	r := rand.New(rand.NewPCG(3, 4))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%1000 == 0 {
			rb.dropPageCache(b)
		}
		off := r.Int64N(rb.large.Size/int64(size)) * int64(size)
		if _, err := rb.s.ReadAt(context.Background(), rb.large, buf, off); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCachedReadLargeRandom4K(b *testing.B)   { benchRandom(b, 4<<10) }
func BenchmarkCachedReadLargeRandom128K(b *testing.B) { benchRandom(b, 128<<10) }
