package readahead

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestAnonymousJobsReadFilesInPieces: four jobs declared with no training
// process read their orders at once, each file in two requests (the
// kernel splits reads): the second request of a file is the same job's
// read, not a read of another job that needs the file elsewhere in its
// order. Every job ends each epoch with its frontier at the end and its
// lag near the readers' real spread.
func TestAnonymousJobsReadFilesInPieces(t *testing.T) {
	const n, jobs = 10000, 4
	reg, m, items := newTestMount(t, n)
	rng := rand.New(rand.NewPCG(1, 2))
	read := func(it Item) {
		m.Observe(m.objs[it.Ref], it.ID, 0, 0)
		m.Observe(m.objs[it.Ref], it.ID, 0, 0) // the file's second piece
	}
	for epoch := range 3 {
		orders := make([][]Item, jobs)
		for j := range orders {
			orders[j] = make([]Item, n)
			for i, k := range rng.Perm(n) {
				orders[j][i] = items[k]
			}
			if _, err := m.Declare(Declaration{Job: fmt.Sprint("job", j), Epoch: epoch, Current: orders[j], Owner: 0, Override: true}); err != nil {
				t.Fatal(err)
			}
		}
		pos := make([]int, jobs)
		for done := 0; done < jobs; {
			done = 0
			for j := range jobs {
				if pos[j] >= n {
					done++
					continue
				}
				// a burst of 1-8 reads, slightly out of order
				b := 1 + rng.IntN(8)
				for k := 0; k < b && pos[j] < n; k++ {
					p := pos[j]
					if p+1 < n && rng.IntN(4) == 0 {
						p++
						read(orders[j][p])
						read(orders[j][p-1])
						pos[j] += 2
						continue
					}
					read(orders[j][p])
					pos[j]++
				}
			}
		}
		reg.mu.RLock()
		for _, j := range reg.allJobs() {
			// A few reads are ambiguous (another job read the same file
			// moments before, near its own head): counted for that job,
			// they leave their position to the lag.
			if j.frontier < n-j.lag() || j.totalReads < int64(n*(epoch+1))*995/1000 || j.lag() > 4*minLag {
				t.Errorf("epoch %d %s: frontier %d, %d reads counted, lag %d; want %d less the lag, %d (99.5%%), at most %d",
					epoch, j.name, j.frontier, j.totalReads, j.lag(), n, n*(epoch+1), 4*minLag)
			}
		}
		reg.mu.RUnlock()
	}
}
