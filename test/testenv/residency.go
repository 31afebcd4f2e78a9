package testenv

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Residency is the share of path's pages in the page cache as a fresh
// opener sees it: open, mmap, mincore. For a file in a FUSE mount the open
// itself goes through the filesystem (which may invalidate the cache).
func Residency(path string) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := int(st.Size())
	if size == 0 {
		return 1, nil
	}
	data, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		if data, err = unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_PRIVATE); err != nil {
			return 0, fmt.Errorf("mmap %s: %w", path, err)
		}
	}
	defer unix.Munmap(data)
	pg := os.Getpagesize()
	vec := make([]byte, (size+pg-1)/pg)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(size), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return 0, fmt.Errorf("mincore %s: %w", path, e)
	}
	in := 0
	for _, v := range vec {
		if v&1 != 0 {
			in++
		}
	}
	return float64(in) / float64(len(vec)), nil
}
