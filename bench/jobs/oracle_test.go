package jobs

import (
	"math/rand/v2"
	"testing"
)

// One job reading a fresh shuffle of every file each epoch, with a cache
// of half of them: knowing the future, the best a cache can do is keep
// the next epoch's first half, a hit rate of exactly one half from the
// second epoch on (docs/pipeline.md's half-cache series measures dsmount
// there). And with a quarter, a quarter. Files of one size.
func TestOracleOneShuffledJob(t *testing.T) {
	const n, epochs = 3000, 4
	rng := rand.New(rand.NewPCG(1, 2))
	var reads []read
	var starts []int
	for e := 0; e < epochs; e++ {
		starts = append(starts, len(reads))
		for _, item := range rng.Perm(n) {
			reads = append(reads, read{item: item, start: int64(len(reads))})
		}
	}
	sizes := make([]int64, n)
	for i := range sizes {
		sizes[i] = 100
	}
	for _, tc := range []struct {
		capacity int64
		want     float64
	}{{n * 100 / 2, 0.5}, {n * 100 / 4, 0.25}} {
		got := oracle(reads, starts, sizes, tc.capacity)
		if got[0] != 0 {
			t.Errorf("capacity %d: first epoch hit rate %v, want 0", tc.capacity, got[0])
		}
		for e := 1; e < epochs; e++ {
			if d := got[e] - tc.want; d > 0.001 || d < -0.001 {
				t.Errorf("capacity %d: epoch %d hit rate %v, want %v", tc.capacity, e, got[e], tc.want)
			}
		}
	}
}
