package stream

import (
	"testing"
	"time"
)

// fakeClock is a Budget clock that moves only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestBudget(ahead, window int64) (*Budget, *fakeClock) {
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	b := NewBudget(ahead, window)
	b.now = clk.now
	return b, clk
}

// TestBudgetShareTheirBudgets: eight streams reading at once, their
// fetches ending at once, hold at most the shared budget ahead of their
// readers together (each its equal share, not AheadBytes); with nothing
// arrived they have at most the shared window in flight. When the others
// go idle, the one still reading gets AheadBytes again.
func TestBudgetShareTheirBudgets(t *testing.T) {
	const n = 8
	b, clk := newTestBudget(16*testChunk, 8*testChunk)
	var ffs [n]*fakeFetches
	var ss [n]*Detector
	for i := range n {
		ffs[i] = newFakeFetches()
		ss[i] = NewDetector(64*testChunk, testChunk, b, ffs[i].fetch)
	}
	// Two reads each, nothing arrives: the shared window is what's asked.
	for i := range n {
		ss[i].Observe(0, 1<<20)
		ss[i].Observe(1<<20, 1<<20)
	}
	if got := b.Active(); got != n {
		t.Fatalf("%d streams active, want %d", got, n)
	}
	// The streams that read before all eight had joined asked for more:
	// their share shrinks, and they ask for nothing more until their
	// fetches deliver. Every stream asked for at least the next chunk.
	asked := 0
	for i := range n {
		asked += ffs[i].count()
		if ffs[i].times[1] != 1 {
			t.Fatalf("stream %d did not ask for the chunk after its reader's", i)
		}
	}
	// Shares of 1, 1/2, ... 1/8 of 8 chunks, each at least one chunk.
	if want := 8 + 4 + 2 + 2 + 1 + 1 + 1 + 1; asked > want {
		t.Fatalf("%d chunks asked for with nothing arrived, want at most %d", asked, want)
	}
	// Every fetch ends at once, and the readers move on: once past what
	// they asked for before all had joined, none runs more than its share
	// (2 chunks of 16 among eight) past its reader.
	for off := int64(2 << 20); off < 32*testChunk; off += 1 << 20 {
		for i := range n {
			ss[i].Observe(off, 1<<20)
			ffs[i].endAll()
			if ahead := ffs[i].highest() - int(off/testChunk); ahead > 2 && off >= 9*testChunk {
				t.Fatalf("stream %d ran %d chunks past its reader at %d MiB; its share is 2", i, ahead, off>>20)
			}
		}
	}
	// The others stop reading; past StreamIdle the last reader has the
	// whole budget, capped at AheadBytes.
	clk.advance(StreamIdle + streamsSweep)
	off := int64(32 * testChunk)
	ss[0].Observe(off, 1<<20)
	ffs[0].endAll()
	if got, want := ffs[0].highest()-32, min(16, aheadChunks); got != want {
		t.Fatalf("alone again, the stream ran %d chunks past its reader, want %d", got, want)
	}
	if got := b.Active(); got != 1 {
		t.Fatalf("%d streams active after the others went idle, want 1", got)
	}
}

// TestBudgetOneStreamKeepsItsFullWindow: the default budgets leave a lone
// stream the bounds it would have on its own.
func TestBudgetOneStreamKeepsItsFullWindow(t *testing.T) {
	b, _ := newTestBudget(0, 0)
	ff := newFakeFetches()
	s := NewDetector(64*testChunk, testChunk, b, ff.fetch)
	s.Observe(0, 1<<20)
	s.Observe(1<<20, 1<<20)
	if got := ff.count(); got != windowChunks {
		t.Fatalf("a lone stream asked for %d chunks with nothing arrived, want %d (WindowBytes)", got, windowChunks)
	}
	ff.endAll()
	if got := ff.highest(); got != aheadChunks {
		t.Fatalf("a lone stream ran to chunk %d, want %d (AheadBytes)", got, aheadChunks)
	}
}

// TestBudgetProbesAndFinishedStreamsHoldNoShare: single reads at offset
// 0 of many files (header probes) each take a share, so together they ask
// for a few windows' worth, not a window each, and hold their share for
// ProbeIdle only; a stream whose reader reaches its file's last chunk
// gives its share back at once.
func TestBudgetProbesAndFinishedStreamsHoldNoShare(t *testing.T) {
	b, clk := newTestBudget(0, 0)
	reader := NewDetector(64*testChunk, testChunk, b, newFakeFetches().fetch)
	reader.Observe(0, 1<<20)
	reader.Observe(1<<20, 1<<20)
	const probes = 40
	asked := 0
	for range probes {
		ff := newFakeFetches()
		NewDetector(64*testChunk, testChunk, b, ff.fetch).Observe(0, 64<<10)
		asked += ff.count()
	}
	if got := b.Active(); got != probes+1 {
		t.Fatalf("right after %d probes, %d streams active, want %d", probes, got, probes+1)
	}
	// Probe k gets 1/(k+1) of the window, at least a chunk: the shares sum
	// to under twice the window, plus a chunk each. Unshared, each probe
	// would ask for windowChunks.
	if limit := 2*int(DefaultWindow/testChunk) + probes; asked > limit {
		t.Fatalf("%d probes asked for %d chunks, want at most %d (twice the shared window, and one chunk each; unshared: %d)",
			probes, asked, limit, probes*windowChunks)
	}
	clk.advance(ProbeIdle + streamsSweep)
	reader.Observe(2<<20, 1<<20)
	if got := b.Active(); got != 1 {
		t.Fatalf("%v after the probes, %d streams active, want 1", ProbeIdle+streamsSweep, got)
	}

	short := NewDetector(3*testChunk, testChunk, b, newFakeFetches().fetch)
	short.Observe(0, 1<<20)
	short.Observe(1<<20, 1<<20)
	if got := b.Active(); got != 2 {
		t.Fatalf("%d streams active, want 2", got)
	}
	for off := int64(2 << 20); off <= 2*testChunk; off += 1 << 20 {
		short.Observe(off, 1<<20)
	}
	if got := b.Active(); got != 1 {
		t.Fatalf("a stream in its file's last chunk still holds a share: %d active, want 1", got)
	}
}
