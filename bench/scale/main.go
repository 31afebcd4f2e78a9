package scale

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dsmount/dsmount/bench/internal/benchenv"
	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/test/testenv"
)

// Summary is the subcommand's line in bench's --help.
const Summary = "ImageNet scale (1.28M objects): mount, find, ls, orders, warm, remount"

const bucket = "imagenet"

// serveArg, as the first argument after "scale", makes this program the
// store's process.
const serveArg = "serve-s3"

type config struct {
	objects, dirs int
	size          int64
	benchenv.Proxy
	parallel         int
	subset           float64
	readers          int
	isolate, warmAll bool
	keep             bool
	out              string
	skip             map[string]bool
	mountArgs        []string
	mountTimeout     time.Duration
	stepTimeout      time.Duration
}

// steps are the names --skip takes.
var steps = []string{"ref-seq", "ref-par", "find", "ls", "order-cli", "order-py", "order-py-next", "warm", "epoch", "check", "remount"}

// Main runs the benchmark with the command line args (after "scale"). It
// ends the program (ending.exit) rather than return, but for a command
// line it refuses.
func Main(args []string) error {
	if len(args) > 0 && args[0] == serveArg {
		return cli.ExitCode(serveMain(args[1:]))
	}
	c, err := parseFlags(args)
	if err != nil {
		return cli.Refused(err)
	}
	pt := testenv.NewProgramT("dsmount-benchscale")
	en := newEnding(pt)
	t := &benchT{ProgramT: pt, en: en}
	e := setup(t, c, en)
	e.args = args
	e.run()
	text := e.report()
	fmt.Print(text)
	if c.out != "" {
		if err := os.WriteFile(c.out, []byte(text), 0o644); err != nil {
			t.Fatalf("--out: %v", err)
		}
	}
	en.exit(0)
	return nil // not reached: exit never returns
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := cli.NewFlagSet("scale", Summary)
	fs.IntVar(&c.objects, "objects", 1281167, "objects in the store")
	fs.IntVar(&c.dirs, "dirs", 1000, "class directories the objects are spread over")
	fs.Int64Var(&c.size, "size", 1024, "bytes per object")
	c.Proxy.AddFlags(fs, 0)
	fs.IntVar(&c.parallel, "parallel", 32, "listing workers of the reference tree walk")
	fs.Float64Var(&c.subset, "subset", 0.05, "fraction of the dataset warmed, and another read in the cold epoch")
	fs.IntVar(&c.readers, "readers", 8, "reading goroutines of the cold epoch")
	benchenv.IsolateFlag(fs, &c.isolate)
	fs.BoolVar(&c.warmAll, "warm-all", false, "warm every object before the remount, so it starts with a chunk record per object")
	fs.BoolVar(&c.keep, "keep", false, "keep the work dir (cache, local tree, lists) and say where it is")
	fs.StringVar(&c.out, "out", "", "also write the markdown report to this file")
	fs.DurationVar(&c.mountTimeout, "mount-timeout", 10*time.Minute, "longest wait for a mount to be ready")
	fs.DurationVar(&c.stepTimeout, "step-timeout", 30*time.Minute, "longest a dsmount command (order, warm) may run")
	skip := fs.String("skip", "", "comma-separated steps to leave out: "+strings.Join(steps, ", "))
	cli.MountArgs(fs, &c.mountArgs, "one more argument for every dsmount mount (repeatable)")
	if err := cli.Parse(fs, args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if c.skip, err = parseSkip(*skip); err != nil {
		return c, err
	}
	switch {
	case c.objects < 1 || c.dirs < 1 || c.dirs > c.objects:
		return c, fmt.Errorf("want 1 <= --dirs <= --objects, got %d and %d", c.dirs, c.objects)
	case c.size < 0 || c.Latency < 0 || c.Jitter < 0:
		return c, fmt.Errorf("--size, --latency and --jitter can't be negative")
	case c.parallel < 1 || c.readers < 1:
		return c, fmt.Errorf("--parallel and --readers must be positive")
	case c.subset <= 0 || c.subset > 0.5:
		return c, fmt.Errorf("--subset must be in (0, 0.5], got %g", c.subset)
	}
	return c, nil
}

// parseSkip reads --skip's list of step names.
func parseSkip(s string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		known := false
		for _, st := range steps {
			known = known || st == f
		}
		if !known {
			return nil, fmt.Errorf("--skip: unknown step %q (steps: %s)", f, strings.Join(steps, ", "))
		}
		out[f] = true
	}
	return out, nil
}

// serveMain is the store's process: it prints its endpoint and serves
// until it is killed (or its parent dies: the parent sets Pdeathsig).
func serveMain(args []string) int {
	fs := flag.NewFlagSet("serve-s3", flag.ContinueOnError)
	objects := fs.Int("objects", 1281167, "objects")
	dirs := fs.Int("dirs", 1000, "class directories")
	size := fs.Int64("size", 1024, "bytes per object")
	name := fs.String("bucket", bucket, "the bucket")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	g, err := testenv.ServeGenS3(*name, *objects, *dirs, *size)
	if err != nil {
		fmt.Fprintf(os.Stderr, "serve-s3: %v\n", err)
		return 1
	}
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(w, g.Endpoint())
	w.Flush()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	g.Close()
	return 0
}
