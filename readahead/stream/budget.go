package stream

import (
	"sync"
	"time"
)

// Budget shares two budgets among the Detectors of one cache: the bytes
// they may hold fetched ahead of their readers, and the bytes they may
// have asked for and not yet received. Every chunk fetched ahead waits for
// its reader in the cache's one staging area; streams that each took
// AheadBytes would, five or more at once, push each other's chunks out
// unread (to be read back from disk), and each stream's WindowBytes in
// flight would put dozens of GETs on the store where sixteen get all it
// gives.
//
// Each active stream gets an equal share of both budgets, capped at
// AheadBytes and WindowBytes, so one stream alone keeps its full window. A
// stream is active from a read until it has not read for StreamIdle
// (ProbeIdle after its first read), or until its reader reaches its file's
// last chunk. Shares are recomputed on every read, so streams that lost
// share stop topping up until their readers have consumed what they hold,
// and the budgets converge within one window of reading.
//
// Safe for concurrent use. Its mutex is taken with a Detector's held
// (never the other way round) and is never held while calling out.
type Budget struct {
	ahead, window int64
	now           func() time.Time

	mu   sync.Mutex
	seen map[*Detector]time.Time // active streams: their last read
	// counted is when seen was last swept of idle streams.
	counted time.Time
}

const (
	// StreamIdle is how long a stream without reads keeps its share, and
	// ProbeIdle how long one that has read once does.
	StreamIdle = time.Second
	ProbeIdle  = 200 * time.Millisecond
	// DefaultAhead and DefaultWindow are the budgets of one
	// cache's streams: half of its 256 MiB staging area (the rest is for
	// declared orders' prefetch), and sixteen 4 MiB chunks in flight, as
	// many as the store's own parallel GETs are served by.
	DefaultAhead  = 128 << 20
	DefaultWindow = 64 << 20
	// streamsSweep is how often idle streams are swept out of the count.
	streamsSweep = 100 * time.Millisecond
)

// NewBudget returns budgets of ahead bytes fetched ahead and window bytes
// still to arrive, shared by the streams that use it; 0 takes the default.
func NewBudget(ahead, window int64) *Budget {
	if ahead <= 0 {
		ahead = DefaultAhead
	}
	if window <= 0 {
		window = DefaultWindow
	}
	return &Budget{ahead: ahead, window: window, now: time.Now, seen: make(map[*Detector]time.Time)}
}

// share records a read of s and returns its share of both budgets now. A
// stream's first read (probe) may be a header probe: it takes a share, so
// that many files opened at once don't each fetch a full window, but only
// for ProbeIdle unless a second read follows.
func (b *Budget) share(s *Detector, probe bool) (ahead, window int64) {
	now := b.now()
	b.mu.Lock()
	_, known := b.seen[s]
	if probe {
		b.seen[s] = now.Add(ProbeIdle - StreamIdle)
	} else {
		b.seen[s] = now
	}
	if !known || now.Sub(b.counted) >= streamsSweep {
		for o, at := range b.seen {
			if now.Sub(at) > StreamIdle {
				delete(b.seen, o)
			}
		}
		b.counted = now
	}
	n := int64(len(b.seen))
	b.mu.Unlock()
	return b.split(n)
}

// split is one of n streams' share of both budgets.
func (b *Budget) split(n int64) (ahead, window int64) {
	return min(AheadBytes, b.ahead/n), min(WindowBytes, b.window/n)
}

// leave gives up s's share: its reader has reached the file's last chunk.
func (b *Budget) leave(s *Detector) {
	b.mu.Lock()
	delete(b.seen, s)
	b.mu.Unlock()
}

// Active is how many streams hold a share now.
func (b *Budget) Active() int {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, at := range b.seen {
		if now.Sub(at) <= StreamIdle {
			n++
		}
	}
	return n
}
