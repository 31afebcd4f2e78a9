package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
)

// TestToErrno: every kind of backend failure, every error the cache
// returns to a read, a cancelled read and anything else map to the errno
// the package doc promises, bare or wrapped (as the backends wrap them,
// with a cause, and as callers wrap them again with %w). A backend error
// says what failed: the kind decides, not an errno buried in its cause
// (a connection reset reaching the store is EIO to the reader, not
// ECONNRESET).
func TestToErrno(t *testing.T) {
	kinds := []struct {
		kind error
		want syscall.Errno
	}{
		{backend.ErrNotFound, syscall.ENOENT},
		{backend.ErrPermission, syscall.EACCES},
		{backend.ErrInvalid, syscall.EINVAL},
		{backend.ErrChanged, syscall.EIO},
		{backend.ErrThrottled, syscall.EIO},
		{backend.ErrUnavailable, syscall.EIO},
	}
	type tc struct {
		name string
		err  error
		want syscall.Errno
	}
	cases := []tc{
		{"nil", nil, 0},
		{"bare EOF (the read reached the end)", io.EOF, 0},
		{"wrapped EOF (a failure)", fmt.Errorf("read: %w", io.EOF), syscall.EIO},
		{"unexpected EOF", io.ErrUnexpectedEOF, syscall.EIO},
		{"context.Canceled", context.Canceled, syscall.EINTR},
		{"wrapped context.Canceled", fmt.Errorf("chunk 3: %w", context.Canceled), syscall.EINTR},
		{"a store read cancelled", backend.Wrap("read", "k", backend.ErrUnavailable, context.Canceled), syscall.EINTR},
		{"context.DeadlineExceeded", context.DeadlineExceeded, syscall.EIO},
		{"cache.ErrClosed", cache.ErrClosed, syscall.EIO},
		{"cache.ErrClosed wrapped", fmt.Errorf("%w: its mount is closing", cache.ErrClosed), syscall.EIO},
		{"cache.ErrFull", cache.ErrFull, syscall.EIO},
		{"cache.ErrNotCached", cache.ErrNotCached, syscall.EIO},
		{"cache.ErrNoSpace", cache.ErrNoSpace, syscall.EIO},
		{"an errno", syscall.ENOSPC, syscall.ENOSPC},
		{"a path error of the cache's disk", &os.PathError{Op: "pread", Path: "/c/x", Err: syscall.EIO}, syscall.EIO},
		{"a wrapped errno", fmt.Errorf("cache file: %w", &os.PathError{Op: "open", Path: "/c/x", Err: syscall.EMFILE}), syscall.EMFILE},
		{"fs.ErrNotExist of no backend", fmt.Errorf("cache: %w", fs.ErrNotExist), syscall.EIO},
		{"anything else", errors.New("something unforeseen"), syscall.EIO},
	}
	for _, k := range kinds {
		name := k.kind.Error()
		cases = append(cases,
			tc{name + " bare", k.kind, k.want},
			tc{name + " as backends make it", backend.Wrap("read", "a/b", k.kind, errors.New("the store said so")), k.want},
			tc{name + " without a cause", backend.Wrap("read", "a/b", k.kind, nil), k.want},
			tc{name + " wrapped again", fmt.Errorf("chunk 2 of a/b: %w", backend.Errorf("read", "a/b", k.kind, "status %d", 503)), k.want},
			// A kind with an errno in its cause (posix: the file's
			// read failed with it; S3: the connection did).
			tc{name + " caused by ECONNRESET", backend.Wrap("read", "a/b", k.kind, &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}), k.want},
		)
	}
	for _, c := range cases {
		if got := toErrno(c.err); got != c.want {
			t.Errorf("%s (%v): %v (%d), want %v (%d)", c.name, c.err, got, int(got), c.want, int(c.want))
		}
	}
}

