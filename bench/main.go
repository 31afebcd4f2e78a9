package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/dsmount/dsmount/bench/cold"
	"github.com/dsmount/dsmount/bench/gpu"
	"github.com/dsmount/dsmount/bench/hot"
	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/bench/jobs"
	"github.com/dsmount/dsmount/bench/nodes"
	"github.com/dsmount/dsmount/bench/order"
	"github.com/dsmount/dsmount/bench/pipeline"
	"github.com/dsmount/dsmount/bench/ranges"
	"github.com/dsmount/dsmount/bench/scale"
	"github.com/dsmount/dsmount/bench/store"
	"github.com/dsmount/dsmount/bench/warm"
)

// subcommand is one benchmark: its name on the command line, its line in
// --help, and its entry point.
type subcommand struct {
	name, summary string
	main          func(args []string) error
}

// subcommands are bench's benchmarks, in the order --help lists them.
func subcommands() []subcommand {
	return []subcommand{
		{"cold", cold.Summary, cold.Main},
		{"hot", hot.Summary, hot.Main},
		{"order", order.Summary, order.Main},
		{"warm", warm.Summary, warm.Main},
		{"store", store.Summary, store.Main},
		{"jobs", jobs.Summary, jobs.Main},
		{"pipeline", pipeline.Summary, pipeline.Main},
		{"nodes", nodes.Summary, nodes.Main},
		{"scale", scale.Summary, scale.Main},
		{"ranges", ranges.Summary, ranges.Main},
		{"gpu", gpu.Summary, gpu.Main},
	}
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run runs the subcommand args names and returns the exit status: 0, 1
// for an error (an unknown subcommand included), 2 for a command line the
// subcommand refuses.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	}
	for _, s := range subcommands() {
		if s.name != args[0] {
			continue
		}
		err := s.main(args[1:])
		var code cli.ExitCode
		var bad cli.UsageError
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &code):
			return int(code)
		case errors.As(err, &bad):
			if !bad.Printed {
				fmt.Fprintf(stderr, "bench %s: %v\n", s.name, err)
			}
			return 2
		default:
			fmt.Fprintf(stderr, "bench %s: %v\n", s.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "bench: unknown subcommand %q (go run ./bench --help lists them)\n", args[0])
	return 1
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: go run ./bench SUBCOMMAND [flags]   (go run ./bench SUBCOMMAND --help: its flags)\n\nsubcommands:\n")
	for _, s := range subcommands() {
		fmt.Fprintf(w, "  %-9s %s\n", s.name, s.summary)
	}
}
