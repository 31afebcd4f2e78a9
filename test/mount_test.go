package test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// TestLocalSource mounts a local directory holding the shared dataset and
// checks that everything reads back byte for byte (8 readers, random order),
// that directory listings, sizes and mtimes match the source, and that every
// kind of write fails with EROFS and changes nothing.
func TestLocalSource(t *testing.T) {
	src, paths := sharedDataset(t)
	mp, cacheDir := t.TempDir(), t.TempDir()
	m := testenv.StartMount(t, testenv.MountConfig{
		Bin: dsmountBin, Source: src, Mountpoint: mp,
		Args: []string{"--cache-dir", cacheDir, "--cache-size", "2G"},
	})

	st, err := os.Stat(mp)
	if err != nil || !st.IsDir() {
		t.Fatalf("stat of the mount root: %v, %v", st, err)
	}
	if err := testenv.CompareListings(src, mp); err != nil {
		t.Errorf("listings: %v", err)
	}
	err = testenv.CompareStats(src, mp, paths, func(rel string, want, got os.FileInfo) error {
		if !got.ModTime().Equal(want.ModTime()) {
			return fmt.Errorf("%s: mtime %v through the mount, source has %v", rel, got.ModTime(), want.ModTime())
		}
		return nil
	})
	if err != nil {
		t.Errorf("stat: %v", err)
	}
	// Random preads across chunk boundaries and past EOF on a cold large
	// file, many readers on one file at once, and mmap.
	if err := testenv.RandomReads(src, mp, "large/large-1.bin", 400, 4<<20, 1); err != nil {
		t.Error(err)
	}
	if err := testenv.ReadSameFileParallel(src, mp, "large/large-0.bin", 8, 1<<20); err != nil {
		t.Error(err)
	}
	for _, rel := range []string{"large/large-1.bin", "ünïcødé 文件.bin", "empty.bin"} {
		if err := testenv.MmapCompare(src, mp, rel); err != nil {
			t.Error(err)
		}
	}
	testenv.CompareTree(t, src, mp, paths, 8, 1)

	checkReadOnly(t, mp, src, "with space.txt", "dir with space")

	m.NoErrorLogs()
	m.Stop()

	// Remount on the same cache and leave with `dsmount unmount`.
	m = testenv.StartMount(t, testenv.MountConfig{
		Bin: dsmountBin, Source: src, Mountpoint: mp,
		Args: []string{"--cache-dir", cacheDir, "--cache-size", "2G"},
	})
	testenv.CompareTree(t, src, mp, paths[:500], 8, 2)
	r := testenv.RunCLI(dsmountBin, nil, time.Minute, "unmount", mp)
	if r.ExitCode != 0 {
		t.Fatalf("dsmount unmount: exit %d, stderr %q", r.ExitCode, r.Stderr)
	}
	m.WaitExit(time.Minute)
}

// checkReadOnly tries every kind of change through the mount and wants EROFS
// from each, and no change visible afterwards. file and dir name an existing
// file and an existing non-empty directory, relative to the mount root.
func checkReadOnly(t *testing.T, mp, src, file, dir string) {
	t.Helper()
	f := filepath.Join(mp, file)
	d := filepath.Join(mp, dir)
	before, err := os.ReadFile(f)
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	rootBefore := names(t, mp)
	stBefore, err := os.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	openW := func(flag int) func() error {
		return func() error {
			fh, err := os.OpenFile(f, flag, 0)
			if err == nil {
				fh.Close()
			}
			return err
		}
	}
	ops := []struct {
		name string
		do   func() error
	}{
		{"create a new file", func() error { return os.WriteFile(filepath.Join(mp, "new-file"), []byte("x"), 0o644) }},
		{"create a file in a subdirectory", func() error { return os.WriteFile(filepath.Join(d, "new-file"), []byte("x"), 0o644) }},
		{"O_EXCL create", func() error { return excl(filepath.Join(mp, "new-excl")) }},
		{"open O_WRONLY", openW(os.O_WRONLY)},
		{"open O_RDWR", openW(os.O_RDWR)},
		{"open O_TRUNC", openW(os.O_WRONLY | os.O_TRUNC)},
		{"open O_APPEND", openW(os.O_WRONLY | os.O_APPEND)},
		{"mkdir", func() error { return os.Mkdir(filepath.Join(mp, "new-dir"), 0o755) }},
		{"rename a file", func() error { return os.Rename(f, filepath.Join(mp, "renamed")) }},
		{"rename a directory", func() error { return os.Rename(d, filepath.Join(mp, "renamed-dir")) }},
		{"unlink", func() error { return os.Remove(f) }},
		{"rmdir", func() error { return syscall.Rmdir(d) }},
		{"chmod", func() error { return os.Chmod(f, 0o777) }},
		{"chown", func() error { return os.Chown(f, 1234, 1234) }},
		{"truncate", func() error { return os.Truncate(f, 0) }},
		{"utimes", func() error { return os.Chtimes(f, time.Unix(1, 0), time.Unix(1, 0)) }},
		{"symlink", func() error { return os.Symlink("target", filepath.Join(mp, "new-link")) }},
		{"hard link", func() error { return os.Link(f, filepath.Join(mp, "new-hardlink")) }},
		{"setxattr", func() error { return syscall.Setxattr(f, "user.dsmount-test", []byte("v"), 0) }},
		{"mknod fifo", func() error { return syscall.Mkfifo(filepath.Join(mp, "new-fifo"), 0o644) }},
	}
	for _, op := range ops {
		err := op.do()
		// xattrs are disabled on the mount (they cost a round trip per file
		// on every listing), so the kernel itself refuses setxattr with
		// EOPNOTSUPP without asking dsmount: refused just as well.
		if op.name == "setxattr" && errors.Is(err, syscall.EOPNOTSUPP) {
			continue
		}
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s through the mount: got %v, want EROFS", op.name, err)
		}
	}
	after, err := os.ReadFile(f)
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("%s changed or became unreadable after the write attempts: %v", file, err)
	}
	if err := testenv.CompareFile(src, file, after); err != nil {
		t.Errorf("after the write attempts: %v", err)
	}
	st, err := os.Stat(f)
	if err != nil || st.Mode() != stBefore.Mode() || !st.ModTime().Equal(stBefore.ModTime()) || st.Size() != stBefore.Size() {
		t.Errorf("stat %s changed after the write attempts: before %v %v %d, after %v (err %v)",
			file, stBefore.Mode(), stBefore.ModTime(), stBefore.Size(), st, err)
	}
	if got := names(t, mp); fmt.Sprint(got) != fmt.Sprint(rootBefore) {
		t.Errorf("root listing changed after the write attempts:\n got %q\nwant %q", got, rootBefore)
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("readdir %s: %v", dir, err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func excl(name string) error {
	fh, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		fh.Close()
	}
	return err
}
