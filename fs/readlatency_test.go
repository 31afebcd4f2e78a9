package fs

import (
	"context"
	"runtime/debug"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dsmount/dsmount/cache"
)

// countObserver counts the reads it is told of.
type countObserver struct {
	n   atomic.Int64
	sum atomic.Int64 // nanoseconds
}

func (o *countObserver) Observe(seconds float64) {
	o.n.Add(1)
	o.sum.Add(int64(seconds * 1e9))
}

// TestReadLatencyObserved: with Config.ReadLatency set, each read through
// a node is timed once, and timing it allocates nothing (with a
// prometheus.Histogram, the daemon's, as the observer).
func TestReadLatencyObserved(t *testing.T) {
	s := newStore(map[string]int{"f": 3000})
	c := openCache(t)
	src := c.Source(s)
	t.Cleanup(src.Close)
	warmObject(t, src, s.objs["f"])
	obs := &countObserver{}
	m := New(Config{Cache: c, Source: src, Listing: s.listing(), ReadLatency: obs})
	e, _ := m.tree.lookup("f")
	n := m.newNode(e)
	ctx := context.Background()
	dest := make([]byte, 2048)
	read := func(n *node) func() {
		return func() {
			if _, errno := n.Read(ctx, nil, dest, 0); errno != 0 {
				t.Fatal(errno)
			}
		}
	}
	for range 3 {
		read(n)()
	}
	if got := obs.n.Load(); got != 3 || obs.sum.Load() <= 0 {
		t.Errorf("3 reads: %d observed, %d ns in all; want 3, some time", got, obs.sum.Load())
	}

	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "t_seconds", Buckets: prometheus.DefBuckets})
	timed := New(Config{Cache: c, Source: src, Listing: s.listing(), ReadLatency: h})
	plain := New(Config{Cache: c, Source: src, Listing: s.listing()})
	et, _ := timed.tree.lookup("f")
	ep, _ := plain.tree.lookup("f")
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	without := testing.AllocsPerRun(500, read(plain.newNode(ep)))
	with := testing.AllocsPerRun(500, read(timed.newNode(et)))
	if with > without {
		t.Errorf("a timed read allocates %.1f times, an untimed one %.1f; want the same", with, without)
	}
}

// BenchmarkNodeRead: a cached read through a node, with and without the
// daemon's read latency histogram: the difference is what timing each
// read costs (two clock reads and one observation).
func BenchmarkNodeRead(b *testing.B) {
	s := newStore(map[string]int{"f": 3000})
	c, err := cache.Open(b.TempDir(), cache.Options{ChunkSize: testChunk})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	src := c.Source(s)
	b.Cleanup(src.Close)
	obj := s.objs["f"]
	for idx := range src.NumChunks(obj) {
		if _, err := src.Warm(context.Background(), obj, idx, cache.Foreground, nil); err != nil {
			b.Fatal(err)
		}
	}
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "t_seconds", Buckets: prometheus.DefBuckets})
	for _, bc := range []struct {
		name string
		obs  ReadObserver
	}{{"untimed", nil}, {"timed", h}} {
		b.Run(bc.name, func(b *testing.B) {
			m := New(Config{Cache: c, Source: src, Listing: s.listing(), ReadLatency: bc.obs})
			e, _ := m.tree.lookup("f")
			n := m.newNode(e)
			dest := make([]byte, 2048)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, errno := n.Read(ctx, nil, dest, 0); errno != 0 {
					b.Fatal(errno)
				}
			}
		})
	}
}
