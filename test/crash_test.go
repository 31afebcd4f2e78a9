package test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dsmount/dsmount/test/testenv"
)

// TestCrashRecovery SIGKILLs the daemon in the middle of a parallel read
// pass (cache writes in flight), twice, restarting on the same cache dir each
// time, and then wants a full pass whose every byte matches the source. Bytes
// returned before a kill must be right too.
func TestCrashRecovery(t *testing.T) {
	src, paths := sharedDataset(t)
	m := sharedMinIO(t)
	cacheDir, mp := t.TempDir(), t.TempDir()

	for round, frac := range []float64{0.3, 0.6} {
		d := mountS3(t, m, dataBucket, dataPrefix, mp, cacheDir, "--cache-size", "2G")
		killAt := int64(float64(len(paths)) * frac)
		var (
			done       atomic.Int64
			trigger    = make(chan struct{})
			once       sync.Once
			mismatches atomic.Int64
			firstBad   atomic.Value
		)
		passDone := make(chan error, 1)
		go func() {
			passDone <- testenv.ReadAllShuffled(mp, paths, 8, int64(100+round), func(p string, data []byte) error {
				if err := testenv.CompareFile(src, p, data); err != nil {
					var me *testenv.MismatchError
					if errors.As(err, &me) {
						mismatches.Add(1)
						firstBad.CompareAndSwap(nil, err.Error())
					}
					return err
				}
				if done.Add(1) == killAt {
					once.Do(func() { close(trigger) })
				}
				return nil
			})
		}()
		var passErr error
		select {
		case <-trigger:
			d.Kill()
			passErr = <-passDone
		case passErr = <-passDone:
			d.Kill()
			if passErr == nil {
				t.Fatalf("round %d: the pass finished before %d files were read?", round, killAt)
			}
			t.Fatalf("round %d: pass failed before the kill, after %d files: %v", round, done.Load(), passErr)
		}
		if n := mismatches.Load(); n > 0 {
			t.Fatalf("round %d: %d files read before the kill had wrong bytes; first: %v", round, n, firstBad.Load())
		}
		t.Logf("round %d: killed dsmount after %d of %d files verified; the pass then ended with: %v",
			round, done.Load(), len(paths), passErr)
		if passErr == nil {
			t.Logf("round %d: (the pass completed despite the kill: every remaining read was already in the page cache)", round)
		}
	}

	d := mountS3(t, m, dataBucket, dataPrefix, mp, cacheDir, "--cache-size", "2G")
	if err := testenv.CompareListings(src, mp); err != nil {
		t.Errorf("listings after two crashes: %v", err)
	}
	g0, _ := m.GetObjectCount()
	testenv.CompareTree(t, src, mp, paths, 8, 7)
	g1, _ := m.GetObjectCount()
	t.Logf("pass after two crashes: %d GetObject requests", g1-g0)
	d.Stop()

	// And the cache is now complete and consistent: a warm pass makes no GETs.
	d = mountS3(t, m, dataBucket, dataPrefix, mp, cacheDir, "--cache-size", "2G")
	g2, _ := m.GetObjectCount()
	testenv.CompareTree(t, src, mp, paths, 8, 8)
	if g3, _ := m.GetObjectCount(); g3 != g2 {
		t.Errorf("warm pass after crash recovery made %d GetObject requests, want 0", g3-g2)
	}
	d.Stop()
}
