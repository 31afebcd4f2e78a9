// Command dsmount mounts a training dataset that lives in S3 (or any
// S3-compatible store) or on slow storage as a read-only directory, served
// from a persistent local chunk cache.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes: 1 for a command line that can't be run, 2 for a failure while
// running it.
const (
	exitUsage   = 1
	exitFailure = 2
)

// usageError marks errors in the command line itself.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func main() {
	root := newRootCmd()
	stopProfile := startProfile()
	err := root.Execute()
	stopProfile()
	if err != nil {
		var code exitCode
		if errors.As(err, &code) {
			os.Exit(code.code)
		}
		fmt.Fprintf(os.Stderr, "dsmount: %s\n", oneLine(err.Error()))
		var u usageError
		if errors.As(err, &u) {
			os.Exit(exitUsage)
		}
		os.Exit(exitFailure)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "dsmount",
		Short: "Mount a dataset from S3 or slow storage as a read-only directory, served from a local cache",
		Long: `dsmount mounts a training dataset that lives in S3 (or any S3-compatible
store) or in a slow local directory (HDD, NFS) as an ordinary read-only
directory. Reads are served from a persistent, checksummed chunk cache on
local disk; what is missing is fetched from the source and kept.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())}
	})
	// An unknown subcommand is a usage error (cobra would report it as a
	// plain failure).
	root.Args = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("unknown command %q (see 'dsmount --help')", args[0])
		}
		return nil
	}
	root.RunE = func(c *cobra.Command, args []string) error { return c.Help() }
	root.AddCommand(newMountCmd(), newUnmountCmd(), newDaemonCmd(), newWarmCmd(), newOrderCmd(), newStatsCmd())
	return root
}

// exactArgs is cobra.ExactArgs reporting a usage error.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s needs %s (see '%s --help')", c.CommandPath(), names, c.CommandPath())
		}
		return nil
	}
}

// oneLine keeps a CLI error to one line, whatever a library put in it.
func oneLine(s string) string {
	out := []rune{}
	for _, r := range s {
		if r == '\n' || r == '\r' {
			r = ' '
		}
		out = append(out, r)
	}
	return string(out)
}
