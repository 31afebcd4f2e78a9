package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/internal/units"
)

// watchStats shows the stats of the mount at root every interval until
// ctx ends or the command is interrupted (SIGINT, SIGTERM), which ends it
// with no error: a watch has no other way to end. On a terminal (tty) it
// redraws the tables under a line of rates; otherwise it prints one line
// of rates per interval (the first after one interval: rates need two
// reports); with asJSON, each report as one JSON line. A report it can't
// get (the mount gone) ends it with that error.
func watchStats(ctx context.Context, out io.Writer, root string, every time.Duration, asJSON, tty bool) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	var prev *watchSample
	for {
		raw, r, err := fetchStats(ctx, root)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		cur := watchSample{at: time.Now(), r: r}
		switch {
		case asJSON:
			fmt.Fprintln(out, string(raw))
		case tty:
			// Home, clear the screen, draw.
			fmt.Fprint(out, "\033[H\033[2J")
			fmt.Fprintf(out, "dsmount stats %s, every %v (Ctrl-C to stop)\n%s\n\n", root, every, watchRates(prev, cur))
			printStats(out, r)
		case prev != nil:
			fmt.Fprintf(out, "%s %s\n", cur.at.UTC().Format(time.RFC3339), watchRates(prev, cur))
		}
		prev = &cur
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// watchSample is one report of a watch, and when it came.
type watchSample struct {
	at time.Time
	r  control.StatsReport
}

// watchRates is a line of the rates between two reports of the mount
// asked through (prev nil: the first, no rates yet) and the daemon's
// figures as of cur:
//
//	/mnt/data: 1520 reads/s, 185.3 MB/s read, hit rate 97.8%; daemon: 4.1 MB/s fetched, 3 fetches in flight, cache 41.2 GiB/100.0 GiB
//
// A daemon that restarted in between (another pid, counts going back)
// gives no rates for that interval.
func watchRates(prev *watchSample, cur watchSample) string {
	m, c := cur.r.Mount, cur.r.Cache
	reads, read, hit, fetched := "-", "-", "-", "-"
	if prev != nil {
		pm, pc := prev.r.Mount, prev.r.Cache
		dt := cur.at.Sub(prev.at).Seconds()
		dReads, dBytes, dHits, dMisses, dFetched := m.Reads-pm.Reads, m.BytesRead-pm.BytesRead, m.Hits-pm.Hits, m.Misses-pm.Misses, c.BytesFetched-pc.BytesFetched
		if dt > 0 && cur.r.DaemonPid == prev.r.DaemonPid && min(dReads, dBytes, dHits, dMisses, dFetched) >= 0 {
			reads = fmt.Sprintf("%.0f", float64(dReads)/dt)
			read = fmt.Sprintf("%.1f", float64(dBytes)/1e6/dt)
			hit = hitRate(dHits, dMisses)
			fetched = fmt.Sprintf("%.1f", float64(dFetched)/1e6/dt)
		}
	}
	return fmt.Sprintf("%s: %s reads/s, %s MB/s read, hit rate %s; daemon: %s MB/s fetched, %d fetches in flight, cache %s/%s",
		m.Mountpoint, reads, read, hit, fetched, c.FetchesInFlight, units.Bytes(c.Used), units.Bytes(c.Capacity))
}
