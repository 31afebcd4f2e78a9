package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// NewFlagSet is the flag set of subcommand name. Its --help shows how to
// run it and summary above the flags. Errors are returned, not fatal, so
// that bench's main picks the exit code (0 for --help, 2 for a bad flag)
// and the subcommands' flag parsing can be tested.
func NewFlagSet(name, summary string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./bench %s [flags]\n\n%s\n\nflags:\n", name, summary)
		fs.PrintDefaults()
	}
	return fs
}

// UsageError is a command line a subcommand refuses: bench exits 2, as the
// flag package does for a flag it doesn't know.
type UsageError struct {
	Err error
	// Printed: the flag set has said it already, with the usage.
	Printed bool
}

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef is a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return UsageError{Err: fmt.Errorf(format, args...)}
}

// Refused is err as a UsageError, unless it is one already or --help's
// flag.ErrHelp: for a subcommand's own checks of its flags.
func Refused(err error) error {
	if err == nil || errors.Is(err, flag.ErrHelp) || errors.As(err, new(UsageError)) {
		return err
	}
	return UsageError{Err: err}
}

// Parse parses args into fs. A bad flag is a UsageError the flag set has
// printed already, with the usage; --help is flag.ErrHelp.
func Parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return UsageError{Err: err, Printed: true}
	}
	return err
}

// ExitCode is the status a helper process (a subcommand re-run as a child
// of itself: jobs' readers, scale's S3 server) exits with, silently.
type ExitCode int

func (c ExitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// Child is a command that runs this binary's subcommand sub with args: how
// a subcommand starts its helper processes (`bench jobs reader ...`).
func Child(sub string, args ...string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return exec.Command(self, append([]string{sub}, args...)...), nil
}

// Logf prints a progress line to stderr, after the time of day: stdout
// is for the results.
func Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// Since is the time since t0, rounded for a progress line.
func Since(t0 time.Time) time.Duration { return time.Since(t0).Round(time.Millisecond) }

// MountArgs adds the repeatable --mount-arg flag: each one more argument
// for every dsmount mount, appended to *dst.
func MountArgs(fs *flag.FlagSet, dst *[]string, usage string) {
	fs.Func("mount-arg", usage, func(v string) error {
		*dst = append(*dst, v)
		return nil
	})
}

// DaemonEnv adds the repeatable --daemon-env flag: each one more
// KEY=VALUE in the daemons' environment, appended to *dst.
func DaemonEnv(fs *flag.FlagSet, dst *[]string, usage string) {
	fs.Func("daemon-env", usage, func(v string) error {
		if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
			return fmt.Errorf("want KEY=VALUE, got %q", v)
		}
		*dst = append(*dst, v)
		return nil
	})
}

// ParseOnOff reads "on" as true and "off" as false, for ParseList.
func ParseOnOff(s string) (bool, error) {
	switch s {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf("want on or off, got %q", s)
}

// ParseList parses a comma-separated list, each item (spaces trimmed)
// with parse.
func ParseList[T any](s string, parse func(string) (T, error)) ([]T, error) {
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
