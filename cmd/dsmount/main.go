// Command dsmount mounts a training dataset that lives in S3 (or any
// S3-compatible store) or on slow storage as a read-only directory, served
// from a persistent local chunk cache.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/dsmount/dsmount/internal/version"
)

// Exit codes: 1 for a command line that can't be run (a usage or
// configuration error: retrying it cannot help, so the systemd units name
// it in RestartPreventExitStatus=), 2 for a failure while running it.
const (
	exitUsage   = 1
	exitFailure = 2
)

// usageError marks errors in the command line itself.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// flagError is a value of one flag that the command can't use.
type flagError struct {
	flag string
	err  error
}

func (f flagError) Error() string { return "--" + f.flag + ": " + f.err.Error() }
func (f flagError) Unwrap() error { return f.err }

// flagErrorf is a usage error in the value of flag.
func flagErrorf(flag, format string, args ...any) error {
	return usageError{flagError{flag, fmt.Errorf(format, args...)}}
}

// withOrigin is err's message, naming where a refused flag value came
// from when that was not the command line (an environment variable or a
// mount option): the user looks for it there.
func withOrigin(cmd *cobra.Command, err error) string {
	var fe flagError
	if cmd == nil || !errors.As(err, &fe) {
		return err.Error()
	}
	f := cmd.Flags().Lookup(fe.flag)
	origin, ok := setElsewhere(f)
	if !ok {
		return err.Error()
	}
	return fmt.Sprintf("%s=%q: %v", origin, f.Value.String(), fe.err)
}

func main() {
	root := newRootCmd()
	root.SetArgs(fuseHelperArgs(os.Args[1:], func(name string) bool {
		c, _, err := root.Find([]string{name})
		return err == nil && c != root
	}))
	stopProfile := startProfile()
	warnUnknownEnv(root, os.Environ(), os.Stderr)
	cmd, err := root.ExecuteC()
	stopProfile()
	if err != nil {
		var code exitCode
		if errors.As(err, &code) {
			os.Exit(code.code)
		}
		fmt.Fprintf(os.Stderr, "dsmount: %s\n", oneLine(withOrigin(cmd, err)))
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
local disk; what is missing is fetched from the source and kept.

Every flag can also be set in the environment as DSMOUNT_<FLAG>
(DSMOUNT_CACHE_DIR=/nvme/dsmount); a flag on the command line wins.
mount(8) and /etc/fstab run it as 'dsmount SOURCE MOUNTPOINT -o OPTIONS'
(type fuse.dsmount): see 'dsmount mount --help'.`,
		Version:       version.String(),
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
	// Mount options (-o) first, then the environment for what neither
	// the command line nor the options set.
	root.PersistentPreRunE = func(c *cobra.Command, args []string) error {
		if c.Flags().Lookup("options") != nil {
			opts, err := c.Flags().GetStringArray("options")
			if err != nil {
				return err
			}
			if err := applyMountOptions(c, opts); err != nil {
				return err
			}
		}
		return applyEnv(c, os.LookupEnv)
	}
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
