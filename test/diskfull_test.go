package test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// TestFullCacheDisk: the cache's filesystem fills up (another writer takes
// every free block) while a mount serves reads. Reads keep returning the
// right bytes, now streamed; the daemon says so once, and in its stats; it
// doesn't crash (its index writes through memory maps, where a write with
// no block left is a SIGBUS that would take every mount down); once space
// is back it caches again; and it exits cleanly.
func TestFullCacheDisk(t *testing.T) {
	fsDir := testenv.SmallFS(t, "256m")
	src := t.TempDir()
	r := rand.New(rand.NewPCG(41, 42))
	var names []string
	for i := range 60 {
		name := fmt.Sprintf("f%02d.bin", i)
		data := make([]byte, 200_000+r.IntN(800_000))
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	check := func(mp string, names []string) {
		t.Helper()
		for _, n := range names {
			want, _ := os.ReadFile(filepath.Join(src, n))
			got, err := os.ReadFile(filepath.Join(mp, n))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s through the mount: %v (bytes equal: %v)", n, err, bytes.Equal(got, want))
			}
		}
	}

	mp := t.TempDir()
	m := testenv.StartMount(t, testenv.MountConfig{Bin: dsmountBin, Source: src, Mountpoint: mp,
		Args: []string{"--cache-dir", filepath.Join(fsDir, "cache")}})
	check(mp, names[:20])
	if st := testenv.Stats(t, dsmountBin, mp); st.Cache.DiskFull || st.Cache.Used == 0 {
		t.Fatalf("before the disk filled: disk_full %v, used %d; want false and the files read", st.Cache.DiskFull, st.Cache.Used)
	}

	// Until the daemon notices, it may still fill space it holds (a pack's
	// preallocated room): reads stay right either way.
	filler := testenv.FillFS(t, fsDir)
	check(mp, names[20:30])
	waitDiskFull(t, mp, true)
	check(mp, names[30:])
	if st := testenv.Stats(t, dsmountBin, mp); st.Cache.Streamed == 0 {
		t.Fatalf("with the disk full, %d chunks served uncached; want the files read since", st.Cache.Streamed)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitDiskFull(t, mp, false)
	rep, _ := testenv.Warm(t, dsmountBin, time.Minute, mp)
	if rep.ChunksNotCached != 0 || rep.ChunksFetched == 0 {
		t.Fatalf("warm after the disk had room: %d chunks fetched, %d not cached; want the rest cached", rep.ChunksFetched, rep.ChunksNotCached)
	}

	m.Stop()
	m.NoErrorLogs() // a crash would have written a Go traceback to stderr
	var full, room int
	for _, rec := range m.LogRecords("WARN") {
		msg, _ := rec["msg"].(string)
		switch {
		case strings.Contains(msg, "cache filesystem is full; reads are served without caching"):
			// The space guard's own message (index writes skipped while
			// full say so too, in other words, as often as they happen).
			full++
		case strings.Contains(msg, "has room again"):
			room++
		}
	}
	if full != 1 || room != 1 {
		t.Errorf("the daemon said the disk was full %d times and had room again %d times; want once each", full, room)
	}
}

// waitDiskFull polls the daemon's stats until its disk_full is want.
func waitDiskFull(t *testing.T, mp string, want bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for testenv.Stats(t, dsmountBin, mp).Cache.DiskFull != want {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the cache's disk_full is still %v", !want)
		}
		time.Sleep(100 * time.Millisecond) // polling the daemon's state, not waiting for it
	}
}

// TestFullCacheDiskAtStart: a mount whose cache filesystem has no room
// refuses to start with a one-line error, and mounts nothing.
func TestFullCacheDiskAtStart(t *testing.T) {
	fsDir := testenv.SmallFS(t, "64m")
	testenv.FillFS(t, fsDir)
	src, mp := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644)
	res := testenv.RunCLI(dsmountBin, nil, time.Minute, "mount", src, mp, "--cache-dir", filepath.Join(fsDir, "cache"))
	if res.ExitCode != 2 {
		t.Fatalf("mount with a full cache disk: exit %d, want 2; stderr %q", res.ExitCode, res.Stderr)
	}
	msg := strings.TrimSpace(res.Stderr)
	if strings.Count(msg, "\n") != 0 || !strings.HasPrefix(msg, "dsmount: ") || !strings.Contains(msg, "space") {
		t.Errorf("error: %q; want one line starting \"dsmount: \" that says the disk has no space", msg)
	}
	if mounted, _ := testenv.IsMounted(mp); mounted {
		t.Error("a mount was left behind")
	}
	t.Log(msg)
}
