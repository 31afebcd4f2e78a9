package posix

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dsmount/dsmount/backend"
)

// errOutside is the cause of the ErrPermission a name gets when resolving it
// leaves the root through a symlink.
var errOutside = errors.New("a symlink on its path leads outside the source directory (see --follow-external-symlinks)")

// maxLinkWarnings is how many links leading outside one List names in a
// warning each; the rest are counted in one more.
const maxLinkWarnings = 10

// openat2Retries bounds the retries of an openat2 that a concurrent rename
// made give up (EAGAIN).
const openat2Retries = 8

// open opens key with flags (O_CLOEXEC is added), following symlinks only
// as far as they stay beneath the root, unless the Backend follows external
// ones. A name that leads outside fails with ErrPermission (errOutside).
//
// openat2(RESOLVE_BENEATH) resolves the whole path in the kernel against
// the root's descriptor, so a link swapped in between a check and the open
// can't lead it out. It refuses absolute links even where they lead back
// inside, so those are resolved here and the result opened beneath the root
// again. Without openat2 (ENOSYS: Linux before 5.6, or a seccomp filter)
// the path is resolved here and checked, which a link changed between the
// check and the open can still defeat.
func (b *Backend) open(op, key string, flags int) (*os.File, error) {
	path, err := b.path(op, key)
	if err != nil {
		return nil, err
	}
	if b.follow {
		f, err := os.OpenFile(path, flags, 0)
		if err != nil {
			return nil, backend.Wrap(op, key, kindOf(err), err)
		}
		return f, nil
	}
	rel := filepath.FromSlash(key)
	if !b.noOpenat2.Load() {
		f, err := b.openat2(rel, flags)
		switch {
		case err == nil:
			return f, nil
		case errors.Is(err, unix.ENOSYS):
			b.noOpenat2.Store(true)
		case !errors.Is(err, unix.EXDEV):
			return nil, backend.Wrap(op, key, kindOf(err), err)
		}
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, backend.Wrap(op, key, kindOf(err), err)
	}
	inside, err := filepath.Rel(b.realRoot, real)
	if err != nil || inside == ".." || strings.HasPrefix(inside, "../") {
		return nil, backend.Wrap(op, key, backend.ErrPermission, errOutside)
	}
	var f *os.File
	if b.noOpenat2.Load() {
		// The path is resolved: a link put at its end since is refused.
		f, err = os.OpenFile(real, flags|unix.O_NOFOLLOW, 0)
	} else {
		f, err = b.openat2(inside, flags)
	}
	switch {
	case errors.Is(err, unix.EXDEV):
		return nil, backend.Wrap(op, key, backend.ErrPermission, errOutside) // changed since resolved
	case err != nil:
		return nil, backend.Wrap(op, key, kindOf(err), err)
	}
	return f, nil
}

// openat2 opens rel beneath the root's descriptor. After Close it fails
// with os.ErrClosed: the descriptor is used under the os.File's own
// reference count, so a number reused by another open is never resolved
// against.
func (b *Backend) openat2(rel string, flags int) (*os.File, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_BENEATH}
	var fd int
	var err error
	cerr := b.rootConn.Control(func(dir uintptr) {
		for range openat2Retries {
			fd, err = unix.Openat2(int(dir), rel, &how)
			if err != unix.EAGAIN && err != unix.EINTR {
				return
			}
		}
	})
	if cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, &os.PathError{Op: "openat2", Path: filepath.Join(b.root, rel), Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(b.root, rel)), nil
}

// statBeneath describes the file key names, following symlinks as open
// does; it opens the name with O_PATH (reading nothing, so a FIFO can't
// block it) and asks the descriptor.
func (b *Backend) statBeneath(op, key string) (os.FileInfo, error) {
	f, err := b.open(op, key, unix.O_PATH)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, backend.Wrap(op, key, kindOf(err), err)
	}
	return fi, nil
}

// linkWarnings words List's warnings about links leading outside: the
// first few by name, then a count.
type linkWarnings struct {
	b     *Backend
	count int
}

func (w *linkWarnings) skip(p string) {
	w.count++
	if w.count <= maxLinkWarnings {
		w.b.log.Warn("posix: skipping a symlink that leads outside the source directory (--follow-external-symlinks follows such links)",
			"link", filepath.Join(w.b.root, filepath.FromSlash(p)))
	}
}

func (w *linkWarnings) done() {
	if more := w.count - maxLinkWarnings; more > 0 {
		w.b.log.Warn(fmt.Sprintf("posix: skipped %d more symlinks that lead outside the source directory", more), "count", more)
	}
}
