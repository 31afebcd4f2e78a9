package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// Mount options: what mount(8), /etc/fstab and mount.fuse3 pass as
// "-o a,b=c". Every flag of `dsmount mount` has its option, the flag's
// name with '_' for '-' (cache_dir=/nvme/c, allow_other); a boolean may
// be bare. Options that mount(8), systemd and FUSE helpers put in for
// themselves are accepted and ignored. Anything else is refused.

// ignoredOptions are the generic options a mount line may carry that mean
// nothing to dsmount: the mount is read-only and nodev/nosuid whatever they
// say.
var ignoredOptions = map[string]bool{
	"defaults": true, "rw": true, "ro": true, "auto": true, "noauto": true, "user": true, "nouser": true, "users": true,
	"_netdev": true, "nofail": true, "dev": true, "nodev": true, "suid": true, "nosuid": true, "exec": true, "noexec": true,
	"atime": true, "noatime": true, "relatime": true, "nodiratime": true, "strictatime": true, "async": true, "sync": true,
}

// ignoredOption reports whether key (the part before '=') is one to
// ignore: the list above, and the x-* and comment= options that fstab
// keeps for systemd and other userspace tools.
func ignoredOption(key string) bool {
	return ignoredOptions[key] || strings.HasPrefix(key, "x-") || key == "comment"
}

// parseMountOptions reads -o values (each comma-separated) into flag
// names and values, in order. It checks the syntax and that each option
// names a flag of cmd; setting them is applyMountOptions'.
func parseMountOptions(cmd *cobra.Command, opts []string) ([][2]string, error) {
	var out [][2]string
	for _, o := range opts {
		for _, item := range strings.Split(o, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			key, value, hasValue := strings.Cut(item, "=")
			if ignoredOption(key) {
				continue
			}
			name := strings.ReplaceAll(key, "_", "-")
			f := cmd.Flags().Lookup(name)
			if f == nil || name == "options" || name == "help" || name == "version" {
				return nil, usagef("unknown mount option %q (every flag of 'dsmount mount --help' is an option, e.g. cache_dir=/nvme/dsmount,allow_other)", key)
			}
			if !hasValue {
				if f.Value.Type() != "bool" {
					return nil, usagef("mount option %s needs a value (%s=...)", key, key)
				}
				value = "true"
			}
			out = append(out, [2]string{name, value})
		}
	}
	return out, nil
}

// applyMountOptions sets cmd's flags from its -o options. An option for a
// flag also given as --flag is refused: one of the two would be ignored.
func applyMountOptions(cmd *cobra.Command, opts []string) error {
	set, err := parseMountOptions(cmd, opts)
	if err != nil {
		return err
	}
	fromOption := map[string]bool{}
	for _, kv := range set {
		name, value := kv[0], kv[1]
		if cmd.Flags().Changed(name) && !fromOption[name] {
			return usagef("--%s is given both as a flag and as the mount option %s", name, strings.ReplaceAll(name, "-", "_"))
		}
		if err := setFrom(cmd, cmd.Flags().Lookup(name), value, "mount option "+strings.ReplaceAll(name, "-", "_")); err != nil {
			return usagef("mount option %s=%q: %v", strings.ReplaceAll(name, "-", "_"), value, err)
		}
		fromOption[name] = true
	}
	return nil
}

// fuseHelperArgs recognises how mount.fuse3 (mount -t fuse.dsmount, an
// fstab line) runs a filesystem, `dsmount SOURCE MOUNTPOINT [-o OPTS]`, and
// returns it as `mount --daemon SOURCE MOUNTPOINT [-o OPTS]`: the helper
// waits for the program to return once the filesystem is mounted. Anything
// else is returned as it is.
func fuseHelperArgs(args []string, isCommand func(string) bool) []string {
	if len(args) < 2 || isCommand(args[0]) || strings.HasPrefix(args[0], "-") || strings.HasPrefix(args[1], "-") {
		return args
	}
	if !strings.Contains(args[0], "://") && !strings.HasPrefix(args[0], "/") {
		return args
	}
	return append([]string{"mount", "--daemon"}, args...)
}

// optionsHelp is the -o flag's help.
const optionsHelp = "mount options, as mount(8) and fstab give them: each flag as NAME=VALUE or a bare NAME for a boolean, '_' for '-' (cache_dir=/nvme/c,cache_size=500G,allow_other); defaults, rw, ro, _netdev, nofail, noauto and x-* are accepted and ignored"
