package nodes

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dsmount/dsmount/bench/internal/benchenv"
	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/test/testenv"
)

// Summary is the subcommand's line in bench's --help.
const Summary = "data-parallel ranks over N nodes' caches: hit rate per epoch with and without the locality sampler"

type layout struct{ nodes, perNode int }

func (l layout) String() string { return fmt.Sprintf("%dx%d", l.nodes, l.perNode) }
func (l layout) ranks() int     { return l.nodes * l.perNode }

type config struct {
	files, meanSize int
	benchenv.Proxy
	layouts       []layout
	batch, epochs int
	workers       int
	locality      []bool
	rankMemory    int64
	pageCache     int64
	seed          int
	isolate       bool
	json          bool
}

func parseLayout(s string) (layout, error) {
	a, b, ok := strings.Cut(s, "x")
	n, err1 := strconv.Atoi(a)
	p, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || p < 1 || n > 64 || n*p > 64 {
		return layout{}, fmt.Errorf("--layouts: %q is not NODESxRANKS (each at least 1, at most 64 ranks)", s)
	}
	return layout{n, p}, nil
}

func parseFlags(args []string) (config, error) {
	c := config{}
	var layouts, locality string
	fs := cli.NewFlagSet("nodes", Summary)
	fs.IntVar(&c.files, "files", 10000, "files in the dataset")
	fs.IntVar(&c.meanSize, "mean-size", 40_000, "mean file size in bytes (sizes spread from half to one and a half of it)")
	c.Proxy.AddFlags(fs, 5)
	fs.StringVar(&layouts, "layouts", "4x1,4x2,8x1", "comma-separated NODESxRANKS_PER_NODE layouts to run")
	fs.IntVar(&c.batch, "batch", 64, "batch size of every rank")
	fs.IntVar(&c.epochs, "epochs", 3, "epochs (the first cold)")
	fs.IntVar(&c.workers, "workers", 1, "DataLoader worker processes of every rank")
	fs.StringVar(&locality, "locality", "on,off", "samplers to run: on (locality=True), off (today's)")
	fs.Int64Var(&c.rankMemory, "rank-memory", 600<<20, "bytes of the ranks' memory cgroup for each rank with its workers")
	fs.Int64Var(&c.pageCache, "page-cache", 64<<20, "bytes of the ranks' memory cgroup beyond theirs (the page cache)")
	fs.IntVar(&c.seed, "seed", 0, "the samplers' seed")
	benchenv.IsolateFlag(fs, &c.isolate)
	fs.BoolVar(&c.json, "json", false, "print the results as one JSON line at the end, after JSON (for tests)")
	if err := cli.Parse(fs, args); err != nil {
		return c, err
	}
	var err error
	if c.layouts, err = cli.ParseList(layouts, parseLayout); err == nil {
		if c.locality, err = cli.ParseList(locality, cli.ParseOnOff); err != nil {
			err = fmt.Errorf("--locality: %w", err)
		}
	}
	switch {
	case err != nil:
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.files < 1 || c.meanSize < 2 || c.batch < 1 || c.epochs < 1 || c.workers < 0:
		err = errors.New("--files, --mean-size, --batch and --epochs must be positive, --workers not negative")
	case c.rankMemory < 64<<20 || c.pageCache < 0:
		err = errors.New("--rank-memory must be at least 64 MiB, --page-cache not negative")
	case c.Latency < 0 || c.Jitter < 0:
		err = errors.New("--latency and --jitter can't be negative")
	}
	return c, err
}

// Main runs the benchmark with the command line args (after "nodes").
func Main(args []string) error {
	c, err := parseFlags(args)
	if err != nil {
		return cli.Refused(err)
	}
	t := testenv.NewProgramT("dsmount-benchnodes")
	defer t.Close()
	defer t.CloseOnSignal()()
	e := setup(t, c)
	var rows []row
	for _, l := range c.layouts {
		for _, loc := range c.locality {
			rows = append(rows, e.run(l, loc))
			report(c, e, rows)
		}
	}
	if c.json {
		printJSON(rows)
	}
	for _, r := range rows {
		if r.Err != "" {
			return fmt.Errorf("%s locality %v: %s", r.Layout, r.Locality, r.Err)
		}
	}
	return nil
}
