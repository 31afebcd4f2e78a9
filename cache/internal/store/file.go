package store

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// File is the cache file of an object of its own (one of several chunks,
// or of one chunk cached before packs), by path: each chunk's bytes at the
// chunk's own offset, so a wholly cached file is an exact copy of the
// object. A File holds no descriptor: each call opens the file, so a file
// deleted or replaced under the daemon is seen at the next call.
type File string

// ReadAt reads len(p) bytes at off.
func (path File) ReadAt(p []byte, off int64) error {
	f, err := os.OpenFile(string(path), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.ReadAt(p, off)
	return err
}

// ReadDirect reads the n bytes at off into buf with O_DIRECT, where off
// and buf are aligned and buf holds n rounded up; it reports whether it
// could (false: read some other way). Bytes past the file's end are not
// needed: a short read that covers n is whole.
func (path File) ReadDirect(buf []byte, off int64, n int) (bool, error) {
	if !directReadable(buf, off, n) {
		return false, nil
	}
	f, direct, err := OpenDirect(string(path), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return true, err
	}
	defer f.Close()
	if !direct {
		return false, nil
	}
	return true, readDirectAt(f, buf, off, n)
}

// Remove deletes the file; a file already gone is no error.
func (path File) Remove() error {
	if err := os.Remove(string(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Open opens the file for reading, with no check (FUSE passthrough hands
// it to the kernel).
func (path File) Open() (*os.File, error) {
	return os.OpenFile(string(path), os.O_RDONLY|unix.O_NOFOLLOW, 0)
}
