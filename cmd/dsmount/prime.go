package main

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"
)

// primeParallel is how many directories are listed at once.
const primeParallel = 8

// primeResult is what listing the declared files' directories did.
type primeResult struct {
	Dirs    int     `json:"primed_dirs"`
	Failed  int     `json:"prime_failed,omitempty"`
	Seconds float64 `json:"prime_seconds"`
	err     error   // the first failure, if any
}

// primeDirs lists, through the mount at root, every directory holding one
// of paths (relative to root). The kernel asks for a directory's listing
// with READDIRPLUS and keeps each entry the daemon returns as if it had
// looked the name up: a loader's first open of a declared file then needs
// no LOOKUP round trip, which on a busy node is most of what a cached
// read waits for (go run ./test/benchorder: the mean cached read fell
// from 0.62-0.75 ms to 0.37-0.40 ms). A directory the mount doesn't have
// (a skipped path's) is not a failure.
func primeDirs(root string, paths []string) primeResult {
	start := time.Now()
	seen := make(map[string]bool)
	var dirs []string
	for _, p := range paths {
		if d := path.Dir(p); !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	var (
		res  primeResult
		mu   sync.Mutex
		next = make(chan string)
		wg   sync.WaitGroup
	)
	for range min(primeParallel, len(dirs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range next {
				err := listDir(filepath.Join(root, filepath.FromSlash(d)))
				mu.Lock()
				switch {
				case err == nil:
					res.Dirs++
				case errors.Is(err, fs.ErrNotExist), errors.Is(err, errNotDir):
				default:
					res.Failed++
					if res.err == nil {
						res.err = err
					}
				}
				mu.Unlock()
			}
		}()
	}
	for _, d := range dirs {
		next <- d
	}
	close(next)
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	return res
}

var errNotDir = errors.New("not a directory")

// listDir reads dir's names to the end (unsorted: the kernel's READDIRPLUS
// is the point, not the names).
func listDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && !st.IsDir() {
		return errNotDir
	}
	_, err = f.Readdirnames(-1)
	return err
}
