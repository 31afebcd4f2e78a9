package test

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// TestFailedSyncIsNotTrusted: the cache's disk fails the syncs that were
// to make fetched chunks durable, and loses their bytes (as a disk whose
// writeback failed does: what is read there afterwards is not what was
// written). The daemon must stop trusting those chunks, say so in its log
// and stats, and keep serving the right bytes, refetching them.
func TestFailedSyncIsNotTrusted(t *testing.T) {
	ffs := testenv.StartFaultFS(t)
	src := t.TempDir()
	r := rand.New(rand.NewPCG(22, 2))
	names := []string{"large.bin", "small.bin"}
	for i, size := range []int{3<<20 + 777, 100_000} {
		putRandomFile(t, r, src, names[i], size, nil, "")
	}
	ffs.FailSyncs(func(rel string) bool {
		return strings.HasPrefix(rel, "cache/data/") || strings.HasPrefix(rel, "cache/packs/")
	})
	mp := t.TempDir()
	d := testenv.StartMount(t, testenv.MountConfig{Bin: dsmountBin, Source: src, Mountpoint: mp,
		Args: []string{"--cache-dir", filepath.Join(ffs.Dir, "cache"), "--cache-size", "1G", "--chunk-size", "1M", "--fast-path", "off"}})
	readAllRight(t, src, mp, names, "first read")
	// Both the large file's own cache file and the small file's pack
	// fail a sync and lose what was written to them.
	err := testenv.WaitFor(time.Minute, 50*time.Millisecond, "both cache files to fail a sync", func() (bool, error) {
		return ffs.LostSyncs() >= 2, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := testenv.DropPageCache(filepath.Join(mp, n)); err != nil {
			t.Fatal(err)
		}
	}
	readAllRight(t, src, mp, names, "after the failed syncs")
	if st := testenv.Stats(t, dsmountBin, mp); st.Cache.SyncFailures < 2 {
		t.Errorf("stats count %d failed syncs; want at least 2 (both files)", st.Cache.SyncFailures)
	}
	warned := false
	for _, rec := range d.LogRecords("WARN") {
		if msg, _ := rec["msg"].(string); strings.Contains(msg, "sync") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("the daemon logged no warning about the failed syncs; stderr:\n%s", d.Stderr())
	}
	d.Stop()
}
