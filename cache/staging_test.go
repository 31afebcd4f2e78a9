package cache

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
)

func TestStagingTakesUntilTheEndAndStaysBounded(t *testing.T) {
	freed := 0
	var pushedOut atomic.Int64
	s := staging{free: func([]byte) { freed++ }, pushedOut: &pushedOut}
	data := bytes.Repeat([]byte{7}, 8<<20)
	k := chunkID{idx: 1}
	s.put(k, data, 0)
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
	if pushedOut.Load() != 0 {
		t.Fatalf("%d chunks counted pushed out; none left unread", pushedOut.Load())
	}
	for i := range 200 {
		s.put(chunkID{idx: i}, data, 0)
	}
	if s.bytes > stagingLimit || len(s.fifo) > 2*len(s.m)+64 {
		t.Fatalf("staging holds %d bytes in %d chunks, fifo %d; limit %d bytes", s.bytes, len(s.m), len(s.fifo), stagingLimit)
	}
	// The oldest chunks left unread to make room, and were counted.
	if want := int64(200 - len(s.m)); pushedOut.Load() != want || want == 0 {
		t.Fatalf("%d chunks counted pushed out, want %d (200 staged, %d still held)", pushedOut.Load(), want, len(s.m))
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

// TestStagingCountsBytesTakenInAnyOrder: a chunk leaves once all of its
// bytes were taken, whatever order the reads came in (the kernel's
// concurrent READs of one chunk come in any), counting those its flight
// served before staging it; one read whole already is not staged.
func TestStagingCountsBytesTakenInAnyOrder(t *testing.T) {
	freed := 0
	var pushedOut atomic.Int64
	s := staging{free: func([]byte) { freed++ }, pushedOut: &pushedOut}
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i / 4099)
	}
	const piece = 1 << 20
	dst := make([]byte, piece)
	staged := func(k chunkID) bool { _, ok := s.m[k]; return ok }

	// The read at the chunk's end comes first: the chunk stays for the
	// others, and leaves with the last of them.
	k := chunkID{idx: 1}
	s.put(k, data, 0)
	for i, at := range []int64{3, 0, 2, 1} {
		if !s.take(k, dst, at*piece) || !bytes.Equal(dst, data[at*piece:(at+1)*piece]) {
			t.Fatalf("read %d (piece %d) not served, or wrong bytes", i, at)
		}
		if last := i == 3; staged(k) == last {
			t.Fatalf("after read %d (piece %d): staged %v", i, at, staged(k))
		}
	}

	// Its flight served the end before staging it: the other three
	// pieces empty it.
	k = chunkID{idx: 2}
	s.put(k, data, piece)
	for _, at := range []int64{1, 0, 2} {
		if !staged(k) || !s.take(k, dst, at*piece) {
			t.Fatalf("piece %d not served from staging", at)
		}
	}
	if staged(k) || s.bytes != 0 {
		t.Fatalf("chunk still staged (%d bytes) after every byte was taken", s.bytes)
	}

	// Taken whole before staging: straight back to the pool.
	s.put(chunkID{idx: 3}, data, int64(len(data)))
	if staged(chunkID{idx: 3}) || s.bytes != 0 {
		t.Fatal("a chunk its readers had taken whole was staged")
	}
	if freed != 3 || pushedOut.Load() != 0 {
		t.Fatalf("%d buffers recycled, %d pushed out; want 3 and 0", freed, pushedOut.Load())
	}
}

