package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/test/testenv"
)

// TestCacheDiskRequestsPerFile guards what an epoch served from the cache
// disk costs in FUSE round trips, by the kernel's own count (its
// fuse_request_send tracepoint): with every file cached and the mount's
// page cache dropped, each small file costs one READ, no LOOKUP (the
// entries stay cached), no OPEN, FLUSH or RELEASE (no-open), and at most
// one GETATTR (the atime a READ invalidates on a read-write superblock;
// issue 37 item 5 removes it).
// cachedMount mounts a dataset made to spec, warms it, and reads it once
// through the mount (checked against the source), so that every file is
// cached and the kernel holds every inode.
func cachedMount(t *testing.T, spec testenv.DatasetSpec) (src, mp string, paths []string) {
	t.Helper()
	src = t.TempDir()
	paths = testenv.GenerateDataset(t, src, spec)
	_, mp = mountLocal(t, src)
	if r := testenv.RunCLI(dsmountBin, nil, cliPrompt, "warm", mp); r.ExitCode != 0 {
		t.Fatalf("dsmount warm: exit %d: %s", r.ExitCode, r.Stderr)
	}
	testenv.CompareTree(t, src, mp, paths, 4, 1)
	return src, mp, paths
}

func TestCacheDiskRequestsPerFile(t *testing.T) {
	src, mp, paths := cachedMount(t, testenv.DatasetSpec{Seed: 37, SmallFiles: 200, SmallMax: 128 << 10, FilesPerDir: 50, MaxDepth: 2})
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
	// Every file is at most 128 KiB, and 4 readers read at once: a READ
	// served beside another goes to the cache disk with the others in
	// flight (readbatch.go), not by a pread of its own; one served alone
	// may go the plain way.
	if got, reads := after.BatchedReads-before.BatchedReads, after.Reads-before.Reads; got < reads/2 {
		t.Errorf("%d of %d READs of whole small cached files were batched; want at least half", got, reads)
	}
	if after.Misses != before.Misses {
		t.Errorf("the epoch fetched from the source (%d misses): every file was cached", after.Misses-before.Misses)
	}
	for _, op := range []string{"FUSE_LOOKUP", "FUSE_OPEN", "FUSE_FLUSH", "FUSE_RELEASE", "FUSE_IOCTL"} {
		if ops[op] != 0 {
			t.Errorf("%d %s requests in a cache-disk epoch of %d files: want none", ops[op], op, n)
		}
	}
	// The superblock is read-only, so the first epoch's READs left the
	// files' attributes valid: CompareTree's fstat asks for none.
	if ops["FUSE_GETATTR"] > 2 {
		t.Errorf("%d GETATTRs for %d files: want none", ops["FUSE_GETATTR"], n)
	}
	if tot := ops.Total(); tot > n+2 {
		t.Errorf("%d FUSE requests for %d files (%s): want a READ a file at most, and nothing else", tot, n, ops.PerFile(len(paths)))
	}
}

// TestDeclaredCacheDiskPushes: with an order declared over files that
// are cached but no longer in the page cache, the daemon pushes them into
// the page cache ahead of the readers, so that reading them sends the
// daemon no READ but for the files it leaves to mark the readers' place
// (one in 32), and every byte read is the source's.
func TestDeclaredCacheDiskPushes(t *testing.T) {
	src, mp, paths := cachedMount(t, testenv.DatasetSpec{Seed: 38, SmallFiles: 256, SmallMax: 128 << 10, FilesPerDir: 64, MaxDepth: 2})
	var order []string
	nonEmpty := 0
	for _, p := range paths {
		if err := testenv.DropPageCache(filepath.Join(mp, p)); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(filepath.Join(src, p)); err == nil && st.Size() > 0 {
			order = append(order, p)
			nonEmpty++
		}
	}
	list := filepath.Join(t.TempDir(), "order.txt")
	if err := os.WriteFile(list, []byte(strings.Join(order, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := testenv.RunCLI(dsmountBin, nil, cliPrompt, "order", mp, "--job", "push", "--epoch", "1", list); r.ExitCode != 0 {
		t.Fatalf("dsmount order: exit %d: %s", r.ExitCode, r.Stderr)
	}
	markers := int64(nonEmpty / 32)
	want := int64(nonEmpty) - markers
	var job control.JobStats
	err := testenv.WaitFor(30*time.Second, 20*time.Millisecond, "the declared files pushed", func() (bool, error) {
		var ok bool
		job, ok = testenv.Job(testenv.Stats(t, dsmountBin, mp).Mount, "push")
		return ok && job.Pushed >= want, nil
	})
	if err != nil {
		t.Fatalf("%v (pushed %d of the %d not left as markers)", err, job.Pushed, want)
	}
	tr, err := testenv.StartFuseTrace(mp)
	if err != nil {
		t.Fatalf("counting the mount's FUSE requests: %v", err)
	}
	testenv.CompareTree(t, src, mp, order, 4, 2)
	ops, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed %d of %d files; per file read: %s", job.Pushed, nonEmpty, ops.PerFile(nonEmpty))
	if ops["FUSE_READ"] > markers {
		t.Errorf("%d READs reading %d files of which %d were pushed: want at most the %d left as markers", ops["FUSE_READ"], nonEmpty, job.Pushed, markers)
	}
	if job.Pushed > want {
		t.Errorf("%d files pushed: the order leaves %d of its %d as markers, so at most %d", job.Pushed, markers, nonEmpty, want)
	}
}
