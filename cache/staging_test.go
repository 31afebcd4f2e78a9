package cache

import (
	"bytes"
	"testing"
)

func TestStagingTakesUntilTheEndAndStaysBounded(t *testing.T) {
	freed := 0
	s := staging{free: func([]byte) { freed++ }}
	data := bytes.Repeat([]byte{7}, 8<<20)
	k := chunkID{idx: 1}
	s.put(k, data)
	dst := make([]byte, 4<<20)
	if !s.take(k, dst, 0) || !bytes.Equal(dst, data[:4<<20]) {
		t.Fatal("first half not served")
	}
	if !s.take(k, dst, 4<<20) {
		t.Fatal("second half not served")
	}
	if s.take(k, dst, 0) || s.bytes != 0 {
		t.Fatalf("chunk still staged after a read reached its end (bytes %d)", s.bytes)
	}
	if freed != 1 {
		t.Fatalf("buffer recycled %d times after its read, want once", freed)
	}
	for i := range 200 {
		s.put(chunkID{idx: i}, data)
	}
	if s.bytes > stagingLimit || len(s.fifo) > 2*len(s.m)+64 {
		t.Fatalf("staging holds %d bytes in %d chunks, fifo %d; limit %d bytes", s.bytes, len(s.m), len(s.fifo), stagingLimit)
	}
	for i := range 200 {
		s.take(chunkID{idx: i}, data, 0)
	}
	if s.bytes != 0 || len(s.m) != 0 {
		t.Fatalf("after taking everything: %d bytes, %d chunks", s.bytes, len(s.m))
	}
	// Every buffer left once: aged out or taken.
	if freed != 201 {
		t.Fatalf("%d buffers recycled, want 201 (each staged buffer once)", freed)
	}
}
