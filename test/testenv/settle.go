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
// (ext4 skips inodes freed in the last 30 s to 5 min, scanning past each:
// creating a warm's 10,000 cache files cost 0.5 s of CPU in a first round
// and up to 2.5 s in rounds after the last round's were deleted). The
// directories go when the program's temporary directory does. For the same
// reason, runs of a benchmark are best a few minutes apart.
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

// RecycleMemory reads every file under dir through the page cache and drops
// it again, so that the next timed pass finds as much recently used memory
// on the free lists. The host of this project's VMs takes back guest memory
// left free (DAMON pageout, free page reporting), and the first touch of
// such a page faults in the host: a cold epoch through a mount, whose
// readers' page cache is filled by the daemon's replies, spent 8.4 s in
// writev to /dev/fuse when it was the run's first mount pass and 0.5 s
// for the same bytes in a later pass, which followed an unmount that freed
// a pass's worth of page cache. A node that has been reading for a while
// recycles its page cache; every pass starts that way after this.
func RecycleMemory(dir string) error {
	buf := make([]byte, 1<<20)
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		for {
			n, err := f.Read(buf)
			if n == 0 || err != nil {
				break
			}
		}
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
}
