package test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/test/testenv"
)

// TestStatsWatch runs `dsmount stats --watch --interval 300ms` (stdout not a
// terminal) on a mount that files are being read from, interrupts it with
// SIGINT after a few intervals, and wants exit 0 and one line of rates per
// interval: reads/s and MB/s over the interval, its hit rate, and the
// daemon's fetch rate and cache fill; some line with reads. Then one
// --json --watch report per interval, and an --interval refused.
func TestStatsWatch(t *testing.T) {
	src := t.TempDir()
	const files = 400
	data := make([]byte, 64<<10)
	for i := range files {
		data[0] = byte(i)
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%03d", i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mp := t.TempDir()
	d := testenv.StartMount(t, testenv.MountConfig{Bin: dsmountBin, Source: src, Mountpoint: mp, Args: []string{"--cache-dir", t.TempDir()}})

	// Each file read once: every first read reaches the daemon (later
	// ones are the kernel's page cache's).
	var next atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for range 4 {
				i := next.Add(1) - 1
				if i >= files {
					return
				}
				if _, err := os.ReadFile(filepath.Join(mp, fmt.Sprintf("f%03d", i))); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	var stopOnce sync.Once
	stopReading := func() { stopOnce.Do(func() { close(stop); <-done }) }
	defer stopReading()

	p, err := testenv.StartCLI(dsmountBin, testenv.CLIOptions{}, "stats", "--watch", "--interval", "300ms", mp)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait(time.Second)
	if err := testenv.WaitFor(30*time.Second, 50*time.Millisecond, "4 lines of stats --watch", func() (bool, error) {
		if p.Exited() {
			r := p.Wait(0)
			return false, fmt.Errorf("stats --watch exited %d\nstdout: %s\nstderr: %s", r.ExitCode, r.Stdout, r.Stderr)
		}
		return strings.Count(p.Stdout(), "\n") >= 4, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r := p.Wait(10 * time.Second)
	stopReading()
	t.Logf("stats --watch: exit %d\n%s", r.ExitCode, r.Stdout)
	if r.ExitCode != 0 || r.Stderr != "" {
		t.Errorf("stats --watch after SIGINT: exit %d, stderr %q; want exit 0 and nothing on stderr", r.ExitCode, r.Stderr)
	}
	re := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ` + regexp.QuoteMeta(mp) +
		`: (\d+|-) reads/s, ([0-9.]+|-) MB/s read, hit rate ([0-9.]+%|-); daemon: ([0-9.]+|-) MB/s fetched, \d+ fetches in flight, cache [0-9.]+ [KMGT]?i?B/[0-9.]+ [KMGT]?i?B$`)
	lines := strings.Split(strings.TrimRight(r.Stdout, "\n"), "\n")
	busy := 0
	for _, line := range lines {
		m := re.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("line %q does not match %s", line, re)
			continue
		}
		if n, err := strconv.Atoi(m[1]); err == nil && n > 0 {
			busy++
			if m[2] == "-" || m[3] == "-" {
				t.Errorf("line %q: reads but no MB/s or hit rate", line)
			}
		}
	}
	if len(lines) < 4 || busy == 0 {
		t.Errorf("%d lines, %d with reads; want 4 or more, some with reads (the files are being read)", len(lines), busy)
	}

	// --json: one report per line, the first at once.
	p, err = testenv.StartCLI(dsmountBin, testenv.CLIOptions{}, "stats", "--watch", "--json", "--interval", "200ms", mp)
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.WaitFor(30*time.Second, 50*time.Millisecond, "2 reports of stats --watch --json", func() (bool, error) {
		return strings.Count(p.Stdout(), "\n") >= 2 || p.Exited(), nil
	}); err != nil {
		t.Fatal(err)
	}
	p.Signal(syscall.SIGTERM)
	r = p.Wait(10 * time.Second)
	if r.ExitCode != 0 {
		t.Errorf("stats --watch --json after SIGTERM: exit %d, stderr %q", r.ExitCode, r.Stderr)
	}
	for _, line := range strings.Split(strings.TrimRight(r.Stdout, "\n"), "\n") {
		var s control.StatsReport
		if err := testenv.DecodeJSONObject(line, &s); err != nil || s.Mount.Mountpoint != mp {
			t.Errorf("stats --watch --json line %q: %v (mount %q)", line, err, s.Mount.Mountpoint)
		}
	}

	if r := testenv.RunCLI(dsmountBin, nil, 30*time.Second, "stats", "--watch", "--interval", "0s", mp); r.ExitCode != 1 || !strings.Contains(r.Stderr, "--interval") {
		t.Errorf("stats --watch --interval 0s: exit %d, stderr %q; want a usage error (exit 1) naming --interval", r.ExitCode, r.Stderr)
	}
	d.NoErrorLogs()
	d.Stop()
}
