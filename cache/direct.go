package cache

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// directAlign is the alignment O_DIRECT needs of buffers, offsets and
// lengths: the page size covers every logical block size in use.
const directAlign = 4096

// writeDirect writes the longest block-aligned prefix of p at off with
// O_DIRECT, bypassing the page cache, and returns how many bytes it wrote.
// ok is false when it wrote nothing (p or off unaligned, or a filesystem
// without O_DIRECT, like tmpfs): the caller writes p the usual way.
// f is the file open for writing; O_DIRECT is set on a second descriptor so
// f's own writes stay buffered.
func writeDirect(f *os.File, p []byte, off int64) (int, bool) {
	n := len(p) &^ (directAlign - 1)
	if n == 0 || off%directAlign != 0 || uintptr(unsafe.Pointer(&p[0]))%directAlign != 0 {
		return 0, false
	}
	fd, err := unix.Open(f.Name(), unix.O_WRONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	done := 0
	for done < n {
		w, err := unix.Pwrite(fd, p[done:n], off+int64(done))
		if err != nil || w <= 0 {
			// Whatever was written is on disk; the rest goes the usual way.
			return done &^ (directAlign - 1), done >= directAlign
		}
		done += w
	}
	return n, true
}