// TestReadJoiningAPrefetchStagesWhatItLeaves: a stream's read at a
// chunk's end that catches its readahead in flight leaves the rest of the
// chunk staged for the stream's reads of the start, which then empty it; a
// stream read taking a prefetched chunk whole while it is fetched, or a
// plain read taking part of one, leaves nothing staged.
func TestReadJoiningAPrefetchStagesWhatItLeaves(t *testing.T) {
	const chunk = 1 << 20
	mem := memory.New()
	objs := putRandom(mem, rand.New(rand.NewPCG(43, 44)), "f%d", 3, chunk)
	c := openCache(t, t.TempDir(), Options{ChunkSize: chunk})
	defer c.Close()
	s := c.Source(mem)
	ctx := context.Background()
	key := func(obj backend.Object) chunkID { return chunkID{s.ObjectID(obj), 0} }
	staged := func(obj backend.Object) bool {
		c.fetch.staged.mu.Lock()
		defer c.fetch.staged.mu.Unlock()
		_, ok := c.fetch.staged.m[key(obj)]
		return ok
	}
	// waitUntil spins until cond holds, failing the test after 10 s.
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("gave up waiting for %s", what)
			}
			runtime.Gosched()
		}
	}
	read := func(obj backend.Object, off, n int64, stream bool) error {
		buf := make([]byte, n)
		readAt := s.ReadAt
		if stream {
			readAt = s.ReadAtStream
		}
		if _, err := readAt(ctx, obj, buf, off); err != nil {
			return fmt.Errorf("read %s at %d: %w", obj.Key, off, err)
		}
		if !bytes.Equal(buf, mem.Data(obj.Key)[off:off+n]) {
			return fmt.Errorf("read %s at %d: wrong bytes", obj.Key, off)
		}
		return nil
	}
	// readDuringPrefetch reads [off, off+n) of obj once it has joined a
	// prefetch of obj's chunk that waits on the backend.
	readDuringPrefetch := func(obj backend.Object, off, n int64, stream bool) {
		t.Helper()
		release := mem.Hold()
		defer release()
		s.Prefetch(obj, 0)
		readers := func() int {
			if f := c.fetch.flights.Running(key(obj)); f != nil {
				return f.Val.buf.Readers()
			}
			return -1
		}
		waitUntil("the prefetch's flight", func() bool { return readers() == 0 })
		done := make(chan error, 1)
		go func() { done <- read(obj, off, n, stream) }()
		waitUntil("the read to join the prefetch", func() bool { return readers() == 1 })
		release()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		c.Settle()
	}

	readDuringPrefetch(objs[0], 3*chunk/4, chunk/4, true)
	if !staged(objs[0]) {
		t.Fatal("the chunk's first three quarters, fetched ahead, were not staged after its end was read")
	}
	for _, q := range []int64{1, 0, 2} {
		if !staged(objs[0]) {
			t.Fatalf("the chunk left staging before quarter %d was read", q)
		}
		if err := read(objs[0], q*chunk/4, chunk/4, true); err != nil {
			t.Fatal(err)
		}
	}
	if staged(objs[0]) {
		t.Fatal("the chunk is still staged after every byte of it was read")
	}

	readDuringPrefetch(objs[1], 0, chunk, true)
	if staged(objs[1]) {
		t.Fatal("a chunk a stream read whole while it was fetched ahead was staged")
	}
	readDuringPrefetch(objs[2], 0, chunk/4, false)
	if staged(objs[2]) {
		t.Fatal("a chunk a plain read took part of while it was fetched ahead was staged")
	}
	if n := c.Stats().StagedPushedOut; n != 0 {
		t.Fatalf("%d chunks pushed out of staging; none should", n)
	}
}

// TestStreamReadStagesTheRestOfItsChunk: a stream read that had to wait
// for its chunk and took only part of it leaves the rest staged for its
// next reads (which then don't go back to the cache file); a plain read,
// or a stream read that reached the chunk's end, leaves nothing staged.
func TestStreamReadStagesTheRestOfItsChunk(t *testing.T) {
	const chunk = 1 << 20
	mem := memory.New()
	objs := putRandom(mem, rand.New(rand.NewPCG(41, 42)), "big%d", 4, 2*chunk)
	c := openCache(t, t.TempDir(), Options{ChunkSize: chunk})
	defer c.Close()
	s := c.Source(mem)
	ctx := context.Background()
	staged := func(obj backend.Object, idx int) bool {
		c.fetch.staged.mu.Lock()
		defer c.fetch.staged.mu.Unlock()
		_, ok := c.fetch.staged.m[chunkID{s.ObjectID(obj), idx}]
		return ok
	}
	read := func(obj backend.Object, off, n int64, stream bool) {
		t.Helper()
		buf := make([]byte, n)
		readAt := s.ReadAt
		if stream {
			readAt = s.ReadAtStream
		}
		if _, err := readAt(ctx, obj, buf, off); err != nil {
			t.Fatalf("read %s at %d: %v", obj.Key, off, err)
		}
		if !bytes.Equal(buf, mem.Data(obj.Key)[off:off+n]) {
			t.Fatalf("read %s at %d: wrong bytes", obj.Key, off)
		}
		c.Settle()
	}

	// A stream's first quarter: the rest of chunk 0 waits in staging,
	// where the next quarters are taken from, until the last one.
	read(objs[0], 0, chunk/4, true)
	if !staged(objs[0], 0) {
		t.Fatal("a stream read of a chunk's first quarter left the chunk unstaged")
	}
	read(objs[0], chunk/4, chunk/4, true)
	read(objs[0], chunk/2, chunk/4, true)
	if !staged(objs[0], 0) {
		t.Fatal("the chunk left staging before a read reached its end")
	}
	read(objs[0], 3*chunk/4, chunk/4, true)
	if staged(objs[0], 0) {
		t.Fatal("the chunk is still staged after a read reached its end")
	}

	// Not a stream, or a stream read of the whole chunk: nothing staged.
	read(objs[1], 0, chunk/4, false)
	read(objs[2], 0, chunk, true)
	read(objs[3], chunk, chunk/2, false)
	for i, obj := range objs[1:] {
		for idx := range 2 {
			if staged(obj, idx) {
				t.Errorf("%s chunk %d staged after read %d", obj.Key, idx, i+1)
			}
		}
	}
}
