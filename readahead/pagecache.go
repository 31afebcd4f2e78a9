package readahead

import (
	"math"
	"math/bits"
	"time"

	"github.com/dsmount/dsmount/cache"
)

// The kernel keeps what the daemon serves in its page cache, and on a
// no-open mount serves a later read of it from there without asking the
// daemon. With a page cache large enough to hold an epoch's reads, every
// read but the first of a file in an epoch is free, the reads that reach
// the daemon are one shuffled epoch after another, and holding what is
// held (fill-and-hold) is what serves them best: the policy falls back to
// it (absorbsEpochs). With a smaller one, a job's read of a file another
// job read seconds ago may or may not reach the daemon; counting such
// needs as free (the model's horizon said the page cache would serve
// them) lost more hits than it saved (docs/multijob.md), so they count.
//
// How long the page cache holds what was served depends on the memory the
// readers have and how fast they read, neither of which the daemon knows,
// so it is learnt from the reads (pageCacheModel): a job that passes a file
// in its order without a read reaching the daemon got it from the page
// cache (it was alive there at that age), and a read that reaches the
// daemon of a file it served before did not (it was gone at that age). The
// horizon is the age from which files are mostly gone. It is learnt apart
// for files served since the reading job's epoch began and for files
// served before: where the page cache is emptied between epochs (a
// benchmark's drop_caches, a node whose other work flushes it), a file
// read earlier in the same epoch is there and one from the last epoch is
// not, at any age. The horizons are shown in stats; a horizon for files
// of the same epoch that never ends is the fallback's trigger.

// horizons are a pageCacheModel's learnt horizons: for files served since
// the reading job's epoch began (same) and before (earlier). 0: unknown
// (nothing is taken as in the page cache); math.MaxInt64: everything
// stays.
type horizons struct{ same, earlier time.Duration }

// pageCacheModel estimates the page cache's horizons from ages at which
// files were found alive in it or gone. Ages fall in buckets of powers of
// two milliseconds. Guarded by Registry.mu.
type pageCacheModel struct {
	served  map[cache.ObjectID]time.Time // when each file was last served to a reader
	classes [2]ageCounts                 // 0: served this epoch, 1: before
	samples int
	horizon horizons
}

type ageCounts struct{ alive, gone [ageBuckets]float64 }

const (
	ageBuckets = 26 // 1 ms .. 2^25 ms (9 h)
	// goneFloor: a read that reaches the daemon this soon after the file
	// was served raced that serving (two readers at once), it says nothing
	// about how long the page cache keeps files.
	goneFloor = 50 * time.Millisecond
	// decayEvery samples, all counts halve: the horizon follows a change
	// of the readers' memory or rate.
	decayEvery = 4096
	// minGone is how many "gone" samples a bucket needs before it counts.
	minGone = 4
)

func ageBucket(age time.Duration) int {
	ms := age.Milliseconds()
	if ms < 1 {
		return 0
	}
	return min(bits.Len64(uint64(ms)), ageBuckets-1)
}

// class is 0 for a file served at t0 since epochStart, 1 before it.
func class(t0, epochStart time.Time) int {
	if !t0.Before(epochStart) {
		return 0
	}
	return 1
}

// servedNow records that a read of id, by a job whose epoch began at
// epochStart, reached the daemon at now: the file was not in the page
// cache (a "gone" sample if the daemon served it before) and is now.
func (pc *pageCacheModel) servedNow(id cache.ObjectID, now, epochStart time.Time) {
	if pc.served == nil {
		pc.served = make(map[cache.ObjectID]time.Time)
	}
	if t0, ok := pc.served[id]; ok {
		if age := now.Sub(t0); age >= goneFloor {
			pc.classes[class(t0, epochStart)].gone[ageBucket(age)]++
			pc.sampled()
		}
	}
	pc.served[id] = now
}

// passedUnseen records that a job whose epoch began at epochStart passed
// id in its order with no read of it reaching the daemon: the page cache
// had it. It returns the sample it recorded (0 if none), for unsee.
func (pc *pageCacheModel) passedUnseen(id cache.ObjectID, now, epochStart time.Time) uint8 {
	t0, ok := pc.served[id]
	if !ok {
		return 0
	}
	c, b := class(t0, epochStart), ageBucket(now.Sub(t0))
	pc.classes[c].alive[b]++
	pc.sampled()
	return uint8(1 + c*ageBuckets + b)
}

