package test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// TestS3WarmRemountZeroGETs mounts the shared dataset from MinIO, verifies
// every byte, unmounts, remounts on the same cache dir and verifies every
// byte again, asserting from MinIO's own metrics that the second mount made
// no GetObject request at all (not at start, not during the pass, not in the
// background before it exited).
func TestS3WarmRemountZeroGETs(t *testing.T) {
	src, paths := sharedDataset(t)
	m := sharedMinIO(t)
	cacheDir, mp := t.TempDir(), t.TempDir()

	g0, b0 := m.GetObjectCount()
	d := mountS3(t, m, dataBucket, dataPrefix, mp, cacheDir, "--cache-size", "2G")
	if err := testenv.CompareListings(src, mp); err != nil {
		t.Errorf("listings: %v", err)
	}
	// S3 has no directories and its mtimes are LastModified: the upload time,
	// to the second.
	lo, hi := fixtures.uploadBeg.Add(-2*time.Second), fixtures.uploadEnd.Add(2*time.Second)
	err := testenv.CompareStats(src, mp, paths, func(rel string, _, got os.FileInfo) error {
		if mt := got.ModTime(); mt.Before(lo) || mt.After(hi) {
			return fmt.Errorf("%s: mtime %v through the mount, want the upload time (%v .. %v)", rel, mt, lo, hi)
		}
		return nil
	})
	if err != nil {
		t.Errorf("stat: %v", err)
	}
	// Cold: many readers on one large file at once (they share chunk
	// fetches), and random preads on the other.
	if err := testenv.ReadSameFileParallel(src, mp, "large/large-0.bin", 8, 1<<20); err != nil {
		t.Error(err)
	}
	if err := testenv.RandomReads(src, mp, "large/large-1.bin", 400, 4<<20, 1); err != nil {
		t.Error(err)
	}
	testenv.CompareTree(t, src, mp, paths, 8, 1)
	d.NoErrorLogs()
	d.Stop()

	g1, b1 := m.GetObjectCount()
	t.Logf("cold mount: %d GetObject requests, %.1f MiB sent by MinIO (dataset %.1f MiB)",
		g1-g0, float64(b1-b0)/(1<<20), float64(testenv.DatasetSize(mainSpec))/(1<<20))
	if g1 == g0 {
		t.Fatal("the cold pass made no GetObject requests according to MinIO's metrics; the counter is broken")
	}

	d = mountS3(t, m, dataBucket, dataPrefix, mp, cacheDir, "--cache-size", "2G")
	g2, _ := m.GetObjectCount()
	if g2 != g1 {
		t.Errorf("remount on a warm cache made %d GetObject requests before any read", g2-g1)
	}
	if err := testenv.CompareListings(src, mp); err != nil {
		t.Errorf("listings after remount: %v", err)
	}
	testenv.CompareTree(t, src, mp, paths, 8, 2)
	if err := testenv.RandomReads(src, mp, "large/large-0.bin", 400, 4<<20, 2); err != nil {
		t.Error(err)
	}
	if err := testenv.MmapCompare(src, mp, "large/large-1.bin"); err != nil {
		t.Error(err)
	}
	g3, _ := m.GetObjectCount()
	if g3 != g2 {
		t.Errorf("verified pass over a warm cache made %d GetObject requests, want 0", g3-g2)
	}
	d.NoErrorLogs()
	d.Stop()
	if g4, _ := m.GetObjectCount(); g4 != g3 {
		t.Errorf("warm mount made %d GetObject requests after the pass, before exiting; want 0", g4-g3)
	}
}

// objStore is a bucket a test can write to and mount.
type objStore interface {
	put(t *testing.T, key string, data []byte)
	mount(t *testing.T, mp, cacheDir string, extra ...string) *testenv.Mount
}

type minioStore struct {
	m      *testenv.MinIO
	bucket string
}

func (s minioStore) put(t *testing.T, key string, data []byte) {
	s.m.WithT(t).PutObject(s.bucket, key, data)
}
func (s minioStore) mount(t *testing.T, mp, cacheDir string, extra ...string) *testenv.Mount {
	return mountS3(t, s.m, s.bucket, "", mp, cacheDir, extra...)
}

type fakeStore struct{ f *testenv.FakeS3 }

func (s fakeStore) put(t *testing.T, key string, data []byte) { s.f.Put(key, data) }
func (s fakeStore) mount(t *testing.T, mp, cacheDir string, extra ...string) *testenv.Mount {
	return testenv.StartMount(t, testenv.MountConfig{
		Bin: dsmountBin, Source: "s3://" + s.f.Bucket, Mountpoint: mp,
		Args: append(append([]string{"--cache-dir", cacheDir}, s.f.MountArgs()...), extra...), Env: s.f.Env(),
	})
}

