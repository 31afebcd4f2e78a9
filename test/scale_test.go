package test

import (
	"bytes"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// The store of TestScale100k: ImageNet's layout (train/nXXXXXXXX/…JPEG) at
// a thirteenth of ImageNet's objects and a tenth of its directories.
const (
	scaleObjects    = 100_000
	scaleDirs       = 100
	scaleObjectSize = 64 // bytes: the test is about per-object metadata, not data
	scaleBucket     = "scale"
	// scaleSpotReads is how many files are read back and checked after the
	// remount.
	scaleSpotReads = 20
)

// scaleMaxRSS bounds the daemon's VmRSS after the first mount of 100,000
// objects and after a full `find MNT -type f`: the per-object memory of the
// listing and the tree, which issue 23 made compact. On a 2-core machine
// the daemon measured about 47 MB after mounting and 66-68 MB after the
// find. 120 MB leaves close to 2x over that for a noisy CI machine and the
// Go GC's timing, yet is far below the ~1.6 KB an object (≈ 190 MB at
// 100k, 159 MB after the mount alone) the daemon took before issue 23: a
// regression of a few hundred bytes an object fails here. MB are 10^6
// bytes, as in bench scale's report.
const scaleMaxRSS = 120_000_000

// scaleMaxRSSStat bounds the daemon's VmRSS after a walk that also stats
// every file (as `ls -lR`, `du` or os.walk with a stat do). Each file the
// kernel looks up holds an inode in the daemon until the kernel forgets it
// (under memory pressure or drop_caches): measured at about 550 bytes a
// file, ~121-131 MB after such a walk of 100k files, back to ~50 MB after
// drop_caches. 200 MB is that with CI headroom; more means the cost of a
// looked-up file has grown.
const scaleMaxRSSStat = 200_000_000

// scaleMaxRemount bounds a remount on the same cache, from process start to
// "mounted": it reads the stored listing from the cache index and lists
// nothing. Issue 23's target is ≤ 1 s at 1.28M objects on the benchmark;
// at 100k the daemon measured 0.15-0.2 s, and 3 s is the default suite's
// guard with headroom for CI (a relisting, or a start-up that does slow
// work per object, shows up well before it).
const scaleMaxRemount = 3 * time.Second

// TestScale100k is the default suite's cheap guard of issue 23 (ImageNet
// scale): 100,000 generated objects in 100 directories of an in-process S3
// server, no latency. It checks that
//   - `find MNT -type f` lists exactly the store's keys, each once, and a
//     walk that stats every entry finds them with their sizes under exactly
//     the directories they imply; neither reads an object;
//   - the daemon's RSS after mounting and after the find stays under
//     scaleMaxRSS (the per-object memory cost), and after the stat walk
//     under scaleMaxRSSStat;
//   - a remount on the same cache lists nothing (beyond the one-key probe
//     that opening a bucket makes) and is mounted within scaleMaxRemount;
//   - files read through the remount have the store's bytes.
//
// The first mount's time is logged, not asserted. The full figures at 1.28M
// objects behind a +20 ms proxy, with every target of the issue, come from
// the benchmark: `go run ./bench scale --isolate-backend` (docs/scale.md).
func TestScale100k(t *testing.T) {
	s := startScaleStore(t)
	keys := s.Keys()
	if keys.Len() != scaleObjects {
		t.Fatalf("the generated store has %d keys, want %d", keys.Len(), scaleObjects)
	}
	mp, cacheDir := t.TempDir(), t.TempDir()
	// An explicit --cache-size, so the daemon's sizing does not depend on
	// the free space of the machine's temp filesystem.
	cfg := testenv.MountConfig{
		Bin: dsmountBin, Source: "s3://" + scaleBucket + "/", Mountpoint: mp,
		Args: []string{"--cache-dir", cacheDir, "--cache-size", "1G", "--s3-endpoint", s.endpoint, "--s3-path-style"},
		Env:  s.Env(),
	}

	// 1. The first mount: the whole listing.
	t0 := time.Now()
	m := testenv.StartMount(t, cfg)
	firstMount := time.Since(t0)
	c0 := s.Counters()
	rssMount, hwmMount := scaleProcMem(t, m.Pid())
	t.Logf("first mount of %d objects: %v (%d list, %d get, %d head requests); daemon RSS %s (peak %s)",
		scaleObjects, firstMount.Round(time.Millisecond), c0.Lists, c0.Gets, c0.Heads, scaleMB(rssMount), scaleMB(hwmMount))
	if c0.Lists < scaleObjects/1000 {
		t.Errorf("the first mount made %d ListObjectsV2 requests; %d keys need at least %d pages of 1,000: the store's counter or the listing is broken",
			c0.Lists, scaleObjects, scaleObjects/1000)
	}
	checkRSS := func(when string, rss, bound int64) {
		t.Helper()
		if rss > bound {
			t.Errorf("daemon RSS %s is %s, above the bound of %s for %d objects (%.0f bytes an object): "+
				"a per-object cost has grown (see `go run ./bench scale`)",
				when, scaleMB(rss), scaleMB(bound), scaleObjects, float64(rss)/scaleObjects)
		}
	}
	checkRSS("after the first mount", rssMount, scaleMaxRSS)

	// 2. `find MNT -type f`: exactly the keys.
	t0 = time.Now()
	found, err := scaleFind(mp, keys)
	find := time.Since(t0)
	if err != nil {
		t.Errorf("find through the mount: %v", err)
	}
	rssFind, hwmFind := scaleProcMem(t, m.Pid())
	t.Logf("find MNT -type f: %d files in %v; daemon RSS %s (peak %s)",
		found, find.Round(time.Millisecond), scaleMB(rssFind), scaleMB(hwmFind))
	checkRSS("after the first mount and a full find", rssFind, scaleMaxRSS)

	// 3. A walk that stats every entry: the keys with their sizes, and
	// the directories.
	t0 = time.Now()
	walked, err := scaleWalk(mp, keys, scaleObjectSize)
	walk := time.Since(t0)
	if err != nil {
		t.Errorf("walking the mount: %v", err)
	}
	rssWalk, hwmWalk := scaleProcMem(t, m.Pid())
	t.Logf("walk with an lstat of every entry: %d files in %v; daemon RSS %s (peak %s), +%s over the find",
		walked, walk.Round(time.Millisecond), scaleMB(rssWalk), scaleMB(hwmWalk), scaleMB(rssWalk-rssFind))
	checkRSS("after the mount, a find and a stat of every file", rssWalk, scaleMaxRSSStat)
	if c := s.Counters(); c.Gets != c0.Gets {
		t.Errorf("the find and the walk made %d GetObject requests; listing and stat must not read objects", c.Gets-c0.Gets)
	}
	m.NoErrorLogs()
	m.Stop()

	// 4. A remount on the same cache: the stored listing, no list pages.
	lists := s.listCount()
	t0 = time.Now()
	m = testenv.StartMount(t, cfg)
	remount := time.Since(t0)
	rssRemount, _ := scaleProcMem(t, m.Pid())
	t.Logf("remount on the same cache: %v (list requests, by max-keys: %v); daemon RSS %s",
		remount.Round(time.Millisecond), s.listsSince(lists), scaleMB(rssRemount))
	if err := scaleNoRelisting(s.listsSince(lists)); err != nil {
		t.Errorf("the remount on the same cache listed again (the listing is stored in the cache index): %v", err)
	}
	if remount > scaleMaxRemount {
		t.Errorf("the remount on the same cache took %v from start to mounted, want ≤ %v",
			remount.Round(time.Millisecond), scaleMaxRemount)
	}

	// 5. Spot checks through the remount: the store's bytes.
	gets := s.GetCount()
	for i := 0; i < scaleSpotReads; i++ {
		k := keys.Key((2*i + 1) * keys.Len() / (2 * scaleSpotReads))
		got, err := os.ReadFile(filepath.Join(mp, k))
		if err != nil {
			t.Errorf("reading through the remount: %v", err)
			continue
		}
		if err := testenv.Diff(k, got, testenv.GenS3Bytes(k, scaleObjectSize)); err != nil {
			t.Errorf("through the remount: %v", err)
		}
	}
	if s.GetCount() == gets {
		t.Errorf("reading %d uncached files through the remount made no GetObject request: the store's counter is broken", scaleSpotReads)
	}
	if err := scaleNoRelisting(s.listsSince(lists)); err != nil {
		t.Errorf("the remount listed again by the end of the test: %v", err)
	}
	m.NoErrorLogs()
	m.Stop()
	t.Logf("figures (%d objects): first mount %v, RSS %s after it, find %v, RSS %s after it, stat walk %v, RSS %s after it, remount %v",
		scaleObjects, firstMount.Round(time.Millisecond), scaleMB(rssMount), find.Round(time.Millisecond), scaleMB(rssFind),
		walk.Round(time.Millisecond), scaleMB(rssWalk), remount.Round(time.Millisecond))
}

// scaleStore is a GenS3 served by the test itself, so that it can see the
// max-keys of each ListObjectsV2 request: opening a bucket probes it with
// a one-key listing, which is not a relisting.
type scaleStore struct {
	*testenv.GenS3
	endpoint string

	mu    sync.Mutex
	lists []string // max-keys of each ListObjectsV2 request, in order
}

func startScaleStore(t *testing.T) *scaleStore {
	t.Helper()
	g, err := testenv.NewGenS3(scaleBucket, scaleObjects, scaleDirs, scaleObjectSize)
	if err != nil {
		t.Fatalf("generated S3: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("generated S3: %v", err)
	}
	s := &scaleStore{GenS3: g, endpoint: "http://" + ln.Addr().String()}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: time.Minute}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

func (s *scaleStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if q := r.URL.Query(); r.Method == http.MethodGet && q.Get("list-type") == "2" {
		s.mu.Lock()
		s.lists = append(s.lists, q.Get("max-keys"))
		s.mu.Unlock()
	}
	s.GenS3.ServeHTTP(w, r)
}

func (s *scaleStore) listCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lists)
}