// unsee takes back a sample passedUnseen recorded: the read came after
// all, late (the page cache may not have had the file).
func (pc *pageCacheModel) unsee(sample uint8) {
	if sample == 0 {
		return
	}
	c, b := int(sample-1)/ageBuckets, int(sample-1)%ageBuckets
	pc.classes[c].alive[b] = max(pc.classes[c].alive[b]-1, 0)
	pc.horizon = horizons{same: pc.classes[0].estimate(), earlier: pc.classes[1].estimate()}
}

func (pc *pageCacheModel) sampled() {
	pc.samples++
	if pc.samples%decayEvery == 0 {
		for c := range pc.classes {
			for b := range ageBuckets {
				pc.classes[c].alive[b] /= 2
				pc.classes[c].gone[b] /= 2
			}
		}
	}
	pc.horizon = horizons{same: pc.classes[0].estimate(), earlier: pc.classes[1].estimate()}
}

// estimate is the lower edge of the first age bucket where files were
// found gone more often than alive; with files found alive and never gone,
// unbounded; with no samples, 0.
func (a *ageCounts) estimate() time.Duration {
	anyAlive := false
	for b := range ageBuckets {
		if a.gone[b] >= minGone && a.gone[b] > a.alive[b] {
			if b == 0 {
				return 0
			}
			return time.Duration(1<<(b-1)) * time.Millisecond
		}
		anyAlive = anyAlive || a.alive[b] > 0
	}
	if anyAlive {
		return math.MaxInt64
	}
	return 0
}

// absorbsEpochs reports whether the page cache was found to hold every
// file read in an epoch for the rest of it: then the only reads that reach
// the daemon are each file's first in an epoch, a sequence of shuffled
// epochs in which holding what is held (fill-and-hold) serves them as well
// as anything can, and a declared order has nothing to add (Policy falls
// back; stats say so).
func (pc *pageCacheModel) absorbsEpochs() bool { return pc.horizon.same == math.MaxInt64 }

// forget drops files served longer ago than the horizons (and an hour)
// allow to matter, and past maxServed files, half of them at random: the
// model needs a sample of the files served, not all (a million-file
// epoch's would be a large map to keep).
func (pc *pageCacheModel) forget(now time.Time) {
	if keep := max(time.Hour, pc.horizon.same, pc.horizon.earlier); keep != math.MaxInt64 {
		for id, t0 := range pc.served {
			if now.Sub(t0) > keep {
				delete(pc.served, id)
			}
		}
	}
	if n := len(pc.served) - maxServed/2; len(pc.served) > maxServed {
		for id := range pc.served { // map order: a random half
			if n == 0 {
				break
			}
			delete(pc.served, id)
			n--
		}
	}
}

// maxServed bounds the files the model remembers serving.
const maxServed = 1 << 18

// PageCache is what the registry has learnt of the kernel's page cache:
// how long it holds a file the daemon served, for a file served since the
// reading job's epoch began (Same) and before (Earlier). Reads of a file
// within that are left to the page cache.
type PageCache struct {
	Same    Horizon `json:"same_epoch"`
	Earlier Horizon `json:"earlier"`
	Samples int     `json:"samples"`
	// FillAndHold: the page cache holds every file read in an epoch, so
	// the order policy keeps what it holds (see absorbsEpochs).
	FillAndHold bool `json:"fill_and_hold"`
}

// Horizon is one learnt horizon. Seconds 0: nothing learnt yet (no read is
// taken as served by the page cache); Unbounded: files were found there at
// every age and never gone.
type Horizon struct {
	Seconds   float64 `json:"seconds"`
	Unbounded bool    `json:"unbounded"`
}

func horizonOf(d time.Duration) Horizon {
	if d == math.MaxInt64 {
		return Horizon{Unbounded: true}
	}
	return Horizon{Seconds: d.Seconds()}
}

// PageCache reports the page cache's horizons as learnt so far.
func (r *Registry) PageCache() PageCache {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return PageCache{Same: horizonOf(r.pc.horizon.same), Earlier: horizonOf(r.pc.horizon.earlier), Samples: r.pc.samples,
		FillAndHold: r.pc.absorbsEpochs()}
}
