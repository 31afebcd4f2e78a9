package test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// faultKinds are what TestCacheFaultsDuringVerifiedEpochs does to cache
// files while readers read.
var faultKinds = []string{"delete", "replace", "truncate", "truncate-extend", "flip"}

// TestCacheFaultsDuringVerifiedEpochs: while epochs of readers read every
// file of a dataset through the mount and check every byte, cache files
// (objects' own files and packs) are deleted, replaced, truncated,
// truncated and re-extended, or overwritten in place, one every few reads,
// 100 times, with the mount's page cache dropped after each so that reads
// reach the daemon. Not one wrong byte and not one failed read may come
// out; a last epoch over everything, page cache dropped, is right too.
//
// Under FUSE passthrough the kernel reads a cache file itself while a
// handle is open, unchecked: an in-place write to a file open that way is
// served (docs/guarantees.md). So the passthrough mount gets its faults
// between epochs, when no file is open.
func TestCacheFaultsDuringVerifiedEpochs(t *testing.T) {
	const bucket = "faults"
	m, src := mirroredBucket(t, bucket)
	r := rand.New(rand.NewPCG(23, 3))
	var paths []string
	put := func(name string, size int) {
		putRandomFile(t, r, src, name, size, m, bucket)
		paths = append(paths, name)
	}
	for i := range 160 {
		put(fmt.Sprintf("small/%03d.bin", i), 5_000+r.IntN(250_000))
	}
	for i := range 4 {
		put(fmt.Sprintf("large/%d.bin", i), 1<<20+r.IntN(2<<20))
	}

	for _, run := range []struct {
		fastPath   string
		rounds     int
		concurrent bool
	}{{"off", 50, true}, {"no-open", 50, true}, {"passthrough", 10, false}} {
		t.Run(run.fastPath, func(t *testing.T) {
			cacheDir, mp := t.TempDir(), t.TempDir()
			d := mountS3(t, m, bucket, "", mp, cacheDir, "--chunk-size", "1M", "--fast-path", run.fastPath, "--cache-size", "1G")
			testenv.CompareTree(t, src, mp, paths, 8, 1) // fills the cache
			f := &faulter{t: t, r: rand.New(rand.NewPCG(uint64(len(run.fastPath)), 7)), cacheDir: cacheDir, mp: mp, paths: paths}
			if run.concurrent {
				f.duringEpochs(src, run.rounds)
			} else {
				for round := range run.rounds {
					f.inject()
					testenv.CompareTree(t, src, mp, paths, 8, int64(round+2))
				}
			}
			f.dropMountPages()
			testenv.CompareTree(t, src, mp, paths, 8, 99)
			st := testenv.Stats(t, dsmountBin, mp)
			kinds := make([]string, 0, len(f.done))
			for k, n := range f.done {
				kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
			}
			sort.Strings(kinds)
			t.Logf("%s: %d faults (%v) over %d verified file reads; the daemon counted %d checksum failures or vanished files, %d read errors",
				run.fastPath, run.rounds, kinds, f.reads.Load(), st.Cache.VerifyFailures, st.Mount.ReadErrors)
			if st.Cache.VerifyFailures == 0 {
				t.Errorf("the daemon noticed none of %d faults", run.rounds)
			}
			if st.Mount.ReadErrors != 0 {
				t.Errorf("%d reads failed", st.Mount.ReadErrors)
			}
			d.Stop()
		})
	}
}

// faulter does faults to a mount's cache files.
type faulter struct {
	t        *testing.T
	r        *rand.Rand
	cacheDir string
	mp       string
	paths    []string
	done     map[string]int
	reads    atomic.Int64
}

// duringEpochs runs verified epochs with 8 readers until rounds faults
// have been done, one after every 20 files read.
func (f *faulter) duringEpochs(src string, rounds int) {
	t := f.t
	progress := make(chan struct{}, 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for seed := int64(100); ; seed++ {
			select {
			case <-stop:
				return
			default:
			}
			err := testenv.ReadAllShuffled(f.mp, f.paths, 8, seed, func(p string, data []byte) error {
				if err := testenv.CompareFile(src, p, data); err != nil {
					return err
				}
				f.reads.Add(1)
				select {
				case progress <- struct{}{}:
				default:
				}
				return nil
			})
			if err != nil {
				readErr = err
				close(progress)
				return
			}
		}
	}()
	for round := 0; round < rounds; {
		if _, ok := <-progress; !ok {
			break
		}
		if f.reads.Load() < int64(20*(round+1)) {
			continue
		}
		f.inject()
		round++
	}
	close(stop)
	wg.Wait()
	var me *testenv.MismatchError
	switch {
	case errors.As(readErr, &me):
		t.Fatalf("wrong bytes after %d faults: %v", len(f.done), readErr)
	case readErr != nil:
		t.Fatalf("a read failed after %d faults: %v", len(f.done), readErr)
	}
}

// inject does one fault, of a random kind, to a random cache file, then
// drops the mount's pages so that the next reads reach the daemon.
func (f *faulter) inject() {
	t := f.t
	// Earlier faults may have deleted every cache file (a few pack files
	// hold all the small ones): the readers' refetches make them again,
	// after their readers have the bytes, so on a busy machine a fault can
	// come first. Wait for one rather than fail.
	var files []string
	for deadline := time.Now().Add(30 * time.Second); ; {
		var err error
		if files, err = testenv.CacheFiles(f.cacheDir, "data", "packs"); err != nil {
			t.Fatal(err)
		}
		if len(files) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no cache files to do faults to for 30 s")
		}
		time.Sleep(20 * time.Millisecond) // polling the cache dir, which nothing announces
	}
	victim := files[f.r.IntN(len(files))]
	kind := faultKinds[f.r.IntN(len(faultKinds))]
	if kind == "truncate" {
		// Shorter by some blocks: every slot or chunk past the cut is gone.
		if st, err := os.Stat(victim); err == nil {
			if err := os.Truncate(victim, st.Size()*int64(f.r.IntN(4))/4); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
		}
	} else if _, err := os.Stat(victim); err == nil {
		tamper(t, victim, kind, f.r)
	}
	if f.done == nil {
		f.done = map[string]int{}
	}
	f.done[kind]++
	f.dropMountPages()
}

func (f *faulter) dropMountPages() {
	for _, p := range f.paths {
		if err := testenv.DropPageCache(filepath.Join(f.mp, filepath.FromSlash(p))); err != nil {
			f.t.Fatal(err)
		}
	}
}
