package test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/test/testenv"
)

// TestOverBoundDeclarationsAreRefusedClearly: through a real mount and
// the CLI, another user's declaration of more bytes than a request of
// theirs may have (64 MiB), and a job past their bound (16), are each
// refused with the daemon's reason on one line, not with the errno of
// the refused write (EBUSY said "device or resource busy"); root's job
// keeps its order and progress through both, and declares its next
// epoch after them.
func TestOverBoundDeclarationsAreRefusedClearly(t *testing.T) {
	src := publicDir(t)
	paths := testenv.GenerateDataset(t, src, testenv.DatasetSpec{Seed: 71, SmallFiles: 20, FilesPerDir: 20, MaxDepth: 1})
	mp, cacheDir := publicDir(t), t.TempDir()
	testenv.StartMount(t, testenv.MountConfig{Bin: dsmountBin, Source: src, Mountpoint: mp,
		Args: []string{"--cache-dir", cacheDir, "--cache-size", "1G", "--allow-other"}})
	bin := binForAll(t)
	list := filepath.Join(publicDir(t), "order.txt")
	if err := os.WriteFile(list, []byte(strings.Join(paths, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runAs(t, nil, dsmountBin, "order", mp, "--job", "train", "--epoch", "3", list); r.ExitCode != 0 {
		t.Fatalf("root declaring its job: exit %d: %s", r.ExitCode, r.Stderr)
	}
	for _, p := range paths[:3] {
		if _, err := os.ReadFile(filepath.Join(mp, p)); err != nil {
			t.Fatal(err)
		}
	}
	state := func() control.JobStats {
		t.Helper()
		// Decoded leniently: this test is about the jobs, not every
		// field stats has.
		r := runAs(t, nil, dsmountBin, "stats", mp, "--json")
		var s control.StatsReport
		if err := json.Unmarshal([]byte(r.Stdout), &s); r.ExitCode != 0 || err != nil {
			t.Fatalf("dsmount stats: exit %d, %v: %s", r.ExitCode, err, r.Stderr)
		}
		j, ok := testenv.Job(s.Mount, "train")
		if !ok {
			t.Fatal("root's job is gone")
		}
		// What the clock and prefetch change.
		j.Window, j.ReadRate, j.Prefetched, j.IdleSeconds = 0, 0, 0, 0
		return j
	}
	before := state()
	if before.Epoch != 3 || before.Declared != len(paths) || before.Read != 3 {
		t.Fatalf("root's job after 3 reads: %+v", before)
	}
	refused := func(what string, r testenv.CLIResult, want string) {
		t.Helper()
		msg := strings.TrimSuffix(r.Stderr, "\n")
		if r.ExitCode == 0 || !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: exit %d, stderr %q; want one line with %q", what, r.ExitCode, r.Stderr, want)
		}
		if after := state(); after != before {
			t.Errorf("%s changed root's job:\n before %+v\n after  %+v", what, before, after)
		}
	}

	// 1.1M lines of 64 bytes: 70 MB, over the 64 MiB of another user's
	// request.
	line := "d/" + strings.Repeat("x", 61) + "\n"
	big := filepath.Join(publicDir(t), "big.txt")
	if err := os.WriteFile(big, bytes.Repeat([]byte(line), 1_100_000), 0o644); err != nil {
		t.Fatal(err)
	}
	refused("a 70 MB declaration", runAs(t, nobody, bin, "order", mp, "--job", "big", "--epoch", "0", big),
		"a request of this user may have at most 67108864")

	for i := range 16 {
		if r := runAs(t, nobody, bin, "order", mp, "--job", "j"+strconv.Itoa(i), "--epoch", "0", list); r.ExitCode != 0 {
			t.Fatalf("another user's job %d: exit %d: %s", i+1, r.ExitCode, r.Stderr)
		}
	}
	refused("a 17th job of a user", runAs(t, nobody, bin, "order", mp, "--job", "j16", "--epoch", "0", list), "a user may have at most 16 jobs on a mount")

	if r := runAs(t, nil, dsmountBin, "order", mp, "--job", "train", "--epoch", "4", list); r.ExitCode != 0 {
		t.Fatalf("root declaring its next epoch afterwards: exit %d: %s", r.ExitCode, r.Stderr)
	}
}
