package testenv

import (
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// SettleKeeping makes every file under dir durable and drops it from the
// page cache, leaving the files in place. Benchmarks call it between timed
// passes that each fill a fresh cache directory: the next pass then starts
// with neither a page cache grown by the last one nor the slow file
// creation that follows deleting thousands of files on this filesystem
// (creating a warm's 10,000 cache files cost 0.5 s of CPU in a first
// round and up to 2.5 s in rounds after the last round's were deleted). The directories
// go when the program's temporary directory does.
func SettleKeeping(dir string) error {
	unix.Sync()
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		return DropPageCache(path)
	})
}

// DropPageCache asks the kernel to drop path's clean pages from the page
// cache (posix_fadvise(POSIX_FADV_DONTNEED) on a fd of it). Through a FUSE
// mount it drops the mount file's pages, not those of the file behind it.
func DropPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}
