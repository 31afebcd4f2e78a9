package store

import (
	"errors"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrClosed is returned by a write to a store that is closing.
var ErrClosed = errors.New("cache closed")

// SyncPath fdatasyncs a file (dataOnly) or fsyncs a directory; false if
// it can't.
func SyncPath(path string, dataOnly bool) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if dataOnly {
		return syscall.Fdatasync(int(f.Fd())) == nil
	}
	return f.Sync() == nil
}

// Syncfs flushes the whole filesystem holding dir, an open directory;
// false if it fails (the caller then syncs file by file). It also syncs
// other writers' data on that filesystem, which only takes longer.
func Syncfs(dir *os.File) bool {
	if dir == nil {
		return false
	}
	return withFd(dir, unix.Syncfs) == nil
}

// Parallel runs fn on every item with at most n at a time: the device
// queues concurrent syncs.
func Parallel(items []string, n int, fn func(string)) {
	if len(items) <= 1 {
		for _, it := range items {
			fn(it)
		}
		return
	}
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(n, len(items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				fn(it)
			}
		}()
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
}
