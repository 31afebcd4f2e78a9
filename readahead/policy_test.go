package readahead

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
	"github.com/dsmount/dsmount/cache"
)

// epochSim drives the real cache and the real Registry policy through
// shuffled epochs: each job declares its epoch's order (and the next) and
// reads it, the jobs interleaved in lockstep, with a cache holding frac of
// the dataset. It returns each job's hit rate (1 - backend reads / items)
// for every epoch after the first.
type epochSim struct {
	items, epochs, jobs int
	frac                float64
	policy              string // "order", "fill-and-hold" or "lru"
}

func (sim epochSim) run(t *testing.T) [][]float64 {
	t.Helper()
	const size = 1 << 10
	mem := memory.New()
	rng := rand.New(rand.NewPCG(4, uint64(sim.jobs)))
	objs := make([]backend.Object, sim.items)
	data := make([]byte, size)
	for i := range objs {
		objs[i] = mem.Put(fmt.Sprintf("s/%05d", i), data)
	}
	reg := New(Config{NoPrefetch: true})
	defer reg.Close()
	policy := reg.Policy()
	switch sim.policy {
	case "fill-and-hold":
		policy = cache.NewFillAndHold()
	case "lru":
		policy = cache.NewLRU()
	}
	c, err := cache.Open(t.TempDir(), cache.Options{ChunkSize: 64 << 10, Capacity: int64(sim.frac * float64(sim.items*size)), Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src := c.Source(mem)
	ids := make([]cache.ObjectID, len(objs))
	for i, o := range objs {
		ids[i] = src.ObjectID(o)
	}
	// Each job has its own mount of the same dataset (a container each).
	mounts := make([]*Mount, sim.jobs)
	orders := make([][][]int, sim.jobs) // job, epoch -> permutation
	for j := range mounts {
		mounts[j] = reg.Mount(fmt.Sprintf("m%d", j), src)
		for range sim.epochs + 1 {
			orders[j] = append(orders[j], rng.Perm(sim.items))
		}
	}
	itemsOf := func(perm []int) []Item {
		out := make([]Item, len(perm))
		for k, i := range perm {
			out[k] = Item{Ref: uint32(i), ID: ids[i]}
		}
		return out
	}
	rates := make([][]float64, sim.jobs)
	buf := make([]byte, size)
	for e := range sim.epochs {
		for j, m := range mounts {
			if _, err := m.Declare(Declaration{Job: "job", Epoch: e, Current: itemsOf(orders[j][e]), Next: itemsOf(orders[j][e+1]), Objects: objList(objs)}); err != nil {
				t.Fatal(err)
			}
		}
		misses := make([]int64, sim.jobs)
		for k := range sim.items {
			for j, m := range mounts {
				i := orders[j][e][k]
				before := mem.Reads.Load()
				m.Observe(objs[i], ids[i], 0, 0)
				if _, err := src.ReadAt(context.Background(), objs[i], buf, 0); err != nil {
					t.Fatal(err)
				}
				c.Settle()
				misses[j] += mem.Reads.Load() - before
			}
		}
		if e == 0 {
			continue
		}
		for j := range mounts {
			rates[j] = append(rates[j], 1-float64(misses[j])/float64(sim.items))
		}
	}
	return rates
}

// TestOrderPolicyOneJobHitsCachedFraction: with one job, Belady over the
// declared order hits at the cached fraction, the best possible under
// shuffled epochs (docs/multijob.md).
func TestOrderPolicyOneJobHitsCachedFraction(t *testing.T) {
	for _, f := range []float64{0.25, 0.5, 0.75} {
		rates := epochSim{items: 10_000, epochs: 5, jobs: 1, frac: f, policy: "order"}.run(t)
		t.Logf("f=%.2f: hit rate per epoch after the first %.3f", f, rates[0])
		for e, r := range rates[0] {
			if r < 0.97*f {
				t.Errorf("f=%.2f epoch %d: hit rate %.3f, want >= %.3f", f, e+1, r, 0.97*f)
			}
		}
	}
}

// TestOrderPolicyFourJobsShareOneCache: four jobs with independent orders
// sharing a cache of a quarter of the dataset. Fill-and-hold would give each
// 25% and LRU about 20%; Belady over the merged declared orders keeps what
// any job needs soonest and must reach 50%.
func TestOrderPolicyFourJobsShareOneCache(t *testing.T) {
	rates := epochSim{items: 10_000, epochs: 5, jobs: 4, frac: 0.25, policy: "order"}.run(t)
	for j, rs := range rates {
		t.Logf("job %d: hit rate per epoch after the first %.3f", j, rs)
		for e, r := range rs {
			if r < 0.50 {
				t.Errorf("job %d epoch %d: hit rate %.3f, want >= 0.50", j, e+1, r)
			}
		}
	}
}

// TestFourJobsReferencePolicies pins the comparison the order policy is
// measured against: the same four jobs under fill-and-hold and LRU.
func TestFourJobsReferencePolicies(t *testing.T) {
	if testing.Short() {
		t.Skip("reference figures only")
	}
	for _, p := range []string{"fill-and-hold", "lru"} {
		rates := epochSim{items: 10_000, epochs: 3, jobs: 4, frac: 0.25, policy: p}.run(t)
		var sum float64
		for _, rs := range rates {
			for _, r := range rs {
				sum += r
			}
		}
		mean := sum / float64(len(rates)*len(rates[0]))
		t.Logf("%s: mean hit rate %.3f", p, mean)
		if mean > 0.35 {
			t.Errorf("%s hit %.3f with four jobs at f=0.25; expected near 0.25 or below", p, mean)
		}
	}
}
