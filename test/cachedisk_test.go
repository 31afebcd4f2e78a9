package test

import (
	"path/filepath"
	"testing"

	"github.com/dsmount/dsmount/test/testenv"
)

// TestCacheDiskRequestsPerFile guards what an epoch served from the cache
// disk costs in FUSE round trips, by the kernel's own count (its
// fuse_request_send tracepoint): with every file cached and the mount's
// page cache dropped, each small file costs one READ, no LOOKUP (the
// entries stay cached), no OPEN, FLUSH or RELEASE (no-open), and at most
// one GETATTR (the atime a READ invalidates on a read-write superblock;
// issue 37 item 5 removes it).
func TestCacheDiskRequestsPerFile(t *testing.T) {
	src := t.TempDir()
	paths := testenv.GenerateDataset(t, src, testenv.DatasetSpec{Seed: 37, SmallFiles: 200, SmallMax: 128 << 10, FilesPerDir: 50, MaxDepth: 2})
	_, mp := mountLocal(t, src)
	if r := testenv.RunCLI(dsmountBin, nil, cliPrompt, "warm", mp); r.ExitCode != 0 {
		t.Fatalf("dsmount warm: exit %d: %s", r.ExitCode, r.Stderr)
	}
	testenv.CompareTree(t, src, mp, paths, 4, 1)
	for _, p := range paths {
		if err := testenv.DropPageCache(filepath.Join(mp, p)); err != nil {
			t.Fatal(err)
		}
	}
	before := testenv.Stats(t, dsmountBin, mp).Mount
	tr, err := testenv.StartFuseTrace(mp)
	if err != nil {
		t.Fatalf("counting the mount's FUSE requests: %v", err)
	}
	testenv.CompareTree(t, src, mp, paths, 4, 2)
	ops, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	after := testenv.Stats(t, dsmountBin, mp).Mount
	n := int64(len(paths))
	t.Logf("per file: %s (%d files)", ops.PerFile(len(paths)), n)
	if ops["FUSE_READ"] == 0 || ops["FUSE_READ"] > n || after.Reads-before.Reads != ops["FUSE_READ"] {
		t.Errorf("%d READs for %d files (the daemon counted %d): want one a file at most, and some (the page cache was dropped)", ops["FUSE_READ"], n, after.Reads-before.Reads)
	}
	if after.Misses != before.Misses {
		t.Errorf("the epoch fetched from the source (%d misses): every file was cached", after.Misses-before.Misses)
	}
	for _, op := range []string{"FUSE_LOOKUP", "FUSE_OPEN", "FUSE_FLUSH", "FUSE_RELEASE", "FUSE_IOCTL"} {
		if ops[op] != 0 {
			t.Errorf("%d %s requests in a cache-disk epoch of %d files: want none", ops[op], op, n)
		}
	}
	if ops["FUSE_GETATTR"] > n {
		t.Errorf("%d GETATTRs for %d files: want one a file at most", ops["FUSE_GETATTR"], n)
	}
	if tot := ops.Total(); tot > 2*n {
		t.Errorf("%d FUSE requests for %d files (%s): want at most 2 a file", tot, n, ops.PerFile(len(paths)))
	}
}
