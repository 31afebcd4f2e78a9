package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/internal/daemon"
	"github.com/dsmount/dsmount/internal/units"
)

func newStatsCmd() *cobra.Command {
	var asJSON, watch bool
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "stats MOUNTPOINT",
		Short: "Show hit rate, traffic and cache fill of a mount and its daemon",
		Long: `Show a mount's reads, hit rate and traffic, its declared jobs, and its daemon's
cache fill and fetches.

With --watch, stats asks again every --interval and shows the rates over
it (reads/s, MB/s read, the hit rate of the interval's reads, MB/s fetched)
until interrupted: on a terminal it redraws the tables under a line of
rates; otherwise (a log) it prints one line of rates per interval. Ctrl-C
(or SIGTERM) ends a watch with exit 0: it is the way a watch ends.
With --json --watch, each interval prints the report as one JSON line.`,
		Example: `  dsmount stats /mnt/imagenet
  dsmount stats --watch --interval 5s /mnt/imagenet`,
		Args: exactArgs(1, "MOUNTPOINT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if every <= 0 {
				return flagErrorf("interval", "%v is not a positive duration", every)
			}
			abs, err := filepath.Abs(args[0])
			if err != nil {
				return usagef("%s: %w", args[0], err)
			}
			root, _, err := control.Roots{}.Find(abs)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if watch {
				return watchStats(cmd.Context(), out, root, every, asJSON, term.IsTerminal(int(os.Stdout.Fd())))
			}
			raw, r, err := fetchStats(cmd.Context(), root)
			if err != nil {
				return err
			}
			if asJSON {
				fmt.Fprintln(out, string(raw))
				return nil
			}
			printStats(out, r)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "show the figures again every --interval, with rates, until interrupted (exit 0)")
	cmd.Flags().DurationVar(&every, "interval", 2*time.Second, "with --watch, how often to ask")
	return cmd
}

// fetchStats asks the mount at root for the stats report: as the daemon
// sent it, and read.
func fetchStats(ctx context.Context, root string) (json.RawMessage, control.StatsReport, error) {
	var raw json.RawMessage
	var r control.StatsReport
	err := control.Call(ctx, root, control.Request{Op: "stats"}, func(ev control.Event) error {
		if ev.Type == "result" {
			raw = ev.Stats
		}
		return nil
	})
	if err != nil {
		return nil, r, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, r, fmt.Errorf("malformed stats from %s: %w", root, err)
	}
	return raw, r, nil
}

func hitRate(hits, misses int64) string {
	if hits+misses == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(hits)/float64(hits+misses))
}

// printStats writes the report as tables for a person.
func printStats(out io.Writer, r control.StatsReport) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "MOUNT\tSOURCE\tFAST PATH\tFILES\tREADS\tREAD\tHIT RATE\tFROM CACHE\tFROM BACKEND\tERRORS\n")
	for _, m := range r.Mounts {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%d\n", m.Mountpoint, m.Source, m.FastPath, m.Files, m.Reads, units.Bytes(m.BytesRead),
			hitRate(m.Hits, m.Misses), units.Bytes(m.BytesFromCache), units.Bytes(m.BytesFromBackend), m.ReadErrors)
	}
	w.Flush()
	var jobs int
	for _, m := range r.Mounts {
		jobs += len(m.Jobs)
	}
	if jobs > 0 {
		fmt.Fprintln(out)
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintf(w, "JOB\tUID\tMOUNT\tEPOCH\tAT\tHIT RATE\tSTALLED\tWINDOW\tREADS/S\tPREFETCHED\tPREFETCH HITS\tEVICTED UNREAD\tPAGE-CACHED UNREAD\tREFUSED\tEVICTED NEEDED\tIDLE\n")
		for _, m := range r.Mounts {
			for _, j := range m.Jobs {
				// AT is where the daemon believes the job is: its
				// frontier in this epoch's order.
				fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%d/%d\t%.1f%%\t%.1fs\t%d\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d\t%.0fs\n", j.Name, j.UID, m.Mountpoint, j.Epoch,
					j.Frontier, j.Declared, 100*j.HitRate, j.StallSeconds, j.Window, j.ReadRate, j.Prefetched, j.PrefetchHits, j.PrefetchEvicted, j.PrefetchUnseen, j.AdmissionsRefused, j.EvictedInWindow, j.IdleSeconds)
			}
		}
		w.Flush()
		if pc := r.PageCache; pc.Samples > 0 && r.Cache.Policy == daemon.PolicyOrder {
			fmt.Fprintf(out, "page cache: holds a file read this epoch %s, one read before %s; reads within that are left to it\n",
				horizonText(pc.Same), horizonText(pc.Earlier))
			if pc.FillAndHold {
				fmt.Fprintf(out, "  it serves every repeated read within an epoch, so the cache keeps what it holds (fill-and-hold)\n")
			}
		}
	}
	printBackendStats(out, r.Mounts)
	c := r.Cache
	fmt.Fprintf(out, "\ncache %s (daemon pid %d, policy %s, chunk %s)\n", c.Dir, r.DaemonPid, c.Policy, units.Bytes(c.ChunkSize))
	fill := "-"
	if c.Capacity > 0 {
		fill = fmt.Sprintf("%.1f%%", 100*float64(c.Used)/float64(c.Capacity))
	}
	fmt.Fprintf(out, "  hit rate %s   used %s of %s (%s)   fetched %s in %d chunks   in flight %d\n",
		hitRate(c.Hits, c.Misses), units.Bytes(c.Used), units.Bytes(c.Capacity), fill, units.Bytes(c.BytesFetched), c.ChunksFetched, c.FetchesInFlight)
	fmt.Fprintf(out, "  warmed chunks %d   evictions %d   not kept %d   checksum failures %d   failed syncs %d   ahead, pushed out unread %d\n", c.WarmChunks, c.Evictions, c.Streamed, c.VerifyFailures, c.SyncFailures, c.StagedPushedOut)
	if c.DiskFull {
		fmt.Fprintf(out, "  the cache filesystem is full: reads are served without caching until it has room again\n")
	}
}

func horizonText(h control.Horizon) string {
	switch {
	case h.Unbounded:
		return "for as long as seen"
	case h.Seconds == 0:
		return "(not known yet)"
	}
	return fmt.Sprintf("for about %.1fs", h.Seconds)
}

// printBackendStats shows the requests of the mounts whose backends count
// them: what the store's tail cost.
func printBackendStats(out io.Writer, mounts []control.MountStats) {
	var counted bool
	for _, m := range mounts {
		counted = counted || m.Backend.Gets > 0
	}
	if !counted {
		return
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "MOUNT\tGETS\tHEDGED\tHEDGES WON\tNO ANSWER\tBODY STALLED\tRETRIES\tTHROTTLED\tANSWER P99\tTIMEOUT\tHEDGE AFTER\n")
	for _, m := range mounts {
		if b := m.Backend; b.Gets > 0 {
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.0fms\t%.0fms\t%.0fms\n", m.Mountpoint, b.Gets, b.Hedges, b.HedgesWon,
				b.FirstByteTimeouts, b.BodyTimeouts, b.Retries, b.Throttled, b.FirstByteP99Millis, b.TimeoutMillis, b.HedgeMillis)
		}
	}
	w.Flush()
}
