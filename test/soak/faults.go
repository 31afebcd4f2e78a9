package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// faultKinds are the faults, in their default round-robin order.
var faultKinds = []string{"stall", "reset", "latency", "store-down", "cache-file", "kill"}

func isFaultKind(s string) bool { return slices.Contains(faultKinds, s) }

// The faults' parameters.
const (
	stallToxicity = 0.05 // share of connections stalled
	resetToxicity = 0.10 // share of connections reset
	latencyMs     = 200  // added to every answer, ± latencyJitterMs
	latencyJitter = 50
)

// window is one injected fault: from Start to End (End is zero while it
// lasts; a cache-file fault is an instant, Start = End).
type window struct {
	Kind   string    `json:"kind"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Detail string    `json:"detail"`
	Err    string    `json:"error,omitempty"` // injecting or lifting it failed
	// Lift is when undoing it began (held faults and store-down): toxiproxy
	// removes a toxic only once every link has flushed what the toxic
	// held to its client, and accepts no new connection meanwhile, so a
	// slow lift is a short outage of the store.
	Lift time.Time `json:"lift_start"`
}

// injector injects a fault every interval, round-robin over kinds, and
// keeps the windows. Held faults (stall, reset, latency) last hold, the
// store is down for down; a kill lasts until the main loop has restarted
// the daemon, remounted and says so (endKill).
type injector struct {
	r     *rig
	log   *slog.Logger
	rng   *rand.Rand
	kinds []string
	hold  time.Duration
	down  time.Duration

	mu      sync.Mutex
	windows []*window
	tampers int
}

func newInjector(r *rig, cfg config, log *slog.Logger) *injector {
	return &injector{
		r: r, log: log, rng: rand.New(rand.NewPCG(cfg.seed, 0xfa17)), kinds: cfg.faults,
		// ~20 s and ~10 s at one fault a minute; shorter when faults come
		// more often, so that one is lifted before the next.
		hold: min(20*time.Second, cfg.faultInterval*2/3),
		down: min(10*time.Second, cfg.faultInterval/3),
	}
}

// run injects until ctx is done, then lifts whatever it holds.
func (in *injector) run(ctx context.Context, interval time.Duration) {
	if len(in.kinds) == 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		in.inject(ctx, in.kinds[i%len(in.kinds)])
	}
}

func (in *injector) open(kind, detail string) *window {
	w := &window{Kind: kind, Start: time.Now(), Detail: detail}
	in.mu.Lock()
	in.windows = append(in.windows, w)
	in.mu.Unlock()
	in.log.Info("fault", "kind", kind, "detail", detail)
	return w
}

func (in *injector) close(w *window, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	w.End = time.Now()
	if err != nil && w.Err == "" {
		w.Err = err.Error()
	}
	if err != nil {
		in.log.Warn("fault", "kind", w.Kind, "err", err)
	}
}

// lifting records that undoing w begins.
func (in *injector) lifting(w *window) {
	in.mu.Lock()
	defer in.mu.Unlock()
	w.Lift = time.Now()
}

// endKill closes the open kill window: the daemon is back and mounted.
func (in *injector) endKill() {
	in.mu.Lock()
	var open *window
	for _, w := range in.windows {
		if w.Kind == "kill" && w.End.IsZero() {
			open = w
		}
	}
	in.mu.Unlock()
	if open != nil {
		in.close(open, nil)
	}
}

// snapshot copies the windows (open ones end now).
func (in *injector) snapshot() []window {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]window, len(in.windows))
	for i, w := range in.windows {
		out[i] = *w
	}
	return out
}

// active names the faults in force now.
func (in *injector) active() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var names []string
	for _, w := range in.windows {
		if w.End.IsZero() {
			names = append(names, w.Kind)
		}
	}
	return strings.Join(names, "+")
}

func (in *injector) inject(ctx context.Context, kind string) {
	tp := in.r.proxy()
	switch kind {
	case "stall":
		in.holdToxic(ctx, kind, fmt.Sprintf("%.0f%% of connections stall (no bytes, never closed) for %v", stallToxicity*100, in.hold),
			testenv.Toxic{Name: "stall", Type: "timeout", Stream: "downstream", Toxicity: stallToxicity,
				Attributes: map[string]any{"timeout": 0}})
	case "reset":
		in.holdToxic(ctx, kind, fmt.Sprintf("%.0f%% of connections reset for %v", resetToxicity*100, in.hold),
			testenv.Toxic{Name: "reset", Type: "reset_peer", Stream: "downstream", Toxicity: resetToxicity,
				Attributes: map[string]any{"timeout": 0}})
	case "latency":
		in.holdToxic(ctx, kind, fmt.Sprintf("+%d ± %d ms on every answer for %v", latencyMs, latencyJitter, in.hold),
			testenv.Toxic{Name: "latency", Type: "latency", Stream: "downstream", Toxicity: 1,
				Attributes: map[string]any{"latency": latencyMs, "jitter": latencyJitter}})
	case "store-down":
		w := in.open(kind, fmt.Sprintf("proxy disabled (connections refused) for %v", in.down))
		if err := tp.SetProxyEnabledErr(proxy, false); err != nil {
			in.close(w, err)
			return
		}
		sleepCtx(ctx, in.down)
		in.lift(w, func(tp *testenv.Toxiproxy) error { return tp.SetProxyEnabledErr(proxy, true) })
	case "cache-file":
		in.tamper()
	case "kill":
		if !in.r.alive() {
			w := in.open(kind, "skipped: the daemon is not running")
			in.close(w, nil)
			return
		}
		w := in.open(kind, "")
		pid, err := in.r.kill()
		in.mu.Lock()
		w.Detail = fmt.Sprintf("kill -9 of daemon pid %d", pid)
		in.mu.Unlock()
		if err != nil {
			in.close(w, err)
		}
	}
}

// holdToxic adds tx for in.hold (less if ctx ends first), then removes it.
func (in *injector) holdToxic(ctx context.Context, kind, detail string, tx testenv.Toxic) {
	w := in.open(kind, detail)
	tp := in.r.proxy()
	err := retry(func() error {
		err := tp.AddToxicErr(proxy, tx)
		if err != nil && strings.Contains(err.Error(), "409") {
			return nil // an earlier try got there; its answer was lost
		}
		return err
	})
	if err != nil {
		in.close(w, err)
		return
	}
	sleepCtx(ctx, in.hold)
	in.lift(w, func(tp *testenv.Toxiproxy) error {
		err := tp.RemoveToxicErr(proxy, tx.Name)
		if err != nil && strings.Contains(err.Error(), "404") {
			return nil // an earlier try got there; its answer was lost
		}
		return err
	})
}

// tamper does the next of testenv.TamperKinds to a random cache file.
// Under passthrough the kernel reads a wholly cached large file's cache
// file itself, unchecked (docs/guarantees.md), so then the files of
// several chunks get only the faults that leave an open file's bytes
// alone (delete, replace).
func (in *injector) tamper() {
	w := in.open("cache-file", "")
	files, err := testenv.CacheFiles(in.r.cacheDir, "data", "packs")
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("no cache files")
	}
	if err != nil {
		in.close(w, err)
		return
	}
	in.mu.Lock()
	victim := files[in.rng.IntN(len(files))]
	kind := testenv.TamperKinds[in.tampers%len(testenv.TamperKinds)]
	in.tampers++
	in.mu.Unlock()
	rel, _ := filepath.Rel(in.r.cacheDir, victim)
	if in.r.fastPath == "passthrough" && strings.HasPrefix(rel, "data/") && (kind == "flip" || kind == "truncate-extend") {
		kind = "replace"
	}
	err = testenv.TamperFile(victim, kind, in.rng)
	in.mu.Lock()
	w.Detail = kind + " " + rel
	in.mu.Unlock()
	in.close(w, err)
}

// sleepCtx waits d or until ctx is done. The fault schedule is made of
// timers; nothing waits on one for another's work.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