// TestS3OverwriteNeverMixes overwrites an object of several chunks while it
// is mounted and part-read. Every later read must fail or return the old
// bytes at that offset: never new bytes, never a mix. A remount with
// --refresh must then serve the new content entirely. It runs against MinIO,
// and against a store that ignores If-Match (as some S3-compatible stores
// do), where only the daemon's own ETag check stands between old and new.
func TestS3OverwriteNeverMixes(t *testing.T) {
	t.Run("minio", func(t *testing.T) {
		m := sharedMinIO(t)
		m.CreateBucket("overwrite")
		testOverwrite(t, minioStore{m, "overwrite"})
	})
	t.Run("store_ignoring_if_match", func(t *testing.T) {
		f := testenv.StartFakeS3(t, "overwrite")
		f.IgnoreIfMatch = true
		testOverwrite(t, fakeStore{f})
	})
}

func testOverwrite(t *testing.T, st objStore) {
	const (
		key   = "data/obj.bin"
		size  = 8<<20 + 4099 // 9 chunks of 1 MiB, the last partial
		chunk = 1 << 20
	)
	oldData := testenv.Bytes(100, 1, size)
	newData := testenv.Bytes(200, 1, size)
	st.put(t, key, oldData)
	st.put(t, "data/other.bin", testenv.Bytes(100, 2, 3000))

	cacheDir, mp := t.TempDir(), t.TempDir()
	d := st.mount(t, mp, cacheDir, "--chunk-size", "1M")
	file := filepath.Join(mp, "data", "obj.bin")

	held, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	buf := make([]byte, chunk)
	if n, err := held.ReadAt(buf, 0); err != nil || n != chunk || !bytes.Equal(buf, oldData[:chunk]) {
		t.Fatalf("first chunk before the overwrite: n=%d err=%v equal=%v", n, err, bytes.Equal(buf[:n], oldData[:n]))
	}

	st.put(t, key, newData)

	// Reads of 256 KiB (4 per chunk) across the whole object, through the
	// descriptor opened before the overwrite.
	type tally struct{ old, new, failed int }
	classify := func(f *os.File, label string) tally {
		var tl tally
		errs := map[string]int{}
		const step = 256 << 10
		p := make([]byte, step)
		for off := int64(0); off < size; off += step {
			n, err := f.ReadAt(p, off)
			want := min(step, size-int(off))
			if n == want && (err == nil || err == io.EOF) {
				switch {
				case bytes.Equal(p[:n], oldData[off:off+int64(n)]):
					tl.old++
				case bytes.Equal(p[:n], newData[off:off+int64(n)]):
					tl.new++
					t.Errorf("%s: read at %d returned NEW bytes", label, off)
				default:
					t.Errorf("%s: read at %d returned bytes that are neither old nor new (%s)", label, off, mixDesc(p[:n], oldData[off:], newData[off:]))
				}
				continue
			}
			if err == nil || err == io.EOF {
				t.Errorf("%s: short read at %d: %d bytes, want %d, err %v", label, off, n, want, err)
				continue
			}
			tl.failed++
			errs[errnoName(err)]++
			if n > 0 && !bytes.Equal(p[:n], oldData[off:off+int64(n)]) {
				t.Errorf("%s: failed read at %d (%v) still returned %d bytes that are not the old ones", label, off, err, n)
			}
		}
		t.Logf("%s: %d reads old, %d new, %d failed %v", label, tl.old, tl.new, tl.failed, errs)
		return tl
	}
	heldTally := classify(held, "descriptor opened before the overwrite")
	if heldTally.old < 4 {
		t.Errorf("the first chunk (read and cached before the overwrite) was not served from the cache afterwards")
	}

	// A fresh open without --refresh: the mount's listing still names the old
	// version. Old bytes or failures are right; new bytes are tolerated only
	// if the whole file is consistently new (no mixing).
	fresh, err := os.Open(file)
	if err != nil {
		t.Errorf("open after the overwrite: %v", err)
	} else {
		var tl tally
		func() {
			defer fresh.Close()
			// Count without failing on new bytes: check consistency below.
			var old, nw, failed, other int
			p := make([]byte, 256<<10)
			for off := int64(0); off < size; off += int64(len(p)) {
				n, err := fresh.ReadAt(p, off)
				if err != nil && err != io.EOF {
					failed++
					continue
				}
				switch {
				case bytes.Equal(p[:n], oldData[off:off+int64(n)]):
					old++
				case bytes.Equal(p[:n], newData[off:off+int64(n)]):
					nw++
				default:
					other++
				}
			}
			tl = tally{old, nw, failed}
			if other > 0 {
				t.Errorf("fresh open: %d reads returned bytes that are neither old nor new", other)
			}
			if old > 0 && nw > 0 {
				t.Errorf("fresh open: MIXED old (%d reads) and new (%d reads) bytes in one file", old, nw)
			}
		}()
		t.Logf("fresh open after the overwrite: %d reads old, %d new, %d failed", tl.old, tl.new, tl.failed)
	}
	if st, err := os.Stat(file); err != nil || st.Size() != size {
		t.Errorf("stat after the overwrite: %v %v", st, err)
	}
	held.Close()
	d.Stop()

	// Without --refresh the remount keeps the stored listing: old or fail.
	d = st.mount(t, mp, cacheDir, "--chunk-size", "1M")
	if f, err := os.Open(file); err != nil {
		t.Errorf("open after a plain remount: %v", err)
	} else {
		classify(f, "plain remount (stored listing)")
		f.Close()
	}
	d.Stop()

	d = st.mount(t, mp, cacheDir, "--chunk-size", "1M", "--refresh")
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read after remount with --refresh: %v", err)
	}
	if err := testenv.Diff("data/obj.bin (want the new content after --refresh)", got, newData); err != nil {
		t.Error(err)
	}
	if got, err := os.ReadFile(filepath.Join(mp, "data", "other.bin")); err != nil || !bytes.Equal(got, testenv.Bytes(100, 2, 3000)) {
		t.Errorf("untouched object after --refresh: err %v", err)
	}
	d.Stop()
}

