package s3

import (
	"sync"
	"time"
)

// A GET's timeouts judge the store: no answer in time means a slow store
// or a dead connection, and another GET is sent. But a process that is
// not running (stopped, held back by a CPU quota, its threads waiting for
// a core while the node's loaders take them all) reads nothing either:
// when it runs again, every timer that fell due meanwhile fires before
// the answers waiting in its sockets are read, and every GET in flight
// would be abandoned at once, its read's timeout doubled, its urgent
// reads hedged, and the answers that did get read would be measured as
// slow, raising every later timeout with them. So the tail's waits are
// measured in time this process ran (runClock), not in time that passed.

const (
	// beatEvery is how often the run clock beats while a wait is timed;
	// a beat later than beatEvery+beatSlack counts the lateness as time
	// the process did not run. The slack absorbs a busy scheduler's
	// ordinary delays; the sum stays well under the shortest timeout
	// (minTimeout), so a stop that long is seen.
	beatEvery = 20 * time.Millisecond
	beatSlack = 20 * time.Millisecond
	// A wait that lost time goes on for at least the time lost, up to
	// resumeGrace, for the answers that arrived meanwhile to be read:
	// they are read all at once, among everything else that fell due,
	// and a shorter grace saw hedges sent for answers that were in.
	resumeGrace = minTimeout
)

// runTimer is the part of *time.Timer the run clock uses.
type runTimer interface {
	Reset(d time.Duration) bool
	Stop() bool
}

// runClock tells how long this process ran since a mark: the time that
// passed less what was lost, the lateness of its beats. It beats only
// while a wait is timed (begin to end), so an idle process costs nothing.
// Safe for concurrent use.
type runClock struct {
	now       func() time.Time
	afterFunc func(d time.Duration, f func()) runTimer

	mu      sync.Mutex
	waits   int       // timed waits in progress
	beating bool      // a beat is scheduled
	last    time.Time // the last beat, while beating
	lost    time.Duration
	timer   runTimer
	closed  bool
}

// runMark is an instant on the run clock.
type runMark struct {
	at   time.Time
	lost time.Duration // lost by then, the gap then open included
}

func newRunClock() *runClock {
	return &runClock{
		now:       time.Now,
		afterFunc: func(d time.Duration, f func()) runTimer { return time.AfterFunc(d, f) },
	}
}

// begin starts a timed wait and marks its start; end must follow.
func (c *runClock) begin() runMark {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.waits++
	if !c.beating && !c.closed {
		// Idle until now: not time lost, nobody was waiting.
		c.beating, c.last = true, now
		if c.timer == nil {
			c.timer = c.afterFunc(beatEvery, c.beat)
		} else {
			c.timer.Reset(beatEvery)
		}
	}
	return runMark{at: now, lost: c.lostLocked(now)}
}

// end ends a wait begun with begin.
func (c *runClock) end() {
	c.mu.Lock()
	c.waits--
	c.mu.Unlock()
}

// mark is now, for a wait already begun.
func (c *runClock) mark() runMark {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	return runMark{at: now, lost: c.lostLocked(now)}
}

// ran is how long the process ran since m, within a wait begun no later.
func (c *runClock) ran(m runMark) time.Duration {
	ran, _ := c.since(m)
	return ran
}

// since is how long the process ran since m, and how long it did not.
func (c *runClock) since(m runMark) (ran, lost time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	passed := now.Sub(m.at)
	// A gap open at m counted in full once closed can make the
	// difference a little more than the time that passed.
	lost = min(c.lostLocked(now)-m.lost, passed)
	return passed - lost, lost
}

// left is how much longer a wait for d of run time, begun at m, goes on
// now that its timer has fired: 0 if it is over, else what is left of
// it, and at least the time lost (up to resumeGrace), for the timer fired
// among everything else that fell due while the process did not run.
func (c *runClock) left(m runMark, d time.Duration) time.Duration {
	ran, lost := c.since(m)
	if ran >= d {
		return 0
	}
	return max(d-ran, min(lost, resumeGrace))
}

// lostLocked is the time lost by now: the closed gaps, and the gap since
// the last beat when that beat is late (the process is running again,
// and the beat has yet to).
func (c *runClock) lostLocked(now time.Time) time.Duration {
	if !c.beating {
		return c.lost
	}
	return c.lost + lostIn(now.Sub(c.last))
}

// lostIn is the time lost in a gap of d between beats.
func lostIn(d time.Duration) time.Duration {
	if d -= beatEvery; d > beatSlack {
		return d
	}
	return 0
}

func (c *runClock) beat() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.beating {
		return
	}
	now := c.now()
	c.lost += lostIn(now.Sub(c.last))
	c.last = now
	if c.waits == 0 || c.closed {
		c.beating = false
		return
	}
	c.timer.Reset(beatEvery)
}

// close stops the beats for good.
func (c *runClock) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.beating {
		c.lost += lostIn(c.now().Sub(c.last))
		c.beating = false
	}
}
