// Command soak is dsmount's long run (issue 25, item 4): one daemon over a
// MinIO store behind toxiproxy, kept busy for --duration with what a
// training node does, while a fault is injected every --fault-interval,
// and the daemon's RSS, goroutines, open file descriptors, index (badger)
// and cache sizes are sampled every --sample.
//
// The work, in a loop: declared epochs (--jobs reader processes of
// --workers goroutines each, each declaring its epoch's order and the
// next with its pid, as the Python sampler does, and checking the size and
// CRC-32C of every file it reads), `dsmount warm` of part of the dataset,
// job churn (jobs declared and ended, left to expire, or abandoned by a
// reader process killed mid-epoch), and an unmount and remount.
//
// The faults, round-robin: 5% of new connections stalled (toxiproxy
// timeout toxic), 10% reset (reset_peer), +200 ms latency, the store down
// (the proxy disabled: connections refused), a cache file deleted or
// corrupted under the daemon, and kill -9 of the daemon followed by a
// restart, a remount and a verified pass over every file.
//
// At the end it checks that no byte read was wrong, that every read error
// is explained by a fault (explain.go states the rule), that no mount and
// no process of the run is left, and that RSS, goroutines and fds did not
// grow beyond their bounds (growth.go); it writes the samples as OUT.csv,
// everything as OUT.json and a plot as OUT.png (python3 with matplotlib),
// prints one verdict line and exits 1 on any failure.
//
//	go run ./test/soak --duration 30m --out docs/soak
//
// Needs root (FUSE) and the MinIO and toxiproxy binaries test/run.sh
// installs ($DSMOUNT_MINIO, $DSMOUNT_TOXIPROXY); DSMOUNT_BIN runs a
// prebuilt dsmount instead of building this checkout's. The program runs
// itself as the reader processes (`soak reader ...`, reader.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// config is the command line.
type config struct {
	duration      time.Duration // the work loop's length
	faultInterval time.Duration // one fault this often
	sample        time.Duration // one sample this often
	warmup        time.Duration // samples before this are left out of the growth checks
	out           string        // OUT.csv, OUT.json, OUT.png ("" : none)
	plot          bool

	files      int     // small files (sizes around 100 KB)
	largeFiles int     // multi-MB files
	cacheFrac  float64 // --cache-size as a fraction of the dataset
	jobs       int     // reader processes per declared epoch
	workers    int     // reading goroutines per reader process
	jobTimeout time.Duration
	faults     []string
	seed       uint64

	bounds bounds
}

func defaultConfig() config {
	return config{
		duration:      30 * time.Minute,
		faultInterval: time.Minute,
		sample:        10 * time.Second,
		out:           "docs/soak",
		plot:          true,
		files:         3000,
		largeFiles:    12,
		cacheFrac:     0.6,
		jobs:          2,
		workers:       3,
		jobTimeout:    time.Minute,
		faults:        append([]string(nil), faultKinds...),
		seed:          1,
		bounds:        defaultBounds(),
	}
}

func parseFlags(args []string) (config, error) {
	c := defaultConfig()
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.DurationVar(&c.duration, "duration", c.duration, "how long the work loop runs (set-up and the final checks come on top)")
	fs.DurationVar(&c.faultInterval, "fault-interval", c.faultInterval, "inject one fault this often, round-robin over --faults")
	fs.DurationVar(&c.sample, "sample", c.sample, "sample the daemon this often")
	fs.DurationVar(&c.warmup, "warmup", 0, "leave samples before this out of the growth checks (default: a tenth of --duration, at least 20s)")
	fs.StringVar(&c.out, "out", c.out, `write OUT.csv (samples), OUT.json (everything) and OUT.png (plot); "" writes none`)
	fs.BoolVar(&c.plot, "plot", c.plot, "draw OUT.png (/usr/bin/python3 with matplotlib)")
	fs.IntVar(&c.files, "files", c.files, "small files in the dataset (40-160 KB)")
	fs.IntVar(&c.largeFiles, "large-files", c.largeFiles, "large files in the dataset (2-12 MB)")
	fs.Float64Var(&c.cacheFrac, "cache-fraction", c.cacheFrac, "--cache-size as a fraction of the dataset's bytes")
	fs.IntVar(&c.jobs, "jobs", c.jobs, "reader processes (declared jobs) per epoch")
	fs.IntVar(&c.workers, "workers", c.workers, "reading goroutines per reader process")
	fs.DurationVar(&c.jobTimeout, "job-timeout", c.jobTimeout, "the daemon's --job-timeout (abandoned jobs must be gone this long after)")
	faults := fs.String("faults", strings.Join(c.faults, ","), "the faults, in their round-robin order: "+strings.Join(faultKinds, ", "))
	fs.Uint64Var(&c.seed, "seed", c.seed, "seed of the dataset, the orders and the faults' victims")
	c.bounds.flags(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.faults = nil
	for _, f := range strings.Split(*faults, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if !isFaultKind(f) {
			return c, fmt.Errorf("--faults: unknown fault %q (known: %s)", f, strings.Join(faultKinds, ", "))
		}
		c.faults = append(c.faults, f)
	}
	switch {
	case c.duration <= 0 || c.faultInterval <= 0 || c.sample <= 0:
		return c, errors.New("--duration, --fault-interval and --sample must be positive")
	case c.files < 10 || c.largeFiles < 0:
		return c, errors.New("--files must be at least 10 and --large-files not negative")
	case c.cacheFrac <= 0 || c.cacheFrac > 2:
		return c, errors.New("--cache-fraction must be in (0, 2]")
	case c.jobs < 1 || c.workers < 1:
		return c, errors.New("--jobs and --workers must be at least 1")
	case c.jobTimeout < 5*time.Second:
		return c, errors.New("--job-timeout must be at least 5s")
	}
	if c.warmup == 0 {
		c.warmup = max(20*time.Second, c.duration/10)
	}
	return c, nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "reader" {
		os.Exit(readerMain(os.Args[2:]))
	}
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	pt := testenv.NewProgramT("dsmount-soak")
	stop := pt.CloseOnSignal()
	res := run(context.Background(), cfg, pt, log)
	stop()
	pt.Close()
	// What the run left behind is looked at once everything it started
	// has been stopped and its directory removed.
	res.leakChecks(log)
	if err := writeOutputs(cfg, res, os.Stderr, log); err != nil {
		res.fail("writing the outputs: %v", err)
	}
	fmt.Println(res.verdictLine())
	if !res.Pass {
		os.Exit(1)
	}
}
