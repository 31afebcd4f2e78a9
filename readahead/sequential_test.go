package readahead

import "testing"

// TestSequentialWindow: 128 KiB reads straight through a 64-chunk file
// start a stream at once (the first read is at offset 0), then keep
// MaxChunks chunks ahead, never asking for a chunk twice or past the end.
func TestSequentialWindow(t *testing.T) {
	const chunk, size = 4 << 20, 64 * (4 << 20)
	var s Sequential
	asked := make(map[int]bool)
	maxAhead := 0
	for off := int64(0); off < size; off += 128 << 10 {
		from, to, stream := s.Observe(off, 128<<10, size, chunk)
		if !stream {
			t.Fatalf("read at %d of a pass from the start is not a stream", off)
		}
		for c := from; c < to; c++ {
			if asked[c] {
				t.Fatalf("chunk %d asked for twice", c)
			}
			if c >= 64 {
				t.Fatalf("chunk %d is past the end", c)
			}
			asked[c] = true
		}
		cur := int(off / chunk)
		if to > from {
			maxAhead = max(maxAhead, to-1-cur)
		}
	}
	if maxAhead != MaxChunks {
		t.Errorf("window reached %d chunks ahead, want %d", maxAhead, MaxChunks)
	}
	for c := 1; c < 64; c++ {
		if !asked[c] {
			t.Errorf("chunk %d never prefetched", c)
		}
	}
}

// TestSequentialRandomReadsDontPrefetch: scattered reads never start a
// stream.
func TestSequentialRandomReadsDontPrefetch(t *testing.T) {
	var s Sequential
	for _, off := range []int64{900 << 20, 10 << 20, 500 << 20, 100 << 20, 700 << 20} {
		if from, to, stream := s.Observe(off, 128<<10, 1<<30, 4<<20); to > from || stream {
			t.Fatalf("read at %d prefetched chunks [%d,%d) (stream %v)", off, from, to, stream)
		}
	}
}
