package test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/dsmount/dsmount/test/testenv"
)

// TestLocalSymlinksLeadingOutside mounts a directory holding symlinks that
// stay inside it and symlinks that lead outside it, to a file and to a
// directory. The mount must show the former with their targets' bytes, hide
// the latter (and say so in the log), and never serve a byte of the outside
// file: not through a listed link, not through one retargeted outside after
// the listing. With --follow-external-symlinks the outside file is served.
func TestLocalSymlinksLeadingOutside(t *testing.T) {
	parent := t.TempDir()
	src, outside := filepath.Join(parent, "src"), filepath.Join(parent, "outside")
	secret := []byte("SECRET: a file beside the dataset\n")
	a, b := []byte("file a inside the dataset\n"), []byte("file b inside the dataset\n")
	for path, data := range map[string][]byte{
		filepath.Join(src, "data", "a.txt"):         a,
		filepath.Join(src, "data", "b.txt"):         b,
		filepath.Join(outside, "secret.txt"):        secret,
		filepath.Join(outside, "dir", "nested.txt"): secret,
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"in.txt":      "data/a.txt",
		"abs-in.txt":  filepath.Join(src, "data", "a.txt"),
		"late.txt":    "data/b.txt", // retargeted outside after the listing
		"out.txt":     filepath.Join(outside, "secret.txt"),
		"out-rel.txt": "../outside/secret.txt",
		"outdir":      outside,
	} {
		if err := os.Symlink(target, filepath.Join(src, link)); err != nil {
			t.Fatal(err)
		}
	}

	d := testenv.StartMount(t, testenv.MountConfig{
		Bin: dsmountBin, Source: src, Mountpoint: t.TempDir(), Args: []string{"--cache-dir", t.TempDir()},
	})
	mp := d.Dir()
	files := walkFiles(t, mp)
	if want := []string{"abs-in.txt", "data/a.txt", "data/b.txt", "in.txt", "late.txt"}; strings.Join(files, "|") != strings.Join(want, "|") {
		t.Errorf("the mount shows %q, want %q", files, want)
	}
	for _, f := range []string{"in.txt", "abs-in.txt"} {
		if got, err := os.ReadFile(filepath.Join(mp, f)); err != nil || !bytes.Equal(got, a) {
			t.Errorf("%s (a link inside the source): %q, %v", f, got, err)
		}
	}
	for _, f := range []string{"out.txt", "out-rel.txt", "outdir/secret.txt", "outdir/dir/nested.txt"} {
		if got, err := os.ReadFile(filepath.Join(mp, f)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s (leads outside): read %q, %v; want it absent", f, got, err)
		}
	}
	var warned []string
	for _, rec := range d.LogRecords("WARN") {
		if msg, _ := rec["msg"].(string); strings.Contains(msg, "leads outside the source directory") {
			link, _ := rec["link"].(string)
			warned = append(warned, filepath.Base(link))
		}
	}
	sort.Strings(warned)
	if strings.Join(warned, "|") != "out-rel.txt|out.txt" {
		t.Errorf("warnings name the links %q, want out-rel.txt and out.txt; log:\n%s", warned, d.Stderr())
	}

	// A link listed while inside, turned outside before its first read.
	late := filepath.Join(src, "late.txt")
	if err := os.Remove(late); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), late); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(mp, "late.txt"))
	if err == nil || bytes.Contains(got, []byte("SECRET")) {
		t.Errorf("late.txt, retargeted outside after the listing: read %q, %v; want a failure", got, err)
	} else if !errors.Is(err, syscall.EACCES) {
		t.Errorf("late.txt, retargeted outside after the listing: %v, want EACCES", err)
	}
	for _, f := range walkFiles(t, mp) {
		if got, _ := os.ReadFile(filepath.Join(mp, f)); bytes.Contains(got, []byte("SECRET")) {
			t.Errorf("%s served the outside file's bytes", f)
		}
	}
	if d.Exited() {
		t.Fatalf("dsmount exited: %v", d.ExitState())
	}
	d.Stop()

	// The opt-in follows links wherever they lead (late.txt now too).
	d = testenv.StartMount(t, testenv.MountConfig{
		Bin: dsmountBin, Source: src, Mountpoint: t.TempDir(),
		Args: []string{"--cache-dir", t.TempDir(), "--follow-external-symlinks"},
	})
	for _, f := range []string{"out.txt", "out-rel.txt", "late.txt"} {
		if got, err := os.ReadFile(filepath.Join(d.Dir(), f)); err != nil || !bytes.Equal(got, secret) {
			t.Errorf("%s with --follow-external-symlinks: %q, %v; want the outside file", f, got, err)
		}
	}
	d.NoErrorLogs()
	d.Stop()
}

// walkFiles lists the regular files under dir, relative and sorted.
func walkFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", dir, err)
	}
	sort.Strings(out)
	return out
}
