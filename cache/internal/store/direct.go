package store

import (
	"io"
	"os"
	"unsafe"
)

// directReadable reports whether n bytes at off can be read into buf with
// O_DIRECT: off and buf aligned, buf holding n rounded up.
func directReadable(buf []byte, off int64, n int) bool {
	return off%Align == 0 && len(buf) >= int(AlignUp(int64(n))) &&
		uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%Align == 0
}

// readDirectAt reads n bytes at off of f, whose descriptor has O_DIRECT
// set, into buf (directReadable), reading n rounded up: bytes past the
// file's end are not needed, so a short read that covers n is whole.
func readDirectAt(f *os.File, buf []byte, off int64, n int) error {
	got, err := f.ReadAt(buf[:AlignUp(int64(n))], off)
	if got >= n {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}
