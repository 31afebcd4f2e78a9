package testenv

import (
	"os"

	"golang.org/x/sys/unix"
)

// RemoveAndSettle removes dir and syncs the filesystems, so the work the
// kernel defers after a large delete (journal commit, discarding the freed
// blocks on a filesystem mounted with -o discard) is done before the next
// timed pass instead of slowing it: file creation ran 4-20x slower here
// while a 1 GB delete was being discarded.
func RemoveAndSettle(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	unix.Sync()
	return nil
}
