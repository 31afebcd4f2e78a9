package posix

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsmount/dsmount/backend"
)

// Options tunes a Backend. The zero value is fine.
type Options struct {
	// Logger receives warnings about parts of the tree List had to skip
	// (unreadable directories, symlinks leading outside). Nil discards them.
	Logger *slog.Logger
	// FollowExternalSymlinks serves symlinks that lead outside the root as
	// the files they reach. Off, such links are skipped, and reads through
	// them fail with backend.ErrPermission: a link in a shared dataset
	// directory must not expose whatever the daemon's user can read.
	FollowExternalSymlinks bool
}

// Backend serves the regular files under one directory.
type Backend struct {
	root     string // absolute, cleaned
	realRoot string // root with its own symlinks resolved
	log      *slog.Logger
	follow   bool // Options.FollowExternalSymlinks
	// rootFile holds the root open (O_PATH): names are resolved beneath
	// it (beneath.go). rootConn reaches its descriptor.
	rootFile  *os.File
	rootConn  syscall.RawConn
	noOpenat2 atomic.Bool // the kernel has no openat2: resolve in user space
	closed    atomic.Bool
}

var _ backend.Backend = (*Backend)(nil)

// New opens the directory root. It fails with backend.ErrNotFound when root
// does not exist, backend.ErrInvalid when it is not a directory and
// backend.ErrPermission when it cannot be read, so a mount fails up front
// rather than on the first listing. At most one Options is used.
func New(root string, opts ...Options) (*Backend, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if root == "" {
		return nil, backend.Errorf("open", root, backend.ErrInvalid, "empty directory path")
	}
	if strings.IndexByte(root, 0) >= 0 {
		return nil, backend.Errorf("open", root, backend.ErrInvalid, "directory path contains a NUL byte")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, backend.Wrap("open", root, backend.ErrInvalid, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, backend.Errorf("open", root, backend.ErrNotFound, "directory %q does not exist", abs)
	case err != nil:
		return nil, backend.Wrap("open", root, kindOf(err), err)
	case !fi.IsDir():
		return nil, backend.Errorf("open", root, backend.ErrInvalid, "%q is not a directory", abs)
	}
	// Reading one entry proves we may list it; a stat alone would succeed
	// on a directory we cannot read.
	d, err := os.Open(abs)
	if err == nil {
		_, err = d.Readdirnames(1)
		d.Close()
		if err == io.EOF {
			err = nil
		}
	}
	if err != nil {
		return nil, backend.Wrap("open", root, kindOf(err), err)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Backend{root: abs, log: log, follow: o.FollowExternalSymlinks}
	if b.realRoot, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, backend.Wrap("open", root, kindOf(err), err)
	}
	if b.rootFile, err = os.OpenFile(abs, unix.O_PATH|unix.O_DIRECTORY, 0); err != nil {
		return nil, backend.Wrap("open", root, kindOf(err), err)
	}
	if b.rootConn, err = b.rootFile.SyscallConn(); err != nil {
		b.rootFile.Close()
		return nil, backend.Wrap("open", root, backend.ErrUnavailable, err)
	}
	return b, nil
}

// ID returns "file://" followed by the absolute root path.
func (b *Backend) ID() string { return "file://" + b.root }

// Root returns the absolute, cleaned root directory.
func (b *Backend) Root() string { return b.root }

// Close releases the root directory, which the Backend holds open; calls
// made after Close fail with ErrUnavailable.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	return b.rootFile.Close()
}

// List walks the tree under the root. Unreadable subdirectories and entries
// that vanish during the walk are skipped (the former with a warning) so one
// bad corner does not hide the whole dataset; an unreadable root fails.
func (b *Backend) List(ctx context.Context, fn func(backend.Object) error) error {
	if b.closed.Load() {
		return backend.Errorf("list", b.ID(), backend.ErrUnavailable, "backend closed")
	}
	// DirFS resolves names against root+"/", so a root that is itself a
	// symlink to a directory is walked, while links found inside are not.
	fsys := os.DirFS(b.root)
	outside := linkWarnings{b: b}
	defer outside.done()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			if p == "." {
				return err
			}
			if d != nil && d.IsDir() {
				b.log.Warn("posix: skipping unreadable directory", "dir", filepath.Join(b.root, p), "err", err)
				return fs.SkipDir
			}
			return nil // vanished between readdir and lstat
		}
		if d.IsDir() {
			return nil
		}
		var fi fs.FileInfo
		switch t := d.Type(); {
		case t.IsRegular():
			fi, err = d.Info()
		case t&fs.ModeSymlink != 0:
			fi, err = b.statBeneath("list", p)
			if errors.Is(err, errOutside) {
				// Only a link the opt-in would serve is worth a word:
				// one to a directory is never walked anyway. The
				// stat reads nothing of the target.
				if fi, err := os.Stat(filepath.Join(b.root, filepath.FromSlash(p))); err == nil && fi.Mode().IsRegular() {
					outside.skip(p)
				}
				return nil
			}
		default:
			return nil
		}
		if err != nil || !fi.Mode().IsRegular() {
			// Dangling links, links to directories or other types, and
			// files deleted since readdir are not objects.
			return nil
		}
		if err := fn(objectOf(p, fi)); err != nil {
			return callerError{err}
		}
		return nil
	})
	var ce callerError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return ce.err // fn's own error goes back untouched
	case ctx.Err() != nil:
		return backend.Wrap("list", b.ID(), backend.ErrUnavailable, err)
	default:
		return backend.Wrap("list", b.ID(), kindOf(err), err)
	}
}

