package jobs

import (
	"fmt"
	"strconv"

	"github.com/dsmount/dsmount/bench/internal/benchenv"
	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/test/testenv"
)

// Summary is the subcommand's line in bench's --help.
const Summary = "jobs sharing one cache: hit rate per epoch of each cache policy beside an oracle"

type config struct {
	files, meanSize int
	benchenv.Proxy
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

// Main runs the benchmark with the command line args (after "jobs").
func Main(args []string) error {
	if len(args) > 0 && args[0] == readerArg {
		return cli.ExitCode(readerMain(args[1:]))
	}
	var c config
	var jobs, fractions, bounded, policies string
	fs := cli.NewFlagSet("jobs", Summary)
	fs.IntVar(&c.files, "files", 10000, "small files in the dataset")
	fs.IntVar(&c.meanSize, "mean-size", 110_000, "mean file size in bytes (sizes spread from half to one and a half of it)")
	c.Proxy.AddFlags(fs, 5)
	fs.IntVar(&c.workers, "workers", 4, "reading goroutines per job")
	fs.IntVar(&c.epochs, "epochs", 2, "epochs measured after the warm-up epoch")
	fs.StringVar(&jobs, "jobs", "2,4", "job counts to run")
	fs.StringVar(&fractions, "fractions", "0.25,0.5", "cache sizes, as fractions of the dataset's bytes")
	fs.StringVar(&bounded, "bounded", "on,off", "readers' page cache bounded by a memory cgroup (on) or not (off)")
	fs.StringVar(&policies, "policies", "order,fill-and-hold", "dsmount --cache-policy values to run")
	fs.StringVar(&c.declare, "declare", "pid", "how jobs declare under the order policy: pid (--pid of the reader, as the Python sampler does) or anonymous")
	fs.BoolVar(&c.next, "next", true, "under the order policy, declare the next epoch's order too (as the Python sampler does); --next=false: each epoch's alone, as `dsmount order` without --next")
	fs.BoolVar(&c.json, "json", false, "print the results as one JSON array at the end (for tests), besides the table")
	fs.Int64Var(&c.pageCache, "page-cache", 128<<20, "bytes of memory (page cache included) of the readers' cgroup when bounded")
	benchenv.IsolateFlag(fs, &c.isolate)
	fs.Uint64Var(&c.seed, "seed", 1, "shuffle seed")
	cli.MountArgs(fs, &c.mountArgs, "one more argument for every dsmount mount (repeatable)")
	cli.DaemonEnv(fs, &c.daemonEnv, "one more KEY=VALUE in the daemon's environment (repeatable)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	var err error
	if c.jobs, err = cli.ParseList(jobs, strconv.Atoi); err == nil {
		if c.fractions, err = cli.ParseList(fractions, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }); err == nil {
			if c.bounded, err = cli.ParseList(bounded, cli.ParseOnOff); err == nil {
				c.policies, err = cli.ParseList(policies, func(s string) (string, error) { return s, nil })
			}
		}
	}
	if err == nil && (c.files < 1 || c.meanSize < 2 || c.workers < 1 || c.epochs < 1) {
		err = fmt.Errorf("--files, --mean-size, --workers and --epochs must be positive")
	}
	if err == nil && c.declare != "pid" && c.declare != "anonymous" {
		err = fmt.Errorf("--declare: want pid or anonymous, got %q", c.declare)
	}
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err != nil {
		return cli.Refused(err)
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
	return nil
}
