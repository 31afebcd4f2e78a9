package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/internal/units"
)

type warmFlags struct {
	fromFile string
	parallel int
	check    bool
	json     bool
	// progressEvery is how often a progress line is printed where stderr
	// is not a terminal (0: never).
	progressEvery time.Duration
}

// defaultProgressEvery is --progress-interval's default.
const defaultProgressEvery = 10 * time.Second

func newWarmCmd() *cobra.Command {
	var f warmFlags
	cmd := &cobra.Command{
		Use:   "warm PATH...",
		Short: "Fill the cache with files or directories of a dsmount mount before training",
		Long: `Fill the cache with the given files and directories (inside a dsmount
mount) before a job reads them. Fetches run in the daemon, in parallel, in the
order the paths are given, and share in-flight fetches with concurrent reads;
what is cached already is skipped, so warm is resumable. When the paths don't
fit in the cache, warm says so and fills it up to capacity, earlier paths
first. Ctrl-C stops it cleanly (exit 130). The request goes through the mount
itself, so warm works from a container that sees only the mount.

On a terminal, warm draws a progress bar on stderr. Without one (a Kubernetes
init container, a CI log) it prints a progress line to stderr every
--progress-interval instead: files and bytes done, the fetch rate and the
time left, so a long warm is never silent.`,
		Example: `  dsmount warm /mnt/imagenet/train
  find /mnt/imagenet/val -name '*.JPEG' | dsmount warm --from-file -
  dsmount warm --check /mnt/imagenet`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWarm(cmd.Context(), args, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.fromFile, "from-file", "", "read more paths from this file, one per line ('-': stdin)")
	fl.IntVar(&f.parallel, "parallel", 64, "chunk fetches in flight")
	fl.BoolVar(&f.check, "check", false, "report the cached fraction of the paths; fetch nothing")
	fl.BoolVar(&f.json, "json", false, "print the result as one JSON object")
	fl.DurationVar(&f.progressEvery, "progress-interval", defaultProgressEvery, "where stderr is not a terminal, print a progress line this often (0: never)")
	return cmd
}

// warmGroup is the paths of one mount, in the order given.
type warmGroup struct {
	root  string
	paths []string
}

func runWarm(ctx context.Context, args []string, f warmFlags) error {
	if f.parallel < 1 || f.parallel > 1024 {
		return flagErrorf("parallel", "%d is outside 1..1024", f.parallel)
	}
	if f.progressEvery < 0 {
		return flagErrorf("progress-interval", "%v is negative", f.progressEvery)
	}
	paths := append([]string(nil), args...)
	if f.fromFile != "" {
		more, err := readPathList(f.fromFile, "--from-file")
		if err != nil {
			return err
		}
		paths = append(paths, more...)
	}
	if len(paths) == 0 {
		return usagef("warm needs at least one PATH or --from-file (see 'dsmount warm --help')")
	}
	groups, err := groupByMount(paths)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	var total control.WarmProgress
	var plans control.WarmPlan
	tty := !f.json && term.IsTerminal(int(os.Stderr.Fd()))
	for _, g := range groups {
		req := control.Request{Op: "warm", Paths: g.paths, Parallel: f.parallel, Check: f.check}
		var bar progressBar
		var lines *progressLines // without a terminal
		if !tty && !f.check && f.progressEvery > 0 {
			lines = startProgressLines(os.Stderr, g.root, f.progressEvery)
		}
		var last *control.WarmProgress // the latest progress, reported if interrupted
		err := control.Call(ctx, g.root, req, func(ev control.Event) error {
			switch {
			case ev.Plan != nil:
				p := ev.Plan
				plans.Files += p.Files
				plans.FilesCached += p.FilesCached
				plans.Bytes += p.Bytes
				plans.BytesCached += p.BytesCached
				plans.NotFound += p.NotFound
				if p.NotFound > 0 {
					fmt.Fprintf(os.Stderr, "dsmount: %d paths not found in %s, e.g. %s\n", p.NotFound, g.root, strings.Join(p.NotFoundList, ", "))
				}
				if !f.check && !p.Fits {
					fmt.Fprintf(os.Stderr, "dsmount: the paths do not fit: %s more to cache, %s free in the cache; filling it up to capacity, paths given first win\n",
						units.Bytes(p.Bytes-p.BytesCached), units.Bytes(p.CacheFree))
				}
			case ev.Type == "progress" && ev.Warm != nil:
				last = ev.Warm
				if tty {
					bar.draw(*ev.Warm)
				}
				lines.update(*ev.Warm)
			case ev.Type == "result" && ev.Warm != nil:
				if tty {
					bar.clear()
				}
				addProgress(&total, *ev.Warm)
			}
			return nil
		})
		lines.stop()
		if ctx.Err() != nil {
			if tty {
				bar.clear()
			}
			if last != nil {
				addProgress(&total, *last) // as of the last progress report (every 250 ms)
			}
			total.Interrupted = true
			break
		}
		if err != nil {
			return fmt.Errorf("warm %s: %w", g.root, err)
		}
	}

	if f.check {
		return printCheck(plans, f.json)
	}
	printWarm(total, f.json)
	if total.Interrupted {
		return exitCode{130}
	}
	if total.Errors > 0 {
		return fmt.Errorf("%d chunks failed to fetch, first: %s", total.Errors, total.FirstError)
	}
	if plans.NotFound > 0 {
		return fmt.Errorf("%d paths were not found", plans.NotFound)
	}
	return nil
}

func addProgress(t *control.WarmProgress, p control.WarmProgress) {
	t.Files += p.Files
	t.FilesDone += p.FilesDone
	t.Bytes += p.Bytes
	t.BytesDone += p.BytesDone
	t.ChunksFetched += p.ChunksFetched
	t.ChunksAlreadyCached += p.ChunksAlreadyCached
	t.ChunksNotCached += p.ChunksNotCached
	t.BytesFetched += p.BytesFetched
	t.Errors += p.Errors
	if t.FirstError == "" {
		t.FirstError = p.FirstError
	}
	t.Seconds += p.Seconds
	t.CacheFull = t.CacheFull || p.CacheFull
	t.Interrupted = t.Interrupted || p.Interrupted
}

func groupByMount(paths []string) ([]warmGroup, error) {
	roots := control.Roots{}
	var groups []warmGroup
	index := map[string]int{}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, usagef("%s: %w", p, err)
		}
		root, rel, err := roots.Find(abs)
		if err != nil {
			return nil, err
		}
		i, ok := index[root]
		if !ok {
			i = len(groups)
			index[root] = i
			groups = append(groups, warmGroup{root: root})
		}
		groups[i].paths = append(groups[i].paths, rel)
	}
	return groups, nil
}

