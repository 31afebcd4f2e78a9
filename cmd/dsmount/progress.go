package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/internal/units"
)

// progressLines prints a warm's progress as a line every interval, for
// logs (stderr not a terminal: a Kubernetes init container, CI), so that a
// warm of hours is never silent: what is done, the fetch rate, the time
// left, and, when the daemon's reports stop coming, for how long.
type progressLines struct {
	out   io.Writer
	root  string
	start time.Time

	mu   sync.Mutex
	last *control.WarmProgress // nil until the first report
	at   time.Time             // when last came

	quit chan struct{}
	done chan struct{}
}

// startProgressLines prints to out every interval until stop.
func startProgressLines(out io.Writer, root string, every time.Duration) *progressLines {
	l := &progressLines{out: out, root: root, start: time.Now(), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-l.quit:
				return
			case now := <-t.C:
				l.mu.Lock()
				line := progressLine(l.root, l.last, now.Sub(l.at), now.Sub(l.start))
				l.mu.Unlock()
				fmt.Fprintln(l.out, line)
			}
		}
	}()
	return l
}

// update takes the daemon's latest report. A nil l does nothing.
func (l *progressLines) update(p control.WarmProgress) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.last, l.at = &p, time.Now()
	l.mu.Unlock()
}

// stop ends the lines; none is printed after it returns. A nil l does
// nothing.
func (l *progressLines) stop() {
	if l == nil {
		return
	}
	close(l.quit)
	<-l.done
}

// quietAfter is how long without a report from the daemon (which sends one
// every 250 ms) a progress line points out.
const quietAfter = 5 * time.Second

// progressLine is one line of a warm's progress through the mount at root:
// p the daemon's latest report (nil: none yet), which came since ago,
// elapsed since the warm began.
//
//	dsmount: warm /mnt/data: 1234/10000 files, 1.2 GiB/9.8 GiB (12.3%), 87 MB/s, 40s elapsed, about 4m45s left
func progressLine(root string, p *control.WarmProgress, since, elapsed time.Duration) string {
	elapsed = elapsed.Round(time.Second)
	if p == nil {
		return fmt.Sprintf("dsmount: warm %s: waiting for the daemon's first progress report, %v elapsed", root, elapsed)
	}
	frac, rate := warmDone(*p), warmRate(*p)
	left := "time left unknown"
	if frac >= 1 {
		left = "finishing"
	} else if frac > 0 && p.Seconds > 0 {
		left = fmt.Sprintf("about %v left", time.Duration(min(p.Seconds*(1-frac)/frac, 1e8)*float64(time.Second)).Round(time.Second))
	}
	line := fmt.Sprintf("dsmount: warm %s: %d/%d files, %s/%s (%.1f%%), %.0f MB/s, %v elapsed, %s",
		root, p.FilesDone, p.Files, units.Bytes(max(p.BytesDone, 0)), units.Bytes(max(p.Bytes, 0)), 100*frac, rate, elapsed, left)
	if since >= quietAfter {
		line += fmt.Sprintf(" (no report from the daemon for %v)", since.Round(time.Second))
	}
	return line
}

// warmDone is the fraction of a warm's bytes done, in [0, 1] whatever the
// daemon's figures say (bytes done past the total once panicked the bar);
// a warm of empty files is done when its files are.
func warmDone(p control.WarmProgress) float64 {
	switch {
	case p.Bytes > 0:
		return min(max(float64(p.BytesDone)/float64(p.Bytes), 0), 1)
	case p.Files > 0 && p.FilesDone >= int64(p.Files):
		return 1
	}
	return 0
}

// warmRate is a warm's fetch rate so far, in MB/s (0 before any time has
// passed).
func warmRate(p control.WarmProgress) float64 {
	if p.Seconds <= 0 {
		return 0
	}
	return max(float64(p.BytesFetched), 0) / 1e6 / p.Seconds
}