// TestReadErrorsThroughMount: a read whose object the store fails to
// serve fails in the reader with the errno of the store's error kind, the
// object replaced in the store since it was listed (a new version) with
// EIO; each is counted as a read error, and the mount goes on serving
// the other files.
func TestReadErrorsThroughMount(t *testing.T) {
	files := map[string]int{"ok": 3000, "changed": 2*testChunk + 1, "missing": 10, "denied": 10, "invalid": 10, "down": 10, "throttled": 10}
	s := failingStore{store: newStore(files), fail: map[string]error{
		"missing": backend.ErrNotFound, "denied": backend.ErrPermission, "invalid": backend.ErrInvalid,
		"down": backend.ErrUnavailable, "throttled": backend.ErrThrottled,
	}}
	sv := serve(t, s, s.listing(), nil)
	s.Put("changed", payload("changed", 99)) // a new version, after the listing
	want := map[string]syscall.Errno{
		"changed": syscall.EIO, "missing": syscall.ENOENT, "denied": syscall.EACCES, "invalid": syscall.EINVAL,
		"down": syscall.EIO, "throttled": syscall.EIO,
	}
	for key, errno := range want {
		got, err := os.ReadFile(filepath.Join(sv.dir, key))
		if !errors.Is(err, errno) {
			t.Errorf("reading %s: %d bytes, %v; want %v", key, len(got), err, errno)
		}
	}
	if n := sv.m.readErrors.Load(); n < int64(len(want)) {
		t.Errorf("%d read errors counted; want at least %d", n, len(want))
	}
	sv.checkFile(t, "ok", payload("ok", 3000))
}

// TestWritesRefused: whatever would change the tree fails with EROFS,
// on a no-open mount (where a write open reaches no OPEN, and the write
// itself is refused) as on one with the fast path off; the tree and the
// bytes stay as they were.
func TestWritesRefused(t *testing.T) {
	for _, mode := range []FastPath{FastPathNoOpen, FastPathOff} {
		t.Run(string(mode), func(t *testing.T) {
			s := newStore(map[string]int{"f": 100, "d/g": 200})
			sv := serve(t, s, s.listing(), func(c *Config) { c.FastPath = mode })
			at := func(p string) string { return filepath.Join(sv.dir, p) }
			sv.checkFile(t, "f", payload("f", 100)) // a first open: no-open is in force after it
			ops := []struct {
				name string
				do   func() error
			}{
				{"write", func() error {
					f, err := os.OpenFile(at("f"), os.O_WRONLY, 0)
					if err != nil {
						return err
					}
					defer f.Close()
					_, err = f.Write([]byte("x"))
					return err
				}},
				{"open for appending", func() error {
					f, err := os.OpenFile(at("d/g"), os.O_RDWR|os.O_APPEND, 0)
					if err != nil {
						return err
					}
					defer f.Close()
					_, err = f.Write([]byte("x"))
					return err
				}},
				{"truncate", func() error { return os.Truncate(at("f"), 0) }},
				{"chmod", func() error { return os.Chmod(at("f"), 0o777) }},
				{"create", func() error { return os.WriteFile(at("new"), []byte("x"), 0o644) }},
				{"create in a directory", func() error { return os.WriteFile(at("d/new"), nil, 0o644) }},
				{"a control session below the root", func() error { return os.WriteFile(at("d/"+ControlName+".x"), nil, 0o600) }},
				{"mkdir", func() error { return os.Mkdir(at("newdir"), 0o755) }},
				{"mknod", func() error { return syscall.Mknod(at("fifo"), syscall.S_IFIFO|0o644, 0) }},
				{"unlink", func() error { return syscall.Unlink(at("f")) }},
				{"rmdir", func() error { return syscall.Rmdir(at("d")) }},
				{"rename", func() error { return os.Rename(at("f"), at("renamed")) }},
				{"symlink", func() error { return os.Symlink("f", at("link")) }},
				{"link", func() error { return os.Link(at("f"), at("hard")) }},
			}
			for _, op := range ops {
				if err := op.do(); !errors.Is(err, syscall.EROFS) {
					t.Errorf("%s: %v; want EROFS", op.name, err)
				}
			}
			names := func(dir string) []string {
				es, err := os.ReadDir(at(dir))
				if err != nil {
					t.Fatal(err)
				}
				var ns []string
				for _, e := range es {
					ns = append(ns, e.Name())
				}
				return ns
			}
			if got := names("."); !slices.Equal(got, []string{"d", "f"}) {
				t.Errorf("the root holds %q after the refusals", got)
			}
			if got := names("d"); !slices.Equal(got, []string{"g"}) {
				t.Errorf("d holds %q after the refusals", got)
			}
			sv.checkFile(t, "f", payload("f", 100))
			sv.checkFile(t, "d/g", payload("d/g", 200))
		})
	}
}
