package posix

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/backendtest"
)

func write(t *testing.T, root, key string, data []byte) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The shared checks of backend/backendtest, by the names these tests use.
var (
	listAll  = backendtest.ListAll
	keys     = backendtest.SortedKeys
	mustKind = backendtest.MustKind
)

func TestList(t *testing.T) {
	root := t.TempDir()
	write(t, root, "top.bin", []byte("hello"))
	write(t, root, "a/b/c/deep.txt", []byte("deep"))
	write(t, root, "empty", nil)
	write(t, root, "with space/ünïcödé 名前.dat", []byte("xyz"))
	write(t, root, "outside/target.bin", bytes.Repeat([]byte{7}, 1000))
	if err := os.MkdirAll(filepath.Join(root, "emptydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A link to a file is an object with the target's size; a link to a
	// directory (here an ancestor, which would loop) and a dangling link
	// are not followed.
	must(t, os.Symlink("outside/target.bin", filepath.Join(root, "link.bin")))
	must(t, os.Symlink("..", filepath.Join(root, "a/loop")))
	must(t, os.Symlink("nowhere", filepath.Join(root, "dangling")))

	b, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	got := listAll(t, b)
	want := []string{"a/b/c/deep.txt", "empty", "link.bin", "outside/target.bin", "top.bin", "with space/ünïcödé 名前.dat"}
	if g := keys(got); strings.Join(g, "|") != strings.Join(want, "|") {
		t.Fatalf("keys:\n got %q\nwant %q", g, want)
	}
	if o := got["link.bin"]; o.Size != 1000 || o.Version != got["outside/target.bin"].Version {
		t.Errorf("symlink object %+v should describe its target %+v", o, got["outside/target.bin"])
	}
	if o := got["empty"]; o.Size != 0 || o.Version == "" || o.ModTime.IsZero() {
		t.Errorf("empty file object %+v", o)
	}

	// Stat agrees with List.
	for k, o := range got {
		s, err := b.Stat(context.Background(), k)
		if err != nil {
			t.Fatalf("Stat(%q): %v", k, err)
		}
		if s != o {
			t.Errorf("Stat(%q) = %+v, List gave %+v", k, s, o)
		}
	}
}

func TestListStopsOnCallbackError(t *testing.T) {
	root := t.TempDir()
	write(t, root, "a", []byte("1"))
	write(t, root, "b", []byte("2"))
	b, err := New(root)
	must(t, err)
	stop := errors.New("stop")
	calls := 0
	err = b.List(context.Background(), func(backend.Object) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Fatalf("List returned %v after %d calls, want the callback's error after 1", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = b.List(ctx, func(backend.Object) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("List with cancelled ctx: %v", err)
	}
}

func TestListSkipsUnreadableDir(t *testing.T) {
	root := t.TempDir()
	write(t, root, "ok/file", []byte("1"))
	write(t, root, "locked/secret", []byte("2"))
	must(t, os.Chmod(filepath.Join(root, "locked"), 0))
	t.Cleanup(func() { os.Chmod(filepath.Join(root, "locked"), 0o755) })
	var logs bytes.Buffer
	b, err := New(root, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	must(t, err)
	got := listAll(t, b)
	if _, ok := got["ok/file"]; !ok {
		t.Fatalf("readable file missing from %q", keys(got))
	}
	if os.Geteuid() == 0 {
		t.Log("running as root: mode 000 does not stop reads, only the no-failure half is checked")
		return
	}
	if _, ok := got["locked/secret"]; ok || !strings.Contains(logs.String(), "locked") {
		t.Fatalf("unreadable dir not skipped with a warning: keys %q, log %q", keys(got), logs.String())
	}
}

func TestReadAt(t *testing.T) {
	root := t.TempDir()
	data := make([]byte, 10000)
	for i := range data {
		data[i] = byte(i * 31)
	}
	write(t, root, "f", data)
	write(t, root, "zero", nil)
	b, err := New(root)
	must(t, err)
	ctx := context.Background()
	obj, err := b.Stat(ctx, "f")
	must(t, err)

	backendtest.CheckReadAt(t, b, obj, data)

	z, err := b.Stat(ctx, "zero")
	must(t, err)
	if n, err := b.ReadAt(ctx, z, make([]byte, 8), 0); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt on empty file = %d, %v", n, err)
	}
}

func TestReadAtChanged(t *testing.T) {
	root := t.TempDir()
	write(t, root, "f", []byte("version one"))
	b, err := New(root)
	must(t, err)
	ctx := context.Background()
	old, err := b.Stat(ctx, "f")
	must(t, err)

	// Same size, new mtime: an in-place rewrite.
	write(t, root, "f", []byte("version two"))
	future := time.Now().Add(time.Hour)
	must(t, os.Chtimes(filepath.Join(root, "f"), future, future))
	_, err = b.ReadAt(ctx, old, make([]byte, 4), 0)
	mustKind(t, err, backend.ErrChanged)

	// Replacement by rename with size and mtime copied: only the inode
	// differs.
	cur, err := b.Stat(ctx, "f")
	must(t, err)
	write(t, root, "f.tmp", []byte("version 333"))
	must(t, os.Chtimes(filepath.Join(root, "f.tmp"), future, future))
	must(t, os.Rename(filepath.Join(root, "f.tmp"), filepath.Join(root, "f")))
	_, err = b.ReadAt(ctx, cur, make([]byte, 4), 0)
	mustKind(t, err, backend.ErrChanged)

	now, err := b.Stat(ctx, "f")
	must(t, err)
	p := make([]byte, 11)
	if n, err := b.ReadAt(ctx, now, p, 0); n != 11 || err != nil || string(p) != "version 333" {
		t.Fatalf("ReadAt current version = %d, %v, %q", n, err, p)
	}
}

func TestErrors(t *testing.T) {
	root := t.TempDir()
	write(t, root, "f", []byte("x"))
	must(t, os.Mkdir(filepath.Join(root, "dir"), 0o755))
	b, err := New(root)
	must(t, err)
	ctx := context.Background()

	_, err = b.Stat(ctx, "missing")
	mustKind(t, err, backend.ErrNotFound)
	_, err = b.Stat(ctx, "f/under-a-file")
	mustKind(t, err, backend.ErrNotFound)
	_, err = b.Stat(ctx, "dir")
	mustKind(t, err, backend.ErrNotFound)

	obj, err := b.Stat(ctx, "f")
	must(t, err)
	must(t, os.Remove(filepath.Join(root, "f")))
	_, err = b.ReadAt(ctx, obj, make([]byte, 1), 0)
	mustKind(t, err, backend.ErrNotFound)

	for _, key := range []string{"", ".", "..", "../etc/passwd", "a/../../x", "/etc/passwd", "a\x00b", "a//b", "a/./b", "dir/"} {
		_, err := b.Stat(ctx, key)
		mustKind(t, err, backend.ErrInvalid)
		_, err = b.ReadAt(ctx, backend.Object{Key: key, Size: 1}, make([]byte, 1), 0)
		mustKind(t, err, backend.ErrInvalid)
	}
	// Dots inside a name are not a parent reference.
	write(t, root, "a..b", []byte("ok"))
	if _, err := b.Stat(ctx, "a..b"); err != nil {
		t.Fatalf("Stat(a..b): %v", err)
	}
}

func TestNew(t *testing.T) {
	root := t.TempDir()
	write(t, root, "file", []byte("x"))

	_, err := New(filepath.Join(root, "nope"))
	mustKind(t, err, backend.ErrNotFound)
	if !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("message %q should say the directory does not exist", err)
	}
	_, err = New(filepath.Join(root, "file"))
	mustKind(t, err, backend.ErrInvalid)
	_, err = New("")
	mustKind(t, err, backend.ErrInvalid)

	// Relative roots become absolute and clean.
	t.Chdir(root)
	must(t, os.Mkdir("sub", 0o755))
	b, err := New("./sub/..//")
	must(t, err)
	if b.ID() != "file://"+root {
		t.Fatalf("ID = %q, want %q", b.ID(), "file://"+root)
	}
	must(t, b.Close())
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