func readPathList(name, label string) ([]string, error) {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, usagef("%s: %w", label, err)
		}
		defer f.Close()
		r = f
	}
	var paths []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if line := strings.TrimRight(sc.Text(), "\r"); strings.TrimSpace(line) != "" {
			paths = append(paths, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	return paths, nil
}

func printCheck(p control.WarmPlan, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(os.Stdout).Encode(map[string]any{
			"files_total": p.Files, "files_cached": p.FilesCached, "bytes_total": p.Bytes, "bytes_cached": p.BytesCached,
		})
	}
	pct := 100.0
	if p.Bytes > 0 {
		pct = 100 * float64(p.BytesCached) / float64(p.Bytes)
	}
	fmt.Printf("cached: %d/%d files, %s/%s bytes (%.1f%%)\n", p.FilesCached, p.Files, units.Bytes(p.BytesCached), units.Bytes(p.Bytes), pct)
	return nil
}

func printWarm(t control.WarmProgress, asJSON bool) {
	if asJSON {
		json.NewEncoder(os.Stdout).Encode(map[string]any{
			"files": t.Files, "bytes": t.Bytes, "chunks_fetched": t.ChunksFetched, "chunks_already_cached": t.ChunksAlreadyCached,
			"chunks_not_cached": t.ChunksNotCached, "bytes_fetched": t.BytesFetched, "seconds": t.Seconds,
			"cache_full": t.CacheFull, "interrupted": t.Interrupted, "errors": t.Errors,
		})
		return
	}
	state := ""
	switch {
	case t.Interrupted:
		state = " (interrupted)"
	case t.CacheFull:
		state = " (cache full: the rest was not cached)"
	}
	fmt.Printf("warmed %d files (%s): %d chunks fetched, %d already cached, %d not kept by the cache, in %.1fs, %.0f MB/s%s\n",
		t.Files, units.Bytes(t.Bytes), t.ChunksFetched, t.ChunksAlreadyCached, t.ChunksNotCached, t.Seconds, warmRate(t), state)
}

// progressBar draws a warm's progress on a terminal: one line redrawn in
// place, as wide as the terminal. schollz/progressbar draws it (the bar,
// its percentage, elapsed time and time left, fitting it to the width);
// the figures beside it are the daemon's.
//
// The library is given the fraction of bytes done, in barSteps steps,
// rather than the bytes: with bytes it shows its own rate, measured from
// its first update, and names that rate's unit from a table that ends at
// exabytes per second, which a first update of many terabytes a
// microsecond after the bar started (a resumed warm of a large dataset,
// mostly cached) goes past: an index out of range.
type progressBar struct {
	out  io.Writer // nil: os.Stderr
	bar  *progressbar.ProgressBar
	desc string
}

const barSteps = 1000

func (b *progressBar) draw(p control.WarmProgress) {
	frac := warmDone(p)
	desc := fmt.Sprintf("%d/%d files  %s/%s  %.0f MB/s ", p.FilesDone, p.Files, units.Bytes(max(p.BytesDone, 0)), units.Bytes(p.Bytes), warmRate(p))
	switch {
	case b.bar == nil:
		out := b.out
		if out == nil {
			out = os.Stderr
		}
		b.bar = progressbar.NewOptions64(barSteps,
			progressbar.OptionSetWriter(out),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionFullWidth(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionUseANSICodes(true),
			progressbar.OptionClearOnFinish(),
		)
	case desc != b.desc:
		b.bar.Describe(desc) // draws
	}
	b.desc = desc
	b.bar.Set64(int64(frac * barSteps)) // draws if the percentage changed
}

func (b *progressBar) clear() {
	if b.bar != nil {
		b.bar.Clear()
	}
}

// exitCode ends the program with a code and no message.
type exitCode struct{ code int }

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", e.code) }