// listsSince is the max-keys of each list request after the first n.
func (s *scaleStore) listsSince(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lists[n:]...)
}

// scaleNoRelisting accepts at most one list request, of one key (the
// probe of opening the bucket).
func scaleNoRelisting(maxKeys []string) error {
	if len(maxKeys) == 0 || len(maxKeys) == 1 && maxKeys[0] == "1" {
		return nil
	}
	return fmt.Errorf("%d ListObjectsV2 requests with max-keys %q; want none but at most one one-key probe", len(maxKeys), maxKeys)
}

// scaleKeySet checks that a walk finds each key exactly once and nothing
// else.
type scaleKeySet struct {
	keys     *testenv.GenS3Keys
	seen     []bool
	files    int
	problems []string
	more     int // problems past the first 20
}

func newScaleKeySet(keys *testenv.GenS3Keys) *scaleKeySet {
	return &scaleKeySet{keys: keys, seen: make([]bool, keys.Len())}
}

func (c *scaleKeySet) problem(format string, args ...any) {
	if len(c.problems) < 20 {
		c.problems = append(c.problems, fmt.Sprintf(format, args...))
	} else {
		c.more++
	}
}

// file records the file rel; it reports false if rel is not a key or was
// already seen.
func (c *scaleKeySet) file(rel string) bool {
	c.files++
	i, ok := c.keys.Find(rel)
	switch {
	case !ok:
		c.problem("%q is not a key of the store", rel)
		return false
	case c.seen[i]:
		c.problem("%q found twice", rel)
		return false
	}
	c.seen[i] = true
	return true
}

