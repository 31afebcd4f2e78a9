package test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

func mountLocal(t *testing.T, src string, extra ...string) (*testenv.Mount, string) {
	t.Helper()
	mp := t.TempDir()
	args := append([]string{"--cache-dir", t.TempDir(), "--cache-size", "1G"}, extra...)
	return testenv.StartMount(t, testenv.MountConfig{Bin: dsmountBin, Source: src, Mountpoint: mp, Args: args}), mp
}

// TestNoOpenHotReadsSkipTheDaemon: a dataset of small files mounts in
// no-open mode (auto); a first pass reads every byte right, and a second
// pass is served by the kernel alone: the daemon sees no read. The control
// entry still works (stats, warm --check, order), and writes still fail.
func TestNoOpenHotReadsSkipTheDaemon(t *testing.T) {
	src := t.TempDir()
	paths := testenv.GenerateDataset(t, src, testenv.DatasetSpec{Seed: 51, SmallFiles: 300, SmallMax: 128 << 10, FilesPerDir: 100, MaxDepth: 2})
	_, mp := mountLocal(t, src)
	if fp := testenv.Stats(t, dsmountBin, mp).Mount.FastPath; fp != "no-open" {
		t.Fatalf("a mount of small files runs fast path %q; want no-open", fp)
	}
	testenv.CompareTree(t, src, mp, paths, 8, 1)
	cold := testenv.Stats(t, dsmountBin, mp).Mount
	if cold.Reads == 0 {
		t.Fatal("the first pass reached the daemon with no read")
	}
	// A hot pass is served by the kernel: the daemon sees no read of a
	// file whose pages the kernel still holds. In about one full-suite run
	// in twenty, under the load of the other packages' tests, one read of
	// the pass after the cold one reached the daemon; never seen running
	// alone (50 runs), nor under induced memory pressure (8). Each pass
	// first notes which files are not wholly resident (the kernel may let
	// go of pages under memory pressure, which is not the daemon's doing),
	// and a pass that reads says whether its reads are those files' or
	// more, so the next flake tells its cause. A pass after that must make
	// none.
	before, lookups := cold.Reads, cold.Lookups
	for pass := int64(2); ; pass++ {
		var dropped []string
		for _, p := range paths {
			if f, err := testenv.Residency(mpPath(mp, p)); err != nil {
				t.Fatal(err)
			} else if f < 1 {
				dropped = append(dropped, p)
			}
		}
		testenv.CompareTree(t, src, mp, paths, 8, pass)
		hot := testenv.Stats(t, dsmountBin, mp).Mount
		reads := hot.Reads - before
		if reads == 0 {
			break
		}
		if pass == 3 {
			t.Errorf("hot pass %d in no-open mode made %d daemon reads; %d files were not wholly in the page cache before it (%.10q): want none", pass, reads, len(dropped), dropped)
			break
		}
		why := "for files the kernel had let go of"
		if reads > int64(len(dropped)) {
			// Pages may also go during the pass; the next pass decides.
			why = "more than the files not resident before it: pages let go of during the pass, or an invalidation"
		}
		// A LOOKUP since the last pass is of an inode the kernel evicted
		// (its pages went with it).
		t.Logf("hot pass %d made %d daemon reads, %s (%d not resident: %.10q; %d files looked up again); another pass must make none",
			pass, reads, why, len(dropped), dropped, hot.Lookups-lookups)
		before, lookups = hot.Reads, hot.Lookups
	}

	// The chunks the passes read are written to the cache after their
	// replies went out: on a loaded machine some are still being written.
	var c testenv.WarmCheck
	err := testenv.WaitFor(20*time.Second, 50*time.Millisecond, "every file cached", func() (bool, error) {
		c = testenv.WarmCheckT(t, dsmountBin, mp)
		return c.FilesCached == c.FilesTotal && c.FilesTotal == int64(len(paths)), nil
	})
	if err != nil {
		t.Errorf("warm --check on a no-open mount: %+v; want all %d files cached (%v)", c, len(paths), err)
	}
	list := writeList(t, t.TempDir(), "order", paths)
	if res := declare(t, mp, "job", 0, list); res.Declared != len(paths) {
		t.Errorf("order on a no-open mount declared %d of %d", res.Declared, len(paths))
	}

	f, err := os.OpenFile(mpPath(mp, paths[0]), os.O_WRONLY, 0)
	if err == nil {
		_, err = f.Write([]byte("x"))
		f.Close()
	}
	if !errors.Is(err, syscall.EROFS) && !errors.Is(err, syscall.EACCES) && !errors.Is(err, syscall.EPERM) {
		t.Errorf("writing a file of a no-open mount: %v; want EROFS", err)
	}
	if err := os.WriteFile(filepath.Join(mp, "new"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("creating a file: %v; want EROFS", err)
	}
	if err := os.WriteFile(filepath.Join(mp, "sub", ".dsmount-control.x"), nil, 0o644); err == nil {
		t.Error("a control session below the root was created")
	}
}

// TestPassthroughLargeFile: a dataset of large files mounts in passthrough
// (auto). A file read while not wholly cached is served through the page
// cache, also for a second handle opened while the first is open (the
// kernel would refuse to mix the two kinds); once cached and closed, a new
// open is passthrough: the bytes match and the daemon sees no read. Where
// the kernel can't do passthrough, the mount must say so and serve through
// the page cache.
func TestPassthroughLargeFile(t *testing.T) {
	src := t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<20) // 48 MiB
	for i := range big {
		big[i] ^= byte(i >> 12)
	}
	if err := os.WriteFile(filepath.Join(src, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "small.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, mp := mountLocal(t, src)
	file := filepath.Join(mp, "big.bin")

	f1, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 1<<20)
	if _, err := io.ReadFull(f1, head); err != nil || !bytes.Equal(head, big[:1<<20]) {
		t.Fatalf("first MiB through the mount: %v (bytes equal: %v)", err, bytes.Equal(head, big[:1<<20]))
	}
	// A second handle while the first (page-cache) one is open.
	got, err := os.ReadFile(file)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("whole file through a second handle: %v (bytes equal: %v)", err, bytes.Equal(got, big))
	}
	f1.Close()
	waitNoFetches(t, mp)

	s := testenv.Stats(t, dsmountBin, mp).Mount
	before := s.Reads
	got, err = os.ReadFile(file)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("whole file once cached: %v (bytes equal: %v)", err, bytes.Equal(got, big))
	}
	after := testenv.Stats(t, dsmountBin, mp).Mount

	// Many concurrent opens of the cached file (loader workers opening one
	// shard): each must get the same kind of open, never EIO.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				f, err := os.Open(file)
				if err != nil {
					errs <- err
					return
				}
				buf := make([]byte, 1<<20)
				_, err = f.ReadAt(buf, 5<<20)
				f.Close()
				if err != nil || !bytes.Equal(buf, big[5<<20:6<<20]) {
					errs <- fmt.Errorf("concurrent read: %v (bytes equal: %v)", err, bytes.Equal(buf, big[5<<20:6<<20]))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	switch after.FastPath {
	case "passthrough":
		// The page cache of the FUSE inode was not used by passthrough
		// opens, so any read here would have come to the daemon.
		if after.Reads != before {
			t.Errorf("a passthrough read of a cached file made %d daemon reads; want none", after.Reads-before)
		}
	case "off":
		if !strings.Contains(m.Stderr(), "passthrough is not available") {
			t.Errorf("passthrough fell back to %q without saying why; log:\n%s", after.FastPath, m.Stderr())
		}
		t.Logf("this kernel can't do passthrough; the mount said so and served through the page cache")
	default:
		t.Errorf("a mount of large files runs fast path %q; want passthrough (or off, reported)", after.FastPath)
	}
}

