package warm

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// timeline samples how many bytes a process has written (wchar in
// /proc/PID/io) until stopped. Sampling the proxy shows the bytes it has
// passed on, so a pass's ramp and tail show apart from its steady rate.
type timeline struct {
	start   time.Time
	stop    chan struct{}
	wg      sync.WaitGroup
	samples []sample // written by the sampler until wg is done
}

type sample struct {
	at    time.Duration
	bytes int64
}

func wchar(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

func startTimeline(pid int, every time.Duration) *timeline {
	tl := &timeline{start: time.Now(), stop: make(chan struct{})}
	base := wchar(pid)
	tl.wg.Add(1)
	go func() {
		defer tl.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tl.stop:
				tl.samples = append(tl.samples, sample{time.Since(tl.start), wchar(pid) - base})
				return
			case <-tick.C:
				tl.samples = append(tl.samples, sample{time.Since(tl.start), wchar(pid) - base})
			}
		}
	}()
	return tl
}

// deciles stops the sampling and says when each tenth of total bytes had
// passed.
func (tl *timeline) deciles(total int64) string {
	close(tl.stop)
	tl.wg.Wait()
	var b strings.Builder
	next := int64(1)
	for _, s := range tl.samples {
		for next <= 10 && s.bytes >= total*next/10 {
			fmt.Fprintf(&b, " %d%%@%.2f", 10*next, s.at.Seconds())
			next++
		}
	}
	return b.String()
}
