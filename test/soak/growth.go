package main

import (
	"flag"
	"fmt"
	"time"
)

// bound is how far a series may grow: its largest value over the last
// third of the run (after the warm-up) may exceed its largest over the
// first third by Abs or by Pct of it, whichever is more.
type bound struct {
	Abs float64 `json:"abs"`
	Pct float64 `json:"pct"`
}

func (b bound) limit(first float64) float64 { return first + max(b.Abs, first*b.Pct/100) }

// bounds are the growth bounds of the checked series (docs/soak.md says
// why these).
type bounds struct {
	RSS        bound `json:"rss_bytes"`
	Goroutines bound `json:"goroutines"`
	FDs        bound `json:"fds"`
}

func defaultBounds() bounds {
	return bounds{
		RSS:        bound{Abs: 64 << 20, Pct: 25},
		Goroutines: bound{Abs: 50, Pct: 25},
		FDs:        bound{Abs: 32, Pct: 25},
	}
}

func (b *bounds) flags(fs *flag.FlagSet) {
	fs.Float64Var(&b.RSS.Abs, "rss-growth-bytes", b.RSS.Abs, "RSS may grow this many bytes ...")
	fs.Float64Var(&b.RSS.Pct, "rss-growth-pct", b.RSS.Pct, "... or this many percent, whichever is more")
	fs.Float64Var(&b.Goroutines.Abs, "goroutine-growth", b.Goroutines.Abs, "goroutines may grow by this many ...")
	fs.Float64Var(&b.Goroutines.Pct, "goroutine-growth-pct", b.Goroutines.Pct, "... or this many percent, whichever is more")
	fs.Float64Var(&b.FDs.Abs, "fd-growth", b.FDs.Abs, "open fds may grow by this many ...")
	fs.Float64Var(&b.FDs.Pct, "fd-growth-pct", b.FDs.Pct, "... or this many percent, whichever is more")
}

// growth is one series' growth check over one span of samples.
type growth struct {
	Series  string  `json:"series"`
	Span    string  `json:"span"` // "run", or "daemon pid N" for one daemon's life
	First   float64 `json:"first_third_max"`
	Last    float64 `json:"last_third_max"`
	Limit   float64 `json:"limit"` // 0: not checked, reported only
	Samples int     `json:"samples"`
	OK      bool    `json:"ok"`
}

// series are the sampled figures growth looks at; checked ones have a
// bound.
var series = []struct {
	name  string
	value func(sample) float64
	bound func(bounds) *bound
}{
	{"rss_bytes", func(s sample) float64 { return float64(s.RSS) }, func(b bounds) *bound { return &b.RSS }},
	{"goroutines", func(s sample) float64 { return float64(s.Goroutines) }, func(b bounds) *bound { return &b.Goroutines }},
	{"fds", func(s sample) float64 { return float64(s.FDs) }, func(b bounds) *bound { return &b.FDs }},
	{"go_heap_bytes", func(s sample) float64 { return float64(s.Heap) }, nil},
	{"badger_bytes", func(s sample) float64 { return float64(s.Badger) }, nil},
	{"cache_bytes", func(s sample) float64 { return float64(s.Cache) }, nil},
}

// minLifeSpan is the least a daemon's life must last, after its own
// warm-up, for its growth to be checked on its own.
const minLifeSpan = 3 * time.Minute

// growthChecks compares each series' largest value over the last third
// of the samples taken after warmup with its largest over the first
// third: over the whole run ("run"; a kill -9 restarts the daemon, so
// this spans several lives), and over each daemon's life that lasts
// minLifeSpan after warmup of its own.
func growthChecks(samples []sample, warmup time.Duration, b bounds) []growth {
	var out []growth
	out = append(out, spanGrowth("run", samples, warmup, b)...)
	lives := map[int][]sample{}
	var order []int
	for _, s := range samples {
		if !s.Up {
			continue
		}
		if _, ok := lives[s.PID]; !ok {
			order = append(order, s.PID)
		}
		lives[s.PID] = append(lives[s.PID], s)
	}
	for _, pid := range order {
		life := lives[pid]
		// The daemon's own warm-up: a restarted daemon fills its memory
		// and caches again.
		w := min(warmup, time.Minute)
		if time.Duration((life[len(life)-1].T-life[0].T)*float64(time.Second)) < w+minLifeSpan {
			continue
		}
		shifted := make([]sample, len(life))
		for i, s := range life {
			s.T -= life[0].T
			shifted[i] = s
		}
		out = append(out, spanGrowth(fmt.Sprintf("daemon pid %d", pid), shifted, w, b)...)
	}
	return out
}

func spanGrowth(span string, samples []sample, warmup time.Duration, b bounds) []growth {
	var kept []sample
	for _, s := range samples {
		if s.Up && s.T >= warmup.Seconds() {
			kept = append(kept, s)
		}
	}
	if len(kept) < 3 {
		return nil
	}
	t0, t1 := kept[0].T, kept[len(kept)-1].T
	third := (t1 - t0) / 3
	var out []growth
	for _, ser := range series {
		g := growth{Series: ser.name, Span: span, Samples: len(kept), OK: true}
		for _, s := range kept {
			v := ser.value(s)
			if s.T <= t0+third {
				g.First = max(g.First, v)
			}
			if s.T >= t1-third {
				g.Last = max(g.Last, v)
			}
		}
		if ser.bound != nil {
			g.Limit = ser.bound(b).limit(g.First)
			g.OK = g.Last <= g.Limit
		}
		out = append(out, g)
	}
	return out
}