func mixDesc(got, old, nw []byte) string {
	var o, n, neither int
	for i := range got {
		switch {
		case got[i] == old[i]:
			o++
		case got[i] == nw[i]:
			n++
		default:
			neither++
		}
	}
	return fmt.Sprintf("%d bytes match old, %d match new, %d neither", o, n, neither)
}

func errnoName(err error) string {
	var en syscall.Errno
	if errors.As(err, &en) {
		return en.Error()
	}
	return err.Error()
}

// oddKeys are keys that cannot all be file names; oddGood the ones that
// can and must be served.
var (
	oddGood = map[string][]byte{
		"ok.txt":               []byte("ok\n"),
		"sub/ok2.txt":          []byte("ok2\n"),
		"dir/inside.txt":       []byte("inside\n"),
		"back\\slash.txt":      []byte("backslash\n"),
		"deep/a/b/c/d/e/f.txt": []byte("deep\n"),
	}
	oddKeys = map[string][]byte{
		"a//b":                             []byte("double slash"),
		"./x":                              []byte("dot"),
		"../y":                             []byte("dotdot"),
		"x/./y":                            []byte("inner dot"),
		"x/../z":                           []byte("inner dotdot"),
		"dir/":                             nil, // marker for a directory that has files
		"emptydir/":                        nil, // marker for a directory with nothing else
		"nested/marker/":                   nil,
		"p":                                []byte("p is a file"),
		"p/q":                              []byte("p is also a prefix"),
		"long/" + strings.Repeat("n", 300): []byte("name too long for a file system"),
		"new\nline":                        []byte("newline"),
		"trailing/":                        []byte("a marker with content"),
		"/leading":                         []byte("leading slash"),
		".":                                []byte("just a dot"),
		"..":                               []byte("just two dots"),
		"dots/.":                           []byte("dot as a last component"),
	}
)

// TestS3OddKeys puts keys that cannot all be file names into a bucket. The
// mount must start, serve the keys that can be files, and survive a walk and
// read of everything it shows. MinIO refuses several of the keys (AWS S3
// takes them), so the same check also runs against testenv.FakeS3, which
// stores anything.
func TestS3OddKeys(t *testing.T) {
	t.Run("minio", func(t *testing.T) {
		m := sharedMinIO(t)
		const bucket = "oddkeys"
		m.CreateBucket(bucket)
		for k, v := range oddGood {
			m.PutObject(bucket, k, v)
		}
		stored := map[string]bool{}
		for k, v := range oddKeys {
			if err := m.PutObjectErr(t.Context(), bucket, k, v); err != nil {
				t.Logf("MinIO refused key %q: %v", k, lastPart(err.Error()))
				continue
			}
			stored[k] = true
		}
		t.Logf("odd keys MinIO stored: %q", keys(stored))
		d := mountS3(t, m, bucket, "", "", t.TempDir())
		checkOddMount(t, d, stored)
	})
	t.Run("fake", func(t *testing.T) {
		f := testenv.StartFakeS3(t, "oddkeys")
		stored := map[string]bool{}
		for k, v := range oddGood {
			f.Put(k, v)
		}
		for k, v := range oddKeys {
			f.Put(k, v)
			stored[k] = true
		}
		d := testenv.StartMount(t, testenv.MountConfig{
			Bin: dsmountBin, Source: "s3://oddkeys", Mountpoint: t.TempDir(),
			Args: append([]string{"--cache-dir", t.TempDir()}, f.MountArgs()...), Env: f.Env(),
		})
		checkOddMount(t, d, stored)
	})
}

