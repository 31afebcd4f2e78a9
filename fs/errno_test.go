package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
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
