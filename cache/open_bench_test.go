package cache

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache/internal/index"
	"github.com/dsmount/dsmount/cache/internal/record"
)

// benchRecords is how many cached objects BenchmarkOpenWithRecords starts
// with: ImageNet's training set unless DSMOUNT_BENCH_RECORDS says otherwise.
func benchRecords(b *testing.B) int {
	if s := os.Getenv("DSMOUNT_BENCH_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("DSMOUNT_BENCH_RECORDS=%q: want a positive count", s)
		}
		return n
	}
	return 1_281_167
}

// fillRecords writes n cached small objects' records (object and chunk
// record each, as a warm of ImageNet leaves them) and their listing into
// the cache at dir, without their bytes: start-up reads records only.
func fillRecords(b *testing.B, dir, source string, n int) {
	c, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	objs := &backend.Listing{}
	now := time.Now().Unix()
	err = c.disk.index.Load(func(w index.Writer) error {
		for i := range n {
			obj := backend.Object{Key: fmt.Sprintf("train/n%08d/n%08d_%d.JPEG", i%1000, i%1000, i), Size: 1024, Version: fmt.Sprintf("\"%032x\"", i)}
			objs.Append(obj)
			meta := metaOf(source, obj, c.chunkSize)
			rec := record.Object{Meta: meta, CachedBytes: obj.Size, Accessed: now - int64(i%5000), Pack: uint64(1 + i/100_000), PackOff: int64(i%100_000) * record.SlotAlign}
			if err := w.SetObject(meta.ID(), &rec); err != nil {
				return err
			}
			if err := w.SetChunk(meta.ID(), 0, record.Chunk{Len: uint32(obj.Size), Sums: []uint32{uint32(i)}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.SaveListing(source, objs); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkOpenWithRecords is a daemon's start-up on a cache holding a
// record per ImageNet training file: Open, then the stored listing a mount
// is built from. used and the policy are ready once Used returns.
func BenchmarkOpenWithRecords(b *testing.B) {
	n := benchRecords(b)
	dir := b.TempDir()
	const source = "s3://bench/train"
	fillRecords(b, dir, source, n)
	for _, policy := range []string{"fill-and-hold", "lru"} {
		b.Run(policy, func(b *testing.B) { benchOpen(b, dir, source, n, policy) })
	}
}

func benchOpen(b *testing.B, dir, source string, n int, policy string) {
	for b.Loop() {
		p, _ := PolicyByName(policy)
		t0 := time.Now()
		c, err := Open(dir, Options{Policy: p})
		if err != nil {
			b.Fatal(err)
		}
		opened := time.Since(t0)
		objs, _, ok, err := c.LoadListing(source)
		if err != nil || !ok || objs.Len() != n {
			b.Fatalf("stored listing: %v %v", ok, err)
		}
		listed := time.Since(t0)
		if used := c.Used(); used != int64(n)*1024 {
			b.Fatalf("used %d, want %d", used, int64(n)*1024)
		}
		counted := time.Since(t0)
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(opened.Milliseconds()), "open-ms")
		b.ReportMetric(float64(listed.Milliseconds()), "listed-ms")
		b.ReportMetric(float64(counted.Milliseconds()), "counted-ms")
	}
}