// TestFastPathFlag: --fast-path takes its four values and refuses others
// with a one-line usage error.
func TestFastPathFlag(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := testenv.RunCLI(dsmountBin, nil, time.Minute, "mount", src, t.TempDir(), "--cache-dir", t.TempDir(), "--fast-path", "warp")
	if msg := strings.TrimSpace(r.Stderr); r.ExitCode != 1 || !strings.Contains(msg, "--fast-path") || strings.Contains(msg, "\n") {
		t.Errorf("--fast-path warp: exit %d, stderr %q; want exit 1 and one line naming the flag", r.ExitCode, msg)
	}
	_, mp := mountLocal(t, src, "--fast-path", "off")
	if fp := testenv.Stats(t, dsmountBin, mp).Mount.FastPath; fp != "off" {
		t.Errorf("--fast-path off: stats say %q", fp)
	}
	if b, err := os.ReadFile(filepath.Join(mp, "a")); err != nil || string(b) != "a" {
		t.Errorf("read with --fast-path off: %q, %v", b, err)
	}
}

// TestLookupsCounted: the daemon counts the kernel's LOOKUPs (stats'
// lookups), one per file on a first pass over a fresh mount. A directory
// listing is plain READDIR (issue 23: READDIRPLUS kept an inode per entry
// listed, 150 MB for a find of ImageNet): on another fresh mount, listing
// the directories costs no LOOKUP, and the first opens after it one each.
func TestLookupsCounted(t *testing.T) {
	src := t.TempDir()
	paths := testenv.GenerateDataset(t, src, testenv.DatasetSpec{Seed: 53, SmallFiles: 400, SmallMax: 16 << 10, FilesPerDir: 100, MaxDepth: 2})
	lookups := func(mp string) int64 { return testenv.Stats(t, dsmountBin, mp).Mount.Lookups }
	readAll := func(mp string) {
		t.Helper()
		if err := testenv.ReadAllInOrder(mp, paths, 4, func(p string, data []byte) error {
			return testenv.CompareFile(src, p, data)
		}); err != nil {
			t.Fatal(err)
		}
	}

	_, mp := mountLocal(t, src)
	l0 := lookups(mp)
	readAll(mp)
	if n := lookups(mp) - l0; n < int64(len(paths)) {
		t.Errorf("first opens of %d files on a fresh mount: %d lookups counted; want one each at least", len(paths), n)
	}

	_, mp = mountLocal(t, src)
	l0 = lookups(mp)
	dirs := map[string]bool{}
	for _, p := range paths {
		d := filepath.Join(mp, filepath.Dir(filepath.FromSlash(p)))
		if !dirs[d] {
			dirs[d] = true
			if _, err := os.ReadDir(d); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The directories and their parents are looked up, and the stats
	// request's control entry: a few, never one per file.
	if n := lookups(mp) - l0; n > 2*int64(len(dirs))+2 {
		t.Errorf("listing the %d directories of %d files: %d lookups; want a few (the directories), none per file", len(dirs), len(paths), n)
	}
	l0 = lookups(mp)
	readAll(mp)
	if n := lookups(mp) - l0; n < int64(len(paths)) || n > int64(len(paths))+2 {
		t.Errorf("first opens of %d files after listing their directories: %d lookups; want one each", len(paths), n)
	}
}

// TestReadOnlySuperblockKeepsAttributes: a mount's superblock is
// read-only, so the reads the daemon serves leave the kernel's attributes
// of a file valid: the pass after a cold one, opening, fstat()ing and
// reading every file as default loaders do (os.ReadFile, like Python's
// open()), asks the daemon for no attributes. On a writable superblock
// each read marked the file's access time stale, and the next fstat() was
// a GETATTR round trip per file. Control sessions (stats, order) still
// work, over their ioctls.
func TestReadOnlySuperblockKeepsAttributes(t *testing.T) {
	src := t.TempDir()
	paths := testenv.GenerateDataset(t, src, testenv.DatasetSpec{Seed: 52, SmallFiles: 200, SmallMax: 64 << 10, FilesPerDir: 50, MaxDepth: 1})
	_, mp := mountLocal(t, src)
	var st syscall.Statfs_t
	if err := syscall.Statfs(mp, &st); err != nil {
		t.Fatal(err)
	}
	if st.Flags&0x1 == 0 { // ST_RDONLY
		t.Errorf("the mount's flags %#x lack ST_RDONLY", st.Flags)
	}
	readAll := func() {
		t.Helper()
		for _, p := range paths {
			got, err := os.ReadFile(mpPath(mp, p))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(src, p))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: the mount's bytes differ from the source's", p)
			}
		}
	}
	readAll()
	cold := testenv.Stats(t, dsmountBin, mp).Mount
	if cold.Reads == 0 {
		t.Fatal("the cold pass reached the daemon with no read")
	}
	readAll()
	hot := testenv.Stats(t, dsmountBin, mp).Mount
	if n := hot.Getattrs - cold.Getattrs; n > 2 {
		t.Errorf("the pass after the cold one made %d GETATTRs for %d files; want none", n, len(paths))
	}
	list := writeList(t, t.TempDir(), "order", paths)
	if res := declare(t, mp, "job", 0, list); res.Declared != len(paths) {
		t.Errorf("order through a session: declared %d of %d", res.Declared, len(paths))
	}
}
