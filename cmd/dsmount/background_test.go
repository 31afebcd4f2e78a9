package main

import (
	"errors"
	"os"
	"slices"
	"testing"
)

// TestDaemonCommand: inside a systemd unit (INVOCATION_ID, with systemd
// running) the background daemon starts through systemd-run --scope, in a
// scope named for its cache dir and this process; elsewhere, or without
// systemd-run, or told not to, it starts as it is.
func TestDaemonCommand(t *testing.T) {
	args := []string{"mount", "/src", "/mnt"}
	found := func(string) (string, error) { return "/usr/bin/systemd-run", nil }
	missing := func(string) (string, error) { return "", errors.New("not found") }
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	_, systemd := os.Stat("/run/systemd/system")

	name, argv := daemonCommand("/bin/dsmount", args, "/cache", found, env(nil))
	if (name != "/bin/dsmount" || !slices.Equal(argv, args)) && !inUnitCgroup() {
		t.Errorf("outside a unit: %s %q", name, argv)
	}
	name, argv = daemonCommand("/bin/dsmount", args, "/cache", missing, env(map[string]string{"INVOCATION_ID": "x"}))
	if name != "/bin/dsmount" && systemdRun(missing) == "" {
		t.Errorf("without systemd-run: %s %q", name, argv)
	}
	name, argv = daemonCommand("/bin/dsmount", args, "/cache", found, env(map[string]string{"INVOCATION_ID": "x", noScopeEnv: "1"}))
	if name != "/bin/dsmount" {
		t.Errorf("with %s: %s %q", noScopeEnv, name, argv)
	}
	name, argv = daemonCommand("/bin/dsmount", args, "/cache", found, env(map[string]string{"INVOCATION_ID": "x"}))
	if systemd != nil {
		if name != "/bin/dsmount" {
			t.Errorf("inside a unit, but systemd is not running here: %s %q", name, argv)
		}
		return
	}
	if name != "/usr/bin/systemd-run" || !slices.Contains(argv, "--scope") || !slices.Equal(argv[len(argv)-4:], append([]string{"/bin/dsmount"}, args...)) {
		t.Errorf("inside a unit: %s %q; want systemd-run --scope ... -- /bin/dsmount %q", name, argv, args)
	}
}
