package stream

import (
	"sync"
	"testing"
)

const (
	testChunk = 4 << 20
	// windowChunks is how many whole test chunks WindowBytes holds.
	windowChunks = WindowBytes / testChunk
	aheadChunks  = AheadBytes / testChunk
)

// fakeFetches records a Detector's fetches and lets a test deliver
// their bytes when it chooses.
type fakeFetches struct {
	mu      sync.Mutex
	asked   []int // in the order asked
	times   map[int]int
	arrived map[int]func(int)
	ended   map[int]func()
}

func newFakeFetches() *fakeFetches {
	return &fakeFetches{times: map[int]int{}, arrived: map[int]func(int){}, ended: map[int]func(){}}
}

func (f *fakeFetches) fetch(idx int, arrived func(int), ended func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, idx)
	f.times[idx]++
	f.arrived[idx], f.ended[idx] = arrived, ended
}

// deliver reports n bytes of chunk idx arrived.
func (f *fakeFetches) deliver(idx, n int) {
	f.mu.Lock()
	fn := f.arrived[idx]
	f.mu.Unlock()
	fn(n)
}

// end ends chunk idx's fetch.
func (f *fakeFetches) end(idx int) {
	f.mu.Lock()
	fn := f.ended[idx]
	delete(f.ended, idx)
	f.mu.Unlock()
	fn()
}

// endAll ends every fetch not yet ended, including those they start.
func (f *fakeFetches) endAll() {
	for {
		f.mu.Lock()
		idx := -1
		for i := range f.ended {
			idx = i
			break
		}
		f.mu.Unlock()
		if idx < 0 {
			return
		}
		f.end(idx)
	}
}

func (f *fakeFetches) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.asked)
}

func (f *fakeFetches) highest() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := -1
	for _, c := range f.asked {
		h = max(h, c)
	}
	return h
}

// TestDetectorWindow: 128 KiB reads straight through a 64-chunk file
// whose fetches end as soon as they start start a stream at once (the
// first read is at offset 0), ask for every chunk past the first exactly
// once and none past the end, and never run more than AheadBytes past the
// reader.
func TestDetectorWindow(t *testing.T) {
	const size = 64 * testChunk
	ff := newFakeFetches()
	s := NewDetector(size, testChunk, nil, ff.fetch)
	maxAhead := 0
	for off := int64(0); off < size; off += 128 << 10 {
		if !s.Observe(off, 128<<10) {
			t.Fatalf("read at %d of a pass from the start is not a stream", off)
		}
		ff.endAll()
		maxAhead = max(maxAhead, ff.highest()-int(off/testChunk))
	}
	for c := 1; c < 64; c++ {
		if n := ff.times[c]; n != 1 {
			t.Errorf("chunk %d asked for %d times, want once", c, n)
		}
	}
	if ff.times[0] != 0 || ff.highest() != 63 {
		t.Errorf("asked for chunk 0 %d times (the reader's own), highest %d; want 0 and 63", ff.times[0], ff.highest())
	}
	if maxAhead != aheadChunks {
		t.Errorf("window reached %d chunks past the reader, want %d", maxAhead, aheadChunks)
	}
}

// TestDetectorTopsUpAsBytesArrive: with nothing arrived, a stream asks
// for WindowBytes of chunks and stops; as the bytes of the chunks in
// flight come in, without any read, it asks for more, one chunk per chunk
// of bytes arrived. A window topped up only by reads fetches in waves.
func TestDetectorTopsUpAsBytesArrive(t *testing.T) {
	ff := newFakeFetches()
	s := NewDetector(64*testChunk, testChunk, nil, ff.fetch)
	s.Observe(0, 1<<20)
	if got := ff.count(); got != windowChunks {
		t.Fatalf("a new stream asked for %d chunks, want %d (WindowBytes)", got, windowChunks)
	}
	s.Observe(1<<20, 1<<20) // a second read confirms the stream
	// Half of each of chunks 1-4 arrives: two chunks' worth of bytes.
	for c := 1; c <= 4; c++ {
		ff.deliver(c, testChunk/2)
	}
	if got := ff.count(); got != windowChunks+2 {
		t.Fatalf("after two chunks' bytes arrived, %d chunks asked for, want %d", got, windowChunks+2)
	}
	// A retried read reports more than its chunk: only the chunk counts.
	ff.deliver(5, 3*testChunk)
	if got := ff.count(); got != windowChunks+3 {
		t.Fatalf("after a chunk reported three times its bytes, %d chunks asked for, want %d", got, windowChunks+3)
	}
	// A fetch that ends without reporting (found cached, local backend)
	// frees the rest of its bytes; one already settled frees nothing.
	ff.end(6)
	ff.end(5)
	if got := ff.count(); got != windowChunks+4 {
		t.Fatalf("after chunk 6 ended, %d chunks asked for, want %d", got, windowChunks+4)
	}
}