// callerError marks an error returned by List's callback so it is not
// mistaken for a filesystem failure.
type callerError struct{ err error }

func (e callerError) Error() string { return e.err.Error() }

// Stat describes the file at key, following symlinks that stay beneath
// the root (ErrPermission for one that leads outside, unless followed).
func (b *Backend) Stat(ctx context.Context, key string) (backend.Object, error) {
	fi, err := b.statBeneath("stat", key)
	if err != nil {
		return backend.Object{}, err
	}
	if !fi.Mode().IsRegular() {
		return backend.Object{}, backend.Errorf("stat", key, backend.ErrNotFound, "not a regular file (%v)", fi.Mode().Type())
	}
	return objectOf(key, fi), nil
}

// ReadAt reads from obj's file at off, failing with ErrChanged if the file is
// not, or stops being during the read, at obj.Version.
func (b *Backend) ReadAt(ctx context.Context, obj backend.Object, p []byte, off int64) (int, error) {
	if _, err := b.path("read", obj.Key); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, backend.Errorf("read", obj.Key, backend.ErrInvalid, "negative offset %d", off)
	}
	if err := ctx.Err(); err != nil {
		return 0, backend.Wrap("read", obj.Key, backend.ErrUnavailable, err)
	}
	// O_NONBLOCK keeps a file swapped for a FIFO from blocking the open;
	// it has no effect on regular files. A symlink swapped in that leads
	// outside the root is refused (ErrPermission), not opened.
	f, err := b.open("read", obj.Key, os.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := b.checkVersion(f, obj); err != nil {
		return 0, err
	}
	if off >= obj.Size || len(p) == 0 {
		if off >= obj.Size {
			return 0, io.EOF
		}
		return 0, nil
	}
	n, err := f.ReadAt(p, off)
	if err != nil && err != io.EOF {
		return n, backend.Wrap("read", obj.Key, kindOf(err), err)
	}
	// Re-check after the read: a writer that raced us changed size or mtime
	// (or the rename target), and the bytes in p may be torn.
	if err := b.checkVersion(f, obj); err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (b *Backend) checkVersion(f *os.File, obj backend.Object) error {
	fi, err := f.Stat()
	if err != nil {
		return backend.Wrap("read", obj.Key, kindOf(err), err)
	}
	if !fi.Mode().IsRegular() {
		return backend.Errorf("read", obj.Key, backend.ErrChanged, "no longer a regular file (%v)", fi.Mode().Type())
	}
	if v := version(fi); v != obj.Version {
		return backend.Errorf("read", obj.Key, backend.ErrChanged, "version %s, want %s", v, obj.Version)
	}
	return nil
}

// path maps a key to a filesystem path, refusing keys that could escape the
// root or that List could never have produced.
func (b *Backend) path(op, key string) (string, error) {
	switch {
	case key == "" || key == ".":
		return "", backend.Errorf(op, key, backend.ErrInvalid, "empty key")
	case strings.IndexByte(key, 0) >= 0:
		return "", backend.Errorf(op, key, backend.ErrInvalid, "key contains a NUL byte")
	case strings.HasPrefix(key, "/"):
		return "", backend.Errorf(op, key, backend.ErrInvalid, "key must be relative")
	case !fs.ValidPath(key):
		// Catches ".." and "." elements and empty elements ("a//b",
		// trailing '/'), while still allowing names such as "a..b".
		return "", backend.Errorf(op, key, backend.ErrInvalid, "key is not a clean relative path")
	}
	return filepath.Join(b.root, filepath.FromSlash(key)), nil
}

func objectOf(key string, fi fs.FileInfo) backend.Object {
	return backend.Object{Key: key, Size: fi.Size(), ModTime: fi.ModTime(), Version: version(fi)}
}

// version is what makes Key+Version imply the same bytes: size and mtime
// catch in-place rewrites, the inode catches replacement by rename, and the
// ctime catches an in-place rewrite whose mtime was put back (rsync
// --inplace -t), since no one can set it.
func version(fi fs.FileInfo) string {
	var ino uint64
	var ctime int64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
		ctime = time.Unix(st.Ctim.Unix()).UnixNano()
	}
	return fmt.Sprintf("%d-%d-%d-%d", fi.Size(), fi.ModTime().UnixNano(), ino, ctime)
}

// kindOf classifies an OS error by errno.
func kindOf(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ELOOP):
		return backend.ErrNotFound
	case errors.Is(err, fs.ErrPermission):
		return backend.ErrPermission
	case errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.EISDIR):
		return backend.ErrInvalid
	default:
		return backend.ErrUnavailable // EIO, ESTALE, ENOTCONN, ...
	}
}
