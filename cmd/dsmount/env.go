package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dsmount/dsmount/internal/control"
)

// envPrefix starts the environment variable of every flag: --cache-dir is
// DSMOUNT_CACHE_DIR. A container or a unit file configures dsmount without
// a wrapper script.
const envPrefix = "DSMOUNT_"

// envName is the environment variable of a flag.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// notFromEnv are the flags no variable sets: -o is mount(8)'s way in (its
// options are applied before the environment is read, so a DSMOUNT_OPTIONS
// would be taken for set and never applied), and --help and --version are
// not settings.
var notFromEnv = []string{"help", "version", "options"}

// otherEnvNames are DSMOUNT_ variables that are not flags: the systemd
// unit's source, the background daemon's readiness pipe, profiling, and
// the variables of dsmount's own test and bench tooling. They get no
// warning.
var otherEnvNames = []string{
	"DSMOUNT_SOURCE", readyFDEnv, noScopeEnv, "DSMOUNT_CPUPROFILE", "DSMOUNT_HEAPPROFILE", "DSMOUNT_TRACE_DIR",
	"DSMOUNT_BIN", "DSMOUNT_MINIO", "DSMOUNT_TOXIPROXY", "DSMOUNT_PROTOCOL_SPEC", "DSMOUNT_PROTOCOL_OUT",
	"DSMOUNT_BENCH_COLD", "DSMOUNT_BENCH_RECORDS", "DSMOUNT_BENCH_LIST_KEYS", "DSMOUNT_TEST_GENS3_CHILD",
}

// originAnnotation marks, on a flag, where its value came from when that
// was not the command line: "DSMOUNT_CACHE_SIZE" or "mount option
// cache_size". Errors about the value then name it (flagError).
const originAnnotation = "dsmount-origin"

// setFrom sets flag f of cmd to v and records where v came from.
func setFrom(cmd *cobra.Command, f *pflag.Flag, v, origin string) error {
	if err := cmd.Flags().Set(f.Name, v); err != nil {
		return err
	}
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[originAnnotation] = []string{origin}
	return nil
}

// flagOrigin names where flag's value came from, for messages: its
// variable, its mount option, or --flag.
func flagOrigin(cmd *cobra.Command, flag string) string {
	if origin, ok := setElsewhere(cmd.Flags().Lookup(flag)); ok {
		return origin
	}
	return "--" + flag
}

// setElsewhere is where f's value came from when not the command line
// (setFrom); false for the command line or a default.
func setElsewhere(f *pflag.Flag) (string, bool) {
	if f == nil || len(f.Annotations[originAnnotation]) == 0 {
		return "", false
	}
	return f.Annotations[originAnnotation][0], true
}

// applyEnv sets each of cmd's flags that the command line left unset from
// its environment variable, if set: a flag given on the command line (or
// as a mount option) wins. A value the flag refuses is a usage error that
// names the variable.
func applyEnv(cmd *cobra.Command, lookup func(string) (string, bool)) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || slices.Contains(notFromEnv, f.Name) {
			return
		}
		name := envName(f.Name)
		v, ok := lookup(name)
		if !ok {
			return
		}
		if serr := setFrom(cmd, f, v, name); serr != nil {
			err = usagef("%s=%q: %v", name, v, serr)
		}
	})
	return err
}

// warnUnknownEnv warns, on w, of each DSMOUNT_ variable in environ that
// no command of root reads: a misspelled setting would otherwise be
// silently ignored. It suggests the nearest known name.
func warnUnknownEnv(root *cobra.Command, environ []string, w io.Writer) {
	known := map[string]bool{}
	for _, n := range otherEnvNames {
		known[n] = true
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if !slices.Contains(notFromEnv, f.Name) {
				known[envName(f.Name)] = true
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, envPrefix) && !known[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		msg := fmt.Sprintf("dsmount: warning: %s is set but is not a dsmount setting; it is ignored", name)
		if near := nearestName(name, known); near != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", near)
		}
		fmt.Fprintln(w, msg)
	}
}

// nearestName is the known name closest to name, if any is close (an
// edit distance of at most 3); ties go to the first in order.
func nearestName(name string, known map[string]bool) string {
	names := make([]string, 0, len(known))
	for n := range known {
		names = append(names, n)
	}
	sort.Strings(names)
	best, bestD := "", 4
	for _, n := range names {
		if d := editDistance(name, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// flagEnv drops from environ the variable of every flag of cmd: a
// process this one starts with those settings as flags must not read them
// again from its environment (DSMOUNT_DAEMON=true would make every
// background daemon start another).
func flagEnv(cmd *cobra.Command, environ []string) []string {
	names := map[string]bool{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) { names[envName(f.Name)] = true })
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !names[name] {
			out = append(out, kv)
		}
	}
	return out
}

// envCredentials are the static AWS keys of this shell's environment, for
// an s3:// mount that joins a running daemon: the daemon's environment is
// another's. Nil when the source isn't S3, is read anonymously, or the
// environment has no keys (a profile or the daemon's own then apply).
func envCredentials(source string, anonymous bool, lookup func(string) (string, bool)) *control.Credentials {
	if anonymous || !strings.HasPrefix(source, "s3://") {
		return nil
	}
	id, _ := lookup("AWS_ACCESS_KEY_ID")
	secret, _ := lookup("AWS_SECRET_ACCESS_KEY")
	if id == "" || secret == "" {
		return nil
	}
	token, _ := lookup("AWS_SESSION_TOKEN")
	return &control.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: token}
}

// credentialsSource says, for the log, whose credentials a joined mount
// is read with.
func credentialsSource(req control.MountRequest) string {
	switch {
	case !strings.HasPrefix(req.Source, "s3://"):
		return "none (a local source)"
	case req.Anonymous:
		return "none (--anonymous)"
	case req.Credentials != nil:
		return "this shell's AWS_ACCESS_KEY_ID"
	case req.Profile != "":
		return "profile " + req.Profile
	}
	return "the daemon's (its environment and AWS files)"
}
