package s3

import (
	"strings"
	"testing"
	"time"
)

// manualClock drives a runClock by hand: now is what the test says, and a
// beat runs when the test calls fire.
type manualClock struct {
	t       time.Time
	f       func()
	armed   bool
	created int
}

func (m *manualClock) Reset(time.Duration) bool { was := m.armed; m.armed = true; return was }
func (m *manualClock) Stop() bool               { was := m.armed; m.armed = false; return was }

// fire runs the beat if one is due, as the timer would.
func (m *manualClock) fire() {
	if m.armed {
		m.armed = false
		m.f()
	}
}

func newManualRunClock() (*runClock, *manualClock) {
	m := &manualClock{t: time.Unix(1000, 0)}
	c := &runClock{
		now: func() time.Time { return m.t },
		afterFunc: func(_ time.Duration, f func()) runTimer {
			m.f, m.armed = f, true
			m.created++
			return m
		},
	}
	return c, m
}

// advance moves the clock by d in beats, as a process that runs.
func (m *manualClock) advance(d time.Duration) {
	for end := m.t.Add(d); m.t.Before(end); {
		m.t = m.t.Add(min(beatEvery, end.Sub(m.t)))
		m.fire()
	}
}

func TestRunClock(t *testing.T) {
	c, m := newManualRunClock()
	start := c.begin()
	if !m.armed {
		t.Fatal("a timed wait began and no beat is scheduled")
	}
	m.advance(300 * time.Millisecond)
	if got := c.ran(start); got != 300*time.Millisecond {
		t.Errorf("ran %v of 300ms beating on time", got)
	}

	// Stopped: the time passes, no beat runs. Asked before the late beat
	// has run (the process has just woken), and after.
	m.t = m.t.Add(5 * time.Second)
	before := c.ran(start)
	m.fire()
	after := c.ran(start)
	// The beat due during the stop was late by the stop less one beat
	// interval: that much is lost.
	want := 300*time.Millisecond + beatEvery
	if before != want || after != want {
		t.Errorf("after a 5s stop: ran %v before the late beat ran, %v after; want %v", before, after, want)
	}
	// Of waits begun before the stop, one of a second has the rest of it
	// left; one nearly over when stopped has the grace, for its answer
	// to be read; one over before the stop is over.
	if got, want := c.left(start, time.Second), time.Second-want; got != want {
		t.Errorf("a wait of 1s after the stop: left %v, want %v", got, want)
	}
	if got := c.left(start, want+time.Millisecond); got != resumeGrace {
		t.Errorf("a wait of %v after the stop: left %v, want the grace, %v", want+time.Millisecond, got, resumeGrace)
	}
	if got := c.left(start, want/2); got != 0 {
		t.Errorf("a wait of %v after the stop: left %v, want it over", want/2, got)
	}
	mid := c.mark()
	m.advance(100 * time.Millisecond)
	if got := c.ran(mid); got != 100*time.Millisecond {
		t.Errorf("ran %v since a mark taken after the stop; want 100ms", got)
	}
	if got := c.left(mid, 100*time.Millisecond); got != 0 {
		t.Errorf("a wait of 100ms after 100ms run: left %v, want 0", got)
	}

	// Beats late within the slack are a busy scheduler, not starvation.
	from := c.mark()
	for range 10 {
		m.t = m.t.Add(beatEvery + beatSlack)
		m.fire()
	}
	if got, want := c.ran(from), 10*(beatEvery+beatSlack); got != want {
		t.Errorf("beats late by the slack: ran %v, want %v", got, want)
	}
	// A beat late by a little more than the slack loses that little, and
	// a timer that fired then waits that little more, not the grace.
	hiccup := c.mark()
	m.t = m.t.Add(100 * time.Millisecond)
	if got, want := c.left(hiccup, 100*time.Millisecond), lostIn(100*time.Millisecond); got != want || want == 0 || want >= resumeGrace {
		t.Errorf("a timer of 100ms fired after a hiccup: left %v, want the time lost, %v", got, want)
	}
	m.fire()

	// No wait timed: the beats stop, and the idle time is not lost.
	c.end()
	m.advance(beatEvery)
	if m.armed {
		t.Fatal("beats go on with no wait timed")
	}
	m.t = m.t.Add(time.Minute)
	again := c.begin()
	if !m.armed || m.created != 1 {
		t.Fatalf("a new wait: beat armed %v, %d timers made; want the one timer armed again", m.armed, m.created)
	}
	m.advance(200 * time.Millisecond)
	if got := c.ran(again); got != 200*time.Millisecond {
		t.Errorf("ran %v since a wait begun after an idle minute; want 200ms", got)
	}
	c.end()

	c.close()
	if m.armed {
		t.Error("beats scheduled after close")
	}
}

// A body watch whose timer falls due while the process was stopped waits
// on for what is left of its time; one that falls due in time the process
// ran ends the request.
func TestWatchBodyStarved(t *testing.T) {
	for _, tc := range []struct {
		name   string
		timer  func(w *watchedBody) **time.Timer
		left   func(w *watchedBody) func() time.Duration
		stall  string
		wait   time.Duration
		stream bool // bytes keep coming: only the deadline can pass
	}{
		{"idle", func(w *watchedBody) **time.Timer { return &w.idleT }, func(w *watchedBody) func() time.Duration { return w.idleLeft }, "no body bytes", time.Hour, false},
		{"deadline", func(w *watchedBody) **time.Timer { return &w.totalT }, func(w *watchedBody) func() time.Duration { return w.totalLeft }, "body not all in", time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, m := newManualRunClock()
			cancelled := false
			// The real timers are an hour long: the test calls expire
			// as they would, on the manual clock.
			w := watchBody(strings.NewReader(strings.Repeat("x", 1<<20)), c, tc.wait, tc.wait, func() { cancelled = true })
			defer w.stop()
			expire := func() { w.expire(tc.timer(w), tc.left(w), tc.stall, tc.wait, func() { cancelled = true }) }

			// Stopped for the whole wait and more, then woken by the
			// timer before any beat.
			m.t = m.t.Add(tc.wait + time.Minute)
			expire()
			if cancelled || w.stalled.Load() != nil {
				t.Fatalf("the %s timer ended the request after a stop", tc.name)
			}
			// Running for all of the wait, bytes coming or not.
			for end := m.t.Add(tc.wait); m.t.Before(end); {
				m.advance(time.Minute)
				if tc.stream {
					w.Read(make([]byte, 1))
				}
			}
			expire()
			if st := w.stalled.Load(); !cancelled || st == nil || st.what != tc.stall {
				t.Fatalf("after %v run: cancelled %v, stall %v; want %q", tc.wait, cancelled, st, tc.stall)
			}
		})
	}
}
