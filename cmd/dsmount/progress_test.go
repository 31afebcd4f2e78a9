package main

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsmount/dsmount/internal/control"
)

// TestProgressLine: the line a warm prints without a terminal says what
// is done of how much, the fetch rate, the time elapsed and left, and
// when the daemon has been quiet; before the first report, that it waits.
func TestProgressLine(t *testing.T) {
	p := &control.WarmProgress{Files: 10000, FilesDone: 1234, Bytes: 10 << 30, BytesDone: 2 << 30, BytesFetched: 1e9, Seconds: 20}
	for _, c := range []struct {
		p              *control.WarmProgress
		since, elapsed time.Duration
		want           string
	}{
		{nil, 0, 12 * time.Second, "dsmount: warm /mnt/d: waiting for the daemon's first progress report, 12s elapsed"},
		{p, time.Second, 21 * time.Second, "dsmount: warm /mnt/d: 1234/10000 files, 2.0 GiB/10.0 GiB (20.0%), 50 MB/s, 21s elapsed, about 1m20s left"},
		{p, 40 * time.Second, time.Minute, "dsmount: warm /mnt/d: 1234/10000 files, 2.0 GiB/10.0 GiB (20.0%), 50 MB/s, 1m0s elapsed, about 1m20s left (no report from the daemon for 40s)"},
		// The daemon's figures may not add up: bytes done past the
		// total, nothing known yet.
		{&control.WarmProgress{Files: 1, FilesDone: 1, Bytes: 10, BytesDone: 25, Seconds: 1}, 0, time.Second, "dsmount: warm /mnt/d: 1/1 files, 25 B/10 B (100.0%), 0 MB/s, 1s elapsed, finishing"},
		{&control.WarmProgress{Files: 3, Bytes: 100}, 0, 0, "dsmount: warm /mnt/d: 0/3 files, 0 B/100 B (0.0%), 0 MB/s, 0s elapsed, time left unknown"},
	} {
		if got := progressLine("/mnt/d", c.p, c.since, c.elapsed); got != c.want {
			t.Errorf("progressLine(%+v, %v, %v)\n got %q\nwant %q", c.p, c.since, c.elapsed, got, c.want)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestProgressLines: without a terminal, a line every interval, the first
// saying it waits for a report until one comes, the next ones the latest
// report; none after stop.
func TestProgressLines(t *testing.T) {
	var out lockedBuffer
	const every = 30 * time.Millisecond
	l := startProgressLines(&out, "/mnt/d", every)
	time.Sleep(every + every/2)
	l.update(control.WarmProgress{Files: 4, FilesDone: 1, Bytes: 400, BytesDone: 100, BytesFetched: 100, Seconds: 1})
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(out.String(), "\n") < 3 && time.Now().Before(deadline) {
		time.Sleep(every / 3)
	}
	l.stop()
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) < 3 {
		t.Fatalf("%d lines in 10 s of a %v interval: %q", len(lines), every, out.String())
	}
	if !strings.Contains(lines[0], "waiting for the daemon's first progress report") {
		t.Errorf("first line %q; want it to say it waits for a report", lines[0])
	}
	re := regexp.MustCompile(`^dsmount: warm /mnt/d: 1/4 files, 100 B/400 B \(25\.0%\), 0 MB/s, \d+s elapsed, about \d+s left$`)
	if last := lines[len(lines)-1]; !re.MatchString(last) {
		t.Errorf("last line %q; want it to match %s", last, re)
	}
	n := len(out.String())
	time.Sleep(3 * every)
	if len(out.String()) != n {
		t.Errorf("lines printed after stop: %q", out.String()[n:])
	}
	var nilLines *progressLines
	nilLines.update(control.WarmProgress{})
	nilLines.stop()
}
