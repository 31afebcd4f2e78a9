package bufs

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestBufPoolClasses(t *testing.T) {
	p := NewPool(4<<20, nil)
	for _, tc := range []struct{ n, wantCap int }{
		{1, 1}, {16 << 10, 64 << 10}, {64 << 10, 64 << 10}, {64<<10 + 1, 128 << 10}, {110_000, 128 << 10},
		{1 << 20, 1 << 20}, {4 << 20, 4 << 20}, {4<<20 + 1, 4<<20 + 1},
	} {
		b := p.Get(tc.n)
		if len(b) != tc.n || cap(b) != tc.wantCap {
			t.Errorf("get(%d): len %d cap %d, want len %d cap %d", tc.n, len(b), cap(b), tc.n, tc.wantCap)
		}
		p.Put(b)
	}
	// A foreign buffer is dropped, not pooled under a class it doesn't fill
	// (a fresh pool: the loop above left a 128 KiB buffer in this one).
	p = NewPool(4<<20, nil)
	p.Put(make([]byte, 100_000))
	if b := p.Get(100_000); cap(b) != 128<<10 {
		t.Errorf("get after a foreign put: cap %d, want %d", cap(b), 128<<10)
	}
}

// TestBufferGivenBackTwiceIsRefused: a buffer put back twice (a bug in
// its holders) must not go on a free list twice, where two later gets
// would hand it to two holders. Arena and heap buffers alike.
func TestBufferGivenBackTwiceIsRefused(t *testing.T) {
	for _, withArena := range []bool{true, false} {
		p := NewPool(4<<20, nil)
		if !withArena {
			p.arena.release()
			p.arena = nil
		}
		b := p.Get(100 << 10)
		p.Put(b)
		p.Put(b)
		if n := p.DoubleReleases(); n != 1 {
			t.Errorf("arena %v: %d double releases counted; want 1", withArena, n)
		}
		x, y := p.Get(100<<10), p.Get(100<<10)
		if unsafe.SliceData(x) == unsafe.SliceData(y) {
			t.Fatalf("arena %v: a buffer given back twice was handed out twice", withArena)
		}
		// Nor is a buffer the pool never handed out taken in.
		p.Put(make([]byte, 0, 128<<10))
		if n := p.DoubleReleases(); n != 2 {
			t.Errorf("arena %v: a foreign buffer of a class's size was taken in", withArena)
		}
	}
}

// TestArena: buffers are page aligned, inside the mapping, of their class's
// capacity, reused once given back, and the arena says no when used up.
func TestArena(t *testing.T) {
	const size = 4 << 20
	a := newArena(size, 3) // classes 64, 128, 256 KiB
	if a == nil {
		t.Fatal("mmap refused")
	}
	var got [][]byte
	for i := 0; ; i++ {
		c := i % 3
		b, ok := a.get(c, minPooledBuf<<c)
		if !ok {
			break
		}
		p := uintptr(unsafe.Pointer(unsafe.SliceData(b[:1])))
		if p%4096 != 0 || !a.owns(b) || cap(b) != minPooledBuf<<c || len(b) != 0 {
			t.Fatalf("buffer %d: address %#x (aligned %v), owned %v, len %d cap %d", i, p, p%4096 == 0, a.owns(b), len(b), cap(b))
		}
		got = append(got, b)
	}
	if used := len(got); used < size/(256<<10) {
		t.Fatalf("only %d buffers from %d bytes", used, size)
	}
	if a.owns(make([]byte, 100)) || a.release() {
		t.Fatal("a heap buffer counts as the arena's, or the arena released with buffers out")
	}
	// A buffer given back is the next one of its class.
	a.put(1, got[1])
	if again, ok := a.get(1, 128<<10); !ok || unsafe.SliceData(again[:1]) != unsafe.SliceData(got[1][:1]) {
		t.Fatal("a given-back buffer was not reused")
	}
	for i, b := range got {
		a.put(i%3, b)
	}
	if !a.release() {
		t.Fatalf("release with every buffer back: %d out", a.out)
	}
	if _, ok := a.get(0, minPooledBuf); ok {
		t.Fatal("a released arena handed out a buffer")
	}
}

// TestArenaPopulatesAhead: the populator faults the arena in ahead of the
// buffers carved off it, populateAhead past them and no further, so their
// first writes don't fault; nothing before the first buffer (a daemon
// that never fetches holds none of it); release stops it.
func TestArenaPopulatesAhead(t *testing.T) {
	const size = populateAhead + 64<<20
	a := newArena(size, 3)
	if a == nil {
		t.Fatal("mmap refused")
	}
	defer a.release()
	checkPopulated(t, a, 0, "before any buffer was carved off")
	// Carving off 40 MiB moves the populated mark to 40 MiB + populateAhead.
	var bufs [][]byte
	for range 40 << 20 / (256 << 10) {
		b, ok := a.get(2, 256<<10)
		if !ok {
			t.Fatal("arena used up early")
		}
		bufs = append(bufs, b)
	}
	checkPopulated(t, a, 40<<20+populateAhead, "after carving off 40 MiB")
	for _, b := range bufs {
		a.put(2, b)
	}
	if !a.release() {
		t.Fatal("release with every buffer back failed")
	}
	select {
	case <-a.stopped:
	default:
		t.Fatal("the populator still runs after release")
	}
}

// checkPopulated waits for the populator to reach want bytes and checks
// that it stops there (nothing more due) and that exactly those bytes are
// resident.
func checkPopulated(t *testing.T, a *arena, want int, when string) {
	t.Helper()
	if got := a.waitPopulated(want); got != want {
		t.Fatalf("%s: populated %d bytes; want %d (MADV_POPULATE_WRITE refused?)", when, got, want)
	}
	if _, _, due := a.nextPopulate(); due {
		t.Fatalf("%s: more than populateAhead past the carved-off part is due", when)
	}
	if r := resident(t, a.mem); r != want {
		t.Fatalf("%s: %d bytes resident; want %d (populated ahead only)", when, r, want)
	}
}

// resident counts the bytes of b whose pages are in memory.
func resident(t *testing.T, b []byte) int {
	t.Helper()
	vec := make([]byte, (len(b)+4095)/4096)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	if errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	n := 0
	for _, v := range vec {
		if v&1 != 0 {
			n += 4096
		}
	}
	return n
}
