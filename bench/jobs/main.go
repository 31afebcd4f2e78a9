// Command benchjobs measures what several training jobs sharing one cache
// get from it: the hit rate per epoch of each --cache-policy, beside an
// offline oracle (Belady's rule over the reads the jobs actually made), in
// one run.
//
// The store: --files small files (sizes spread around --mean-size) in MinIO
// behind toxiproxy adding --latency ms to every answer, as a remote S3.
// With --isolate-backend, MinIO and toxiproxy run on CPU 0 and everything
// else on the other CPUs.
//
// For each configuration (--jobs × --fractions × --bounded × --policies):
//
//   - a fresh cache dir and mount, --cache-size the fraction of the
//     dataset's bytes;
//   - one process per job (this program, as a reader), each with --workers
//     goroutines taking the next path of its own shuffled order, reading
//     every file whole; with --bounded on, all the readers run in one
//     memory cgroup of --page-cache bytes, so the kernel's page cache can't
//     hold the dataset (as on a node whose dataset is far larger than RAM);
//   - under --cache-policy order, each job declares each epoch's order
//     before it, and the next epoch's (`dsmount order MNT --job J --epoch E
//     --pid READER --next NEXT LIST`, as the Python sampler does; without
//     --pid with --declare anonymous; without --next with --next=false);
//     under the others, nothing is declared;
//   - epoch 0 warms the cache and is not reported; epochs 1..--epochs are:
//     all jobs start together, the page cache dropped first;
//   - the hit rate of an epoch is 1 - GETs / reads (GETs: MinIO's own
//     count, prefetches included, and those made between the epoch before
//     and this one; reads: jobs × files);
//   - the oracle replays the reads all jobs made (by their start times) on
//     a cache of the same size that evicts what is needed farthest in the
//     future and admits nothing needed later than all it holds (Belady),
//     from the first epoch on.
//
// It prints one table with every configuration and the jobs' daemon-side
// figures (dsmount stats). Usage: go run ./test/benchjobs [flags]; needs
// root (FUSE, cgroups, drop_caches) and the MinIO and toxiproxy binaries
// that test/run.sh installs. DSMOUNT_BIN runs a prebuilt dsmount instead
// of building this checkout's.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

type config struct {
	files, meanSize int
	latency, jitter int
	workers, epochs int
	jobs            []int
	fractions       []float64
	bounded         []bool
	policies        []string
	declare         string
	next            bool
	json            bool
	pageCache       int64
	isolate         bool
	seed            uint64
	mountArgs       []string
	daemonEnv       []string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "reader" {
		os.Exit(readerMain(os.Args[2:]))
	}
	var c config
	var jobs, fractions, bounded, policies string
	flag.IntVar(&c.files, "files", 10000, "small files in the dataset")
	flag.IntVar(&c.meanSize, "mean-size", 110_000, "mean file size in bytes (sizes spread from half to one and a half of it)")
	flag.IntVar(&c.latency, "latency", 20, "ms the proxy adds to every answer")
	flag.IntVar(&c.jitter, "jitter", 5, "± ms of jitter on --latency")
	flag.IntVar(&c.workers, "workers", 4, "reading goroutines per job")
	flag.IntVar(&c.epochs, "epochs", 2, "epochs measured after the warm-up epoch")
	flag.StringVar(&jobs, "jobs", "2,4", "job counts to run")
	flag.StringVar(&fractions, "fractions", "0.25,0.5", "cache sizes, as fractions of the dataset's bytes")
	flag.StringVar(&bounded, "bounded", "on,off", "readers' page cache bounded by a memory cgroup (on) or not (off)")
	flag.StringVar(&policies, "policies", "order,fill-and-hold", "dsmount --cache-policy values to run")
	flag.StringVar(&c.declare, "declare", "pid", "how jobs declare under the order policy: pid (--pid of the reader, as the Python sampler does) or anonymous")
	flag.BoolVar(&c.next, "next", true, "under the order policy, declare the next epoch's order too (as the Python sampler does); --next=false: each epoch's alone, as `dsmount order` without --next")
	flag.BoolVar(&c.json, "json", false, "print the results as one JSON array at the end (for tests), besides the table")
	flag.Int64Var(&c.pageCache, "page-cache", 128<<20, "bytes of memory (page cache included) of the readers' cgroup when bounded")
	flag.BoolVar(&c.isolate, "isolate-backend", false, "MinIO and toxiproxy on CPU 0, everything else on the other CPUs")
	flag.Uint64Var(&c.seed, "seed", 1, "shuffle seed")
	flag.Func("mount-arg", "one more argument for every dsmount mount (repeatable)", func(v string) error {
		c.mountArgs = append(c.mountArgs, v)
		return nil
	})
	flag.Func("daemon-env", "one more KEY=VALUE in the daemon's environment (repeatable)", func(v string) error {
		if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
			return fmt.Errorf("want KEY=VALUE, got %q", v)
		}
		c.daemonEnv = append(c.daemonEnv, v)
		return nil
	})
	flag.Parse()
	var err error
	if c.jobs, err = parseList(jobs, strconv.Atoi); err == nil {
		if c.fractions, err = parseList(fractions, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }); err == nil {
			if c.bounded, err = parseList(bounded, parseOnOff); err == nil {
				c.policies, err = parseList(policies, func(s string) (string, error) { return s, nil })
			}
		}
	}
	if err == nil && (c.files < 1 || c.meanSize < 2 || c.workers < 1 || c.epochs < 1) {
		err = fmt.Errorf("--files, --mean-size, --workers and --epochs must be positive")
	}
	if err == nil && c.declare != "pid" && c.declare != "anonymous" {
		err = fmt.Errorf("--declare: want pid or anonymous, got %q", c.declare)
	}
	if err != nil || flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "benchjobs: %v %v\n", err, flag.Args())
		os.Exit(2)
	}

	t := testenv.NewProgramT("dsmount-benchjobs")
	defer t.Close()
	defer t.CloseOnSignal()()
	e := setup(t, c)
	var rows []row
	for _, n := range c.jobs {
		for _, f := range c.fractions {
			for _, b := range c.bounded {
				for _, p := range c.policies {
					rows = append(rows, e.run(runConfig{jobs: n, fraction: f, bounded: b, policy: p}))
					report(c, e, rows) // as it goes: a long run shows progress
				}
			}
		}
	}
	if c.json {
		printJSON(rows)
	}
}

func parseOnOff(s string) (bool, error) {
	switch s {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf("want on or off, got %q", s)
}

func parseList[T any](s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, f := range strings.Split(s, ",") {
		v, err := parse(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
