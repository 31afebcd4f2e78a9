package test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dsmount/dsmount/test/testenv"
)

// TestRemountRightAfterUnmount: `dsmount unmount` returns once the kernel
// has unmounted, before the daemon has forgotten the mount; a `dsmount
// mount` of the same place right after must wait for that, not be refused
// as "already mounted by this daemon" (the soak met it). Twenty rounds of
// unmount and mount, back to back, through one daemon, each mount
// serving its file.
func TestRemountRightAfterUnmount(t *testing.T) {
	src, cacheDir, mp := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("remounted"), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.StartDaemon(t, testenv.DaemonConfig{Bin: dsmountBin, Args: []string{"--cache-dir", cacheDir, "--cache-size", "64M"}})
	for round := range 20 {
		testenv.JoinMount(t, dsmountBin, nil, src, mp, cliPrompt, "--cache-dir", cacheDir)
		if b, err := os.ReadFile(filepath.Join(mp, "f")); err != nil || string(b) != "remounted" {
			t.Fatalf("round %d: read %q, %v through the mount", round, b, err)
		}
		if r := testenv.RunCLI(dsmountBin, nil, cliPrompt, "unmount", mp); r.ExitCode != 0 {
			t.Fatalf("round %d: dsmount unmount: exit %d: %s", round, r.ExitCode, r.Stderr)
		}
	}
}
