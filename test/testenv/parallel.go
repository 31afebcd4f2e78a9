package testenv

import (
	"sync"
	"sync/atomic"
)

// Parallel calls work(i) for every i in [0, n) from workers goroutines,
// each taking the next i in turn, as a loader's workers take the next
// sample: the pool every parallel reader and GET loop of the tests and
// benchmarks shares. newWorker is called once per goroutine, before any
// starts, for that goroutine's work function: what it closes over (a
// buffer, a tally) is the goroutine's own. After the first error no more
// i are handed out; the calls in flight finish and Parallel returns that
// error.
func Parallel(n, workers int, newWorker func() func(i int) error) error {
	if workers < 1 {
		workers = 1
	}
	var (
		next     atomic.Int64
		stop     atomic.Bool
		once     sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	for range workers {
		work := newWorker()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := work(int(i)); err != nil {
					once.Do(func() { firstErr = err })
					stop.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}
