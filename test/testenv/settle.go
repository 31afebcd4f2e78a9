package testenv

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

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

// RecycleMemory touches n bytes of fresh anonymous memory and frees it
// again, so that the next timed pass finds that much recently used memory
// on the free lists. The host of this project's VMs takes back guest memory
// left free for a minute or so (DAMON pageout, free page reporting), and
// the first touch of such a page faults in the host: filling 6,000 MB of
// tmpfs took 31–37 s the first time and 5 s right after (dd to /dev/shm). A
// cold epoch through a mount has the daemon's FUSE replies fill the
// readers' page cache, so without this the daemon's writev to /dev/fuse
// pays the host's price: 3.5 of its 11.5 s of CPU in one stall pass of
// bench/order. A node that has been reading for a while recycles its
// page cache; every pass starts that way after this. It returns how long
// the touch took, itself a measure of how much the host had taken back.
func RecycleMemory(n int64) (time.Duration, error) {
	t0 := time.Now()
	if n <= 0 {
		return 0, nil
	}
	// MAP_POPULATE faults every page in at once; munmap puts them back on
	// the free lists, at their heads, where the next allocations look.
	mem, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return 0, fmt.Errorf("recycle memory: mmap %d bytes: %w", n, err)
	}
	if err := unix.Munmap(mem); err != nil {
		return 0, fmt.Errorf("recycle memory: munmap: %w", err)
	}
	return time.Since(t0), nil
}

// DropCaches syncs and drops the whole page cache, dentries and inodes
// (drop_caches 3): a cold pass's starting point. Needs root.
func DropCaches() error { return dropCaches("3") }

// DropPages syncs and drops the whole page cache, keeping dentries and
// inodes (drop_caches 1): a node that keeps reading one tree, its data
// larger than its memory. Without the sync, the pages of files just
// written stay dirty, and drop_caches leaves them. Needs root.
func DropPages() error { return dropCaches("1") }

func dropCaches(level string) error {
	unix.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte(level), 0o200); err != nil {
		return fmt.Errorf("drop caches (needs root): %w", err)
	}
	return nil
}
