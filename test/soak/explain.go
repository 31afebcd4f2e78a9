package main

import (
	"sort"
	"time"
)

// The rule for read errors. A wrong byte is never explained. A failed read
// (or declaration, warm, mount or unmount) is explained when the time it
// ran, from its start to its failure, overlaps the window of a fault that
// takes the store or the daemon away:
//
//   - store-down, from the proxy's disabling until explainGrace after it is
//     enabled again (a request that failed just before may be retried and
//     fail again just after; uncached data can't be read meanwhile);
//   - kill, from the kill -9 until the new daemon has mounted again (reads
//     in flight fail, and the mount is gone until then).
//
// And, an artefact of the harness: a lift that took over liftSlow (see
// window.Lift; toxiproxy takes no new connection while it removes a
// toxic, until every link has flushed to a client that may read slowly)
// explains what failed from the lift's start until explainGrace after it
// ended, as a store-down would.
//
// Every other fault must not be seen as an error by any reader: stalled,
// reset and slow connections are the daemon's to retry, and a deleted or
// corrupted cache file is caught by its checksums and refetched.
var explainGrace = map[string]time.Duration{
	"store-down": 10 * time.Second,
	"kill":       0,
}

// liftSlow is how long a lift may take before it counts as an outage;
// liftGrace is explainGrace for one.
const (
	liftSlow  = time.Second
	liftGrace = 10 * time.Second
)

// faultSummary is what the readers saw of one kind of fault.
type faultSummary struct {
	Kind        string  `json:"kind"`
	Injected    int     `json:"injected"`
	Example     string  `json:"example"`
	InjectErrs  int     `json:"inject_errors"`
	LiftMaxS    float64 `json:"lift_max_s"`   // the slowest lift
	LiftErrors  int64   `json:"lift_errors"`  // failures explained by a slow lift only
	ReadErrors  int64   `json:"read_errors"`  // failed reads explained by it
	OtherErrors int64   `json:"other_errors"` // failed declarations, warms, mounts explained by it
	SlowReads   int64   `json:"slow_reads"`   // reads of a second or more during it
	MaxReadS    float64 `json:"max_read_s"`   // the slowest of those
}

// judgement sorts the events by the rule.
type judgement struct {
	Wrong            int64          `json:"wrong_reads"`
	WrongExamples    []event        `json:"wrong_examples"`
	Explained        int64          `json:"explained_errors"`
	Unexplained      int64          `json:"unexplained_errors"`
	UnexplainedFirst []event        `json:"unexplained_examples"`
	PerFault         []faultSummary `json:"per_fault"`
	// Reads of a second or more outside every fault window, and the
	// slowest of them: the healthy reference.
	HealthySlow     int64   `json:"healthy_slow_reads"`
	HealthyMaxS     float64 `json:"healthy_max_read_s"`
	HealthyExamples []event `json:"healthy_slow_examples"`
}

// judge applies the rule to the events, with the fault windows (an open
// window ends at now).
func judge(events []event, windows []window, now time.Time) judgement {
	var j judgement
	per := map[string]*faultSummary{}
	for _, w := range windows {
		f := per[w.Kind]
		if f == nil {
			f = &faultSummary{Kind: w.Kind, Example: w.Detail}
			per[w.Kind] = f
		}
		f.Injected++
		if w.Err != "" {
			f.InjectErrs++
		}
		if !w.Lift.IsZero() && !w.End.IsZero() {
			f.LiftMaxS = max(f.LiftMaxS, w.End.Sub(w.Lift).Seconds())
		}
	}
	end := func(w window) time.Time {
		if w.End.IsZero() {
			return now
		}
		return w.End
	}
	for _, ev := range events {
		s, e := time.Unix(0, ev.Start), time.Unix(0, ev.End)
		switch ev.E {
		case "wrong":
			j.Wrong++
			if len(j.WrongExamples) < 10 {
				j.WrongExamples = append(j.WrongExamples, ev)
			}
		case "read-error", "declare-error", "op-error":
			var by *window
			byLift := false
			for i := range windows {
				w := windows[i]
				grace, explains := explainGrace[w.Kind]
				if explains && !s.After(end(w).Add(grace)) && !e.Before(w.Start) {
					by = &windows[i]
					break
				}
			}
			for i := range windows {
				w := windows[i]
				if by == nil && !w.Lift.IsZero() && end(w).Sub(w.Lift) > liftSlow &&
					!s.After(end(w).Add(liftGrace)) && !e.Before(w.Lift) {
					by, byLift = &windows[i], true
				}
			}
			if by == nil {
				j.Unexplained++
				if len(j.UnexplainedFirst) < 20 {
					j.UnexplainedFirst = append(j.UnexplainedFirst, ev)
				}
				continue
			}
			j.Explained++
			if byLift {
				per[by.Kind].LiftErrors++
			} else if ev.E == "read-error" {
				per[by.Kind].ReadErrors++
			} else {
				per[by.Kind].OtherErrors++
			}
		case "slow":
			d := e.Sub(s).Seconds()
			during := false
			for _, w := range windows {
				if !s.After(end(w)) && !e.Before(w.Start) {
					during = true
					f := per[w.Kind]
					f.SlowReads++
					f.MaxReadS = max(f.MaxReadS, d)
				}
			}
			if !during {
				j.HealthySlow++
				j.HealthyMaxS = max(j.HealthyMaxS, d)
				if len(j.HealthyExamples) < 10 {
					j.HealthyExamples = append(j.HealthyExamples, ev)
				}
			}
		}
	}
	for _, f := range per {
		j.PerFault = append(j.PerFault, *f)
	}
	order := map[string]int{}
	for i, k := range faultKinds {
		order[k] = i
	}
	sort.Slice(j.PerFault, func(a, b int) bool { return order[j.PerFault[a].Kind] < order[j.PerFault[b].Kind] })
	return j
}