func checkOddMount(t *testing.T, d *testenv.Mount, stored map[string]bool) {
	t.Helper()
	mp := d.Dir()
	for k, want := range oddGood {
		got, err := os.ReadFile(filepath.Join(mp, filepath.FromSlash(k)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("valid key %q: read %q, %v; want %q", k, got, err, want)
		}
	}
	// Walk everything the mount shows; read every file. Errors on odd
	// entries are fine; crashes, impossible names and hangs are not.
	var walked []string
	err := filepath.WalkDir(mp, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			t.Logf("walk: %v", err)
			return nil
		}
		rel, _ := filepath.Rel(mp, p)
		walked = append(walked, rel)
		name := e.Name()
		if p != mp && (name == "" || name == "." || name == ".." || strings.Contains(name, "/") || len(name) > 255) {
			t.Errorf("the mount lists an impossible name %q under %q", name, filepath.Dir(rel))
		}
		if e.Type().IsRegular() {
			if _, err := os.ReadFile(p); err != nil {
				t.Logf("read %s: %v", rel, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	t.Logf("the mount shows: %q", walked)
	// Raw getdents, so "." and ".." entries the daemon might invent for odd
	// keys are seen (os.ReadDir hides them). POSIX lets a directory list "."
	// and ".." or not, but never twice, and never a name with a '/'.
	for _, dir := range []string{"", "x", "dots", "long"} {
		names, err := rawNames(filepath.Join(mp, dir))
		if err != nil {
			continue
		}
		seen := map[string]int{}

		for _, n := range names {
			seen[n]++
			if seen[n] > 1 || n == "" || strings.Contains(n, "/") {
				t.Errorf("directory %q lists %q twice or an impossible name: %q", dir, n, names)
			}
		}
	}
	if stored["emptydir/"] {
		if st, err := os.Stat(filepath.Join(mp, "emptydir")); err != nil || !st.IsDir() {
			t.Errorf("directory marker emptydir/: stat %v, %v; want an (empty) directory", st, err)
		} else if ents, _ := os.ReadDir(filepath.Join(mp, "emptydir")); len(ents) != 0 {
			t.Errorf("emptydir should be empty, has %v", ents)
		}
	}
	if stored["nested/marker/"] {
		if st, err := os.Stat(filepath.Join(mp, "nested", "marker")); err != nil || !st.IsDir() {
			t.Errorf("directory marker nested/marker/: stat %v, %v; want a directory", st, err)
		}
	}
	if st, err := os.Stat(filepath.Join(mp, "dir")); err != nil || !st.IsDir() {
		t.Errorf("dir (marker dir/ plus dir/inside.txt): %v %v, want a directory", st, err)
	}
	if stored["p"] && stored["p/q"] {
		st, err := os.Stat(filepath.Join(mp, "p"))
		switch {
		case err != nil:
			t.Errorf("key both file and prefix: stat p: %v (one of the two should be served)", err)
		case st.IsDir():
			if got, err := os.ReadFile(filepath.Join(mp, "p", "q")); err != nil || string(got) != "p is also a prefix" {
				t.Errorf("p is a directory but p/q reads %q, %v", got, err)
			}
		default:
			if got, err := os.ReadFile(filepath.Join(mp, "p")); err != nil || string(got) != "p is a file" {
				t.Errorf("p is a file but reads %q, %v", got, err)
			}
		}
	}
	// Nothing outside the mount was created by "../y" and friends.
	parent := filepath.Dir(mp)
	for _, n := range []string{"y", "z", "x"} {
		if _, err := os.Lstat(filepath.Join(parent, n)); err == nil {
			t.Errorf("%s appeared next to the mountpoint", n)
		}
	}
	if d.Exited() {
		t.Fatalf("dsmount exited during the walk: %v", d.ExitState())
	}
	d.Stop()
}

// rawNames lists a directory with getdents, "." and ".." included.
func rawNames(dir string) ([]string, error) {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	var names []string
	buf := make([]byte, 64<<10)
	for {
		n, err := syscall.ReadDirent(fd, buf)
		if err != nil {
			return names, err
		}
		if n <= 0 {
			return names, nil
		}
		// linux_dirent64: ino u64, off s64, reclen u16, type u8, name NUL-terminated.
		// (syscall.ParseDirent would drop "." and "..".)
		for b := buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return names, fmt.Errorf("bad dirent reclen %d", reclen)
			}
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			names = append(names, string(name))
			b = b[reclen:]
		}
	}
}

func lastPart(s string) string {
	if i := strings.LastIndex(s, "api error "); i >= 0 {
		return s[i+len("api error "):]
	}
	return firstLine(s)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
