package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// FuzzEnv: the environment is outside input. Whatever a DSMOUNT_ variable
// holds, applying it to mount's flags sets the flag (with its origin, so
// a later refusal names the variable) or is a one-line usage error naming
// the variable; DSMOUNT_OPTIONS, DSMOUNT_HELP and DSMOUNT_VERSION set
// nothing; and the unknown-name warning warns of exactly the DSMOUNT_
// names no command reads, one line each.
func FuzzEnv(f *testing.F) {
	f.Add("DSMOUNT_CACHE_SIZE", "bogus")
	f.Add("DSMOUNT_DAEMON", "true")
	f.Add("DSMOUNT_OPTIONS", "cache_size=1G")
	f.Add("DSMOUNT_CACHESIZE", "1G")
	f.Add("DSMOUNT_JOB_TIMEOUT", "soon")
	f.Add("DSMOUNT_", "")
	f.Add("DSMOUNT_ALLOW_OTHER", "maybe")
	f.Add("PATH", "/bin")
	f.Fuzz(func(t *testing.T, name, value string) {
		if strings.ContainsAny(name, "=\x00") {
			return // not a variable name an environment can hold
		}
		root := newRootCmd()
		mount, _, err := root.Find([]string{"mount"})
		if err != nil {
			t.Fatal(err)
		}
		lookup := func(n string) (string, bool) {
			if n == name {
				return value, true
			}
			return "", false
		}
		err = applyEnv(mount, lookup)
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, name+"=") || !errors.As(err, new(usageError)) {
				t.Fatalf("%s=%q: error %q, want one usage line naming the variable", name, value, msg)
			}
		}
		for _, fl := range []string{"options", "help", "version"} {
			if mount.Flags().Changed(fl) {
				t.Fatalf("%s=%q set --%s", name, value, fl)
			}
		}
		var w bytes.Buffer
		warnUnknownEnv(root, []string{name + "=" + value}, &w)
		warned := w.String()
		set := err == nil && strings.HasPrefix(name, envPrefix) && anyChanged(mount)
		switch {
		case !strings.HasPrefix(name, envPrefix) && warned != "":
			t.Fatalf("a warning for %s, not a DSMOUNT_ name: %q", name, warned)
		case set && warned != "":
			t.Fatalf("%s set a flag and was warned of as unknown: %q", name, warned)
		case strings.Count(warned, "\n") > 1:
			t.Fatalf("more than one warning line for one variable: %q", warned)
		}
	})
}

// anyChanged says whether any flag of c is set.
func anyChanged(c *cobra.Command) bool {
	changed := false
	c.Flags().Visit(func(*pflag.Flag) { changed = true })
	return changed
}
