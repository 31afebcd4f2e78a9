package cache

import (
	"errors"
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Chunks are written to their files with O_DIRECT where they can be.
//
// A chunk reaches its reader from memory (the flight, or the staging area),
// and the kernel keeps its own copy in the FUSE file's page cache; copying it
// into the cache file's page cache as well would hold it twice and pay for
// it twice. Filling fresh page-cache pages is most of what a buffered write
// costs where the host reclaims the guest's free memory, as on this
// project's VMs: each first touch of a page faults in the host. A warm of
// 10,000 × 110 KB files spent 5.4 s of the daemon's CPU in buffered pwrite
// (copy_folio_from_iter_atomic, by perf), 0.8 s with O_DIRECT, and the
// flushers' writeback went with it (go run ./bench warm, A/B in one
// session: daemon CPU 10.4 and 11.9 s buffered, 5.9 and 7.9 s direct).
// Data written this way is durable only after the same syncfs or fdatasync
// as buffered data: the committer's protocol is unchanged.

// directAlign is the alignment O_DIRECT needs of buffers, offsets and
// lengths: the page size covers every logical block size in use.
const directAlign = 4096

// directLen is how much of p, written at off, can go out with O_DIRECT: the
// longest block-aligned prefix, or 0 when p or off are unaligned.
func directLen(p []byte, off int64) int {
	n := len(p) &^ (directAlign - 1)
	if n == 0 || off%directAlign != 0 || uintptr(unsafe.Pointer(&p[0]))%directAlign != 0 {
		return 0
	}
	return n
}

// openDirect opens path with flags plus O_DIRECT. direct is false when the
// filesystem refuses O_DIRECT (tmpfs before Linux 6.6, some FUSE and network
// filesystems): the file is then open without it.
func openDirect(path string, flags int, perm os.FileMode) (f *os.File, direct bool, err error) {
	f, err = os.OpenFile(path, flags|unix.O_DIRECT, perm)
	if errors.Is(err, unix.EINVAL) {
		// Linux refuses O_DIRECT only once it has created the file, so an
		// exclusive create would now fail with EEXIST. The call above
		// proved the name was free (it would have failed with EEXIST
		// first): opening what it created is still ours alone.
		f, err = os.OpenFile(path, flags&^os.O_EXCL, perm)
		return f, false, err
	}
	return f, err == nil, err
}

// writeChunk writes p at off to f, whose descriptor has O_DIRECT set when
// direct is true: the aligned prefix goes straight to disk, then O_DIRECT
// is cleared (the descriptor is the caller's alone) and the unaligned tail
// goes through the page cache, which is the only way to write it.
func writeChunk(f *os.File, direct bool, p []byte, off int64) error {
	if direct {
		if n := directLen(p, off); n > 0 {
			if _, err := f.WriteAt(p[:n], off); err != nil {
				return err
			}
			p, off = p[n:], off+int64(n)
		}
		if len(p) == 0 {
			return nil
		}
		if err := clearDirect(f); err != nil {
			return err
		}
	}
	_, err := f.WriteAt(p, off)
	return err
}

func clearDirect(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	err = rc.Control(func(fd uintptr) {
		var flags int
		if flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0); ferr == nil {
			_, ferr = unix.FcntlInt(fd, unix.F_SETFL, flags&^unix.O_DIRECT)
		}
	})
	if err != nil {
		return err
	}
	return ferr
}

// directReadable reports whether n bytes at off can be read into buf with
// O_DIRECT: off and buf aligned, buf holding n rounded up.
func directReadable(buf []byte, off int64, n int) bool {
	return off%directAlign == 0 && len(buf) >= int(alignUp(int64(n))) &&
		uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%directAlign == 0
}

// readDirectAt reads n bytes at off of f, whose descriptor has O_DIRECT
// set, into buf (directReadable), reading n rounded up: bytes past the
// file's end are not needed, so a short read that covers n is whole.
func readDirectAt(f *os.File, buf []byte, off int64, n int) error {
	got, err := f.ReadAt(buf[:alignUp(int64(n))], off)
	if got >= n {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}
