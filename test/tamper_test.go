package test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// TestCacheFilesTamperedUnderTheDaemon: cache files are deleted, replaced,
// truncated and re-extended, or overwritten in place while the daemon
// runs and trusts what it wrote or checked earlier (a disk clean-up tool,
// an admin, a second program, bit rot). After the page cache is dropped,
// every byte read through the mount must still be the object's: the
// daemon notices and refetches, whatever the fast path. Both kinds of
// cache file are tampered with: the file of an object of several chunks
// (data/) and the pack holding the small objects (packs/).
func TestCacheFilesTamperedUnderTheDaemon(t *testing.T) {
	const bucket = "tamper"
	m, src := mirroredBucket(t, bucket)
	r := rand.New(rand.NewPCG(21, 1))
	for name, size := range map[string]int{"large.bin": 6<<20 + 12345, "small-0.bin": 150_000, "small-1.bin": 70_000} {
		putRandomFile(t, r, src, name, size, m, bucket)
	}
	faults := testenv.TamperKinds
	for _, fastPath := range []string{"no-open", "passthrough", "off"} {
		for _, target := range []string{"data", "packs"} {
			if target == "packs" && fastPath == "passthrough" {
				continue // small objects are never passed through
			}
			for _, fault := range faults {
				t.Run(fastPath+"/"+target+"/"+fault, func(t *testing.T) {
					cacheDir, mp := t.TempDir(), t.TempDir()
					d := mountS3(t, m, bucket, "", mp, cacheDir, "--chunk-size", "1M", "--fast-path", fastPath)
					names := []string{"large.bin", "small-0.bin", "small-1.bin"}
					readAllRight(t, src, mp, names, "first read")
					// Twice: a passthrough mount hands a wholly cached
					// file to the kernel from its second open on.
					readAllRight(t, src, mp, names, "second read")
					victim := cacheFileOf(t, cacheDir, target)
					tamper(t, victim, fault, r)
					if fault == "delete" && target == "data" {
						// A read of one chunk refetches it into a new
						// file, where the other chunks are holes.
						refetchOneChunk(t, mp, "large.bin", victim)
					}
					for _, n := range names {
						if err := testenv.DropPageCache(filepath.Join(mp, n)); err != nil {
							t.Fatalf("dropping %s from the page cache: %v", n, err)
						}
					}
					readAllRight(t, src, mp, names, "after the "+fault+" of "+victim)
					readAllRight(t, src, mp, names, "once more after the "+fault)
					d.Stop()
				})
			}
		}
	}
}

// mirroredBucket makes bucket on the shared MinIO and a new directory to
// hold its objects' originals, for putRandomFile to write both.
func mirroredBucket(t *testing.T, bucket string) (*testenv.MinIO, string) {
	t.Helper()
	m := sharedMinIO(t)
	m.CreateBucket(bucket)
	return m, t.TempDir()
}

// putRandomFile writes size random bytes to src/name and, with m, to
// bucket/name.
func putRandomFile(t *testing.T, r *rand.Rand, src, name string, size int, m *testenv.MinIO, bucket string) {
	t.Helper()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	path := filepath.Join(src, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if m != nil {
		m.PutObject(bucket, name, data)
	}
}

// readAllRight reads each name through mp and wants the bytes of src.
func readAllRight(t *testing.T, src, mp string, names []string, when string) {
	t.Helper()
	for _, n := range names {
		got, err := os.ReadFile(filepath.Join(mp, n))
		if err != nil {
			t.Fatalf("%s: reading %s: %v", when, n, err)
		}
		if err := testenv.CompareFile(src, n, got); err != nil {
			t.Fatalf("%s: wrong bytes: %v", when, err)
		}
	}
}

// refetchOneChunk reads a byte in the middle of rel through mp, whose
// cache file at path is gone, until a chunk is fetched again into a new
// cache file there. Not at offset 0: a read there starts the sequential
// readahead, which would refetch every chunk. Chunk by chunk: a chunk
// fetched ahead earlier may still be staged in memory, and served from
// there, reaching no file at all.
func refetchOneChunk(t *testing.T, mp, rel, path string) {
	t.Helper()
	for off := int64(5 << 19); ; off += 1 << 20 {
		if err := testenv.DropPageCache(filepath.Join(mp, rel)); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(mp, rel))
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.ReadAt(make([]byte, 1), off)
		f.Close()
		if err != nil {
			t.Fatalf("reading a byte of %s at %d: %v (no chunk read made a new cache file)", rel, off, err)
		}
		err = testenv.WaitFor(5*time.Second, 20*time.Millisecond, "the refetched chunk's new cache file", func() (bool, error) {
			_, err := os.Stat(path)
			return err == nil, nil
		})
		if err == nil {
			break
		}
	}
	if err := testenv.DropPageCache(filepath.Join(mp, rel)); err != nil {
		t.Fatal(err)
	}
}

// cacheFileOf returns the one regular file under cacheDir/sub.
func cacheFileOf(t *testing.T, cacheDir, sub string) string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(filepath.Join(cacheDir, sub), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			found = append(found, p)
		}
		return err
	})
	if err != nil || len(found) != 1 {
		t.Fatalf("files under %s/%s: %v (%v); want exactly one", cacheDir, sub, found, err)
	}
	return found[0]
}

// tamper does one fault (testenv.TamperKinds) to the cache file path.
func tamper(t *testing.T, path, fault string, r *rand.Rand) {
	t.Helper()
	if err := testenv.TamperFile(path, fault, r); err != nil {
		t.Fatal(err)
	}
}
