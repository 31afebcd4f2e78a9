package main

import (
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

// applyEnv sets each of cmd's flags that the command line left unset from
// its environment variable, if set: a flag given on the command line (or
// as a mount option) wins. A value the flag refuses is a usage error that
// names the variable.
func applyEnv(cmd *cobra.Command, lookup func(string) (string, bool)) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" || f.Name == "version" {
			return
		}
		name := envName(f.Name)
		v, ok := lookup(name)
		if !ok {
			return
		}
		if serr := cmd.Flags().Set(f.Name, v); serr != nil {
			err = usagef("%s=%q: %v", name, v, serr)
		}
	})
	return err
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