// err reports the problems so far and every key not seen.
func (c *scaleKeySet) err() error {
	for i, ok := range c.seen {
		if !ok {
			c.problem("key %q is missing from the mount", c.keys.Key(i))
		}
	}
	if len(c.problems) == 0 {
		return nil
	}
	if c.more > 0 {
		c.problems = append(c.problems, fmt.Sprintf("... and %d more problems", c.more))
	}
	return fmt.Errorf("%d files found, the store has %d keys:\n%s", c.files, c.keys.Len(), strings.Join(c.problems, "\n"))
}

// scaleFind runs `find root -type f` and checks that it prints exactly the
// keys. It returns how many files find printed.
func scaleFind(root string, keys *testenv.GenS3Keys) (int, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("find", root, "-type", "f")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("find %s -type f: %v: %s", root, err, stderr.Bytes())
	}
	c := newScaleKeySet(keys)
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		rel, ok := strings.CutPrefix(line, root+"/")
		if !ok {
			c.problem("find printed %q, not a path under %s", line, root)
			continue
		}
		c.file(rel)
	}
	return c.files, c.err()
}

// scaleWalk walks root with an lstat of every entry and checks that it
// holds exactly the keys as regular files of size bytes, under exactly the
// directories the keys imply. It returns how many files it found.
func scaleWalk(root string, keys *testenv.GenS3Keys, size int64) (int, error) {
	dirs := map[string]bool{"train": false}
	for c := 0; c < keys.Dirs(); c++ {
		dirs[strings.TrimSuffix(keys.DirPrefix(c), "/")] = false
	}
	c := newScaleKeySet(keys)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == root {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			if _, ok := dirs[rel]; !ok {
				c.problem("unexpected directory %q", rel)
				return fs.SkipDir
			}
			dirs[rel] = true
			return nil
		}
		switch {
		case !c.file(rel):
		case !info.Mode().IsRegular():
			c.problem("%q has mode %v, want a regular file", rel, info.Mode())
		case info.Size() != size:
			c.problem("%q has size %d, want %d", rel, info.Size(), size)
		}
		return nil
	})
	if err != nil {
		return c.files, fmt.Errorf("after %d files: %w", c.files, err)
	}
	for dir, found := range dirs {
		if !found {
			c.problem("directory %q is missing from the mount", dir)
		}
	}
	return c.files, c.err()
}

// scaleProcMem is pid's VmRSS and VmHWM (peak RSS) in bytes.
func scaleProcMem(t *testing.T, pid int) (rss, hwm int64) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("daemon memory: %v", err)
	}
	rss, hwm = -1, -1
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	if rss < 0 || hwm < 0 {
		t.Fatalf("no VmRSS or VmHWM in /proc/%d/status:\n%s", pid, data)
	}
	return rss, hwm
}

// scaleMB formats bytes in MB of 10^6 bytes.
func scaleMB(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }
