package readahead

import (
	"sort"
	"time"
)

// StallBuckets are the upper bounds, in seconds, of the buckets a job's
// stalls are counted in (JobStats.StallHistogram): from a read that found
// its file fetching and waited a millisecond to one that waited for a
// stalled store's retries.
var StallBuckets = [...]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// StallHistogram counts a job's stalls (first reads of a file that was not
// cached yet) by how long the read took: Counts[i] those that took at most
// StallBuckets[i] and more than the bound before it; the last, those that
// took longer than every bound. Not cumulative. Their sum is
// JobStats.StallSeconds. The daemon exports it as a Prometheus histogram;
// a job's figures are taken under the registry's lock with its others, so
// a plain array does, and no library is needed for 15 counters.
type StallHistogram struct {
	Counts [len(StallBuckets) + 1]uint64
}

// observe counts one stall of d.
func (h *StallHistogram) observe(d time.Duration) {
	i := sort.SearchFloat64s(StallBuckets[:], d.Seconds())
	h.Counts[i]++
}

// Count is the number of stalls counted.
func (h *StallHistogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}