// TestDetectorStopsAheadOfAnIdleReader: fetches that end at once never
// carry a stream more than WindowBytes past a reader that has read once
// (a header probe), nor more than AheadBytes past one that read twice
// and stopped.
func TestDetectorStopsAheadOfAnIdleReader(t *testing.T) {
	ff := newFakeFetches()
	s := NewDetector(64*testChunk, testChunk, nil, ff.fetch)
	s.Observe(0, 1<<20)
	ff.endAll()
	if got := ff.highest(); got != windowChunks {
		t.Fatalf("one read at offset 0 carried the stream to chunk %d, want %d", got, windowChunks)
	}
	s.Observe(1<<20, 1<<20)
	ff.endAll()
	if got := ff.highest(); got != aheadChunks {
		t.Fatalf("stream ran to chunk %d past a reader in chunk 0, want %d", got, aheadChunks)
	}
	s.Observe(2<<20, 1<<20) // same chunk: nothing new
	if got := ff.highest(); got != aheadChunks {
		t.Fatalf("a read in the same chunk moved the stream to chunk %d", got)
	}
}

// TestDetectorChunkBiggerThanWindow: with chunks bigger than
// WindowBytes, the chunk past the reader is still fetched.
func TestDetectorChunkBiggerThanWindow(t *testing.T) {
	const chunk = 2 * WindowBytes
	ff := newFakeFetches()
	s := NewDetector(8*chunk, chunk, nil, ff.fetch)
	s.Observe(0, 1<<20)
	if ff.count() != 1 || ff.times[1] != 1 {
		t.Fatalf("asked for %v, want chunk 1", ff.asked)
	}
}

// TestDetectorRandomReadsDontPrefetch: scattered reads never start a
// stream.
func TestDetectorRandomReadsDontPrefetch(t *testing.T) {
	ff := newFakeFetches()
	s := NewDetector(1<<30, testChunk, nil, ff.fetch)
	for _, off := range []int64{900 << 20, 10 << 20, 500 << 20, 100 << 20, 700 << 20} {
		if s.Observe(off, 128<<10) || ff.count() > 0 {
			t.Fatalf("read at %d started a stream (asked for %v)", off, ff.asked)
		}
	}
}

// TestDetectorRandom: reads that jump make a file random after
// randomMinJumps of them; a few short reads that follow one another (an
// mmap fault's read-around) neither end it nor start a stream; a chunk's
// worth read in order does.
func TestDetectorRandom(t *testing.T) {
	f := newFakeFetches()
	d := NewDetector(1<<30, testChunk, nil, f.fetch)
	d.GuardRandom(func() bool { return true })
	offs := []int64{500 << 20, 100 << 20, 900 << 20}
	for i, off := range offs {
		d.Observe(off, 4096)
		if want := i >= randomMinJumps; d.Random() != want {
			t.Fatalf("after %d jumping reads: Random %v, want %v", i+1, d.Random(), want)
		}
	}
	next := offs[len(offs)-1] + 4096
	for range 3 {
		if d.Observe(next, 64<<10) {
			t.Fatal("a random reader's short reads in a row were taken for a stream")
		}
		next += 64 << 10
	}
	if !d.Random() || len(f.asked) != 0 {
		t.Fatalf("after short reads in a row: Random %v, fetched ahead %v; want random, nothing fetched", d.Random(), f.asked)
	}
	for range testChunk / (1 << 20) {
		d.Observe(next, 1<<20)
		next += 1 << 20
	}
	if d.Random() {
		t.Fatal("still random after a chunk's worth read in order")
	}
}

// TestDetectorRandomThatFits: a file the cache can hold streams on two
// reads in a row even while read at random, as before GuardRandom.
func TestDetectorRandomThatFits(t *testing.T) {
	f := newFakeFetches()
	d := NewDetector(1<<30, testChunk, nil, f.fetch)
	d.GuardRandom(func() bool { return false })
	for _, off := range []int64{500 << 20, 100 << 20, 900 << 20} {
		d.Observe(off, 4096)
	}
	if !d.Random() {
		t.Fatal("not random after three jumping reads")
	}
	if !d.Observe(900<<20+4096, 64<<10) || len(f.asked) == 0 {
		t.Fatalf("two reads in a row of a file that fits: no stream (fetched %v)", f.asked)
	}
}
