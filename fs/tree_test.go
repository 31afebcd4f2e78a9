package fs

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dsmount/dsmount/backend"
)

func listingOf(keys ...string) *backend.Listing {
	l := &backend.Listing{}
	for i, k := range keys {
		l.Append(backend.Object{Key: k, Size: int64(i + 1), Version: fmt.Sprint("v", i)})
	}
	return l
}

func TestBuildTreeHandlesOddKeys(t *testing.T) {
	keys := []string{
		"a/b/c.bin", "a/d.bin", "top.txt", "with space/ünï 文件.bin",
		"marker/", "nested/marker/", // directory markers
		"a//b", "./x", "../y", "a/./z", "bad\x00nul", "/lead", strings.Repeat("n", 256),
		"p", "p/q", // file and prefix of the same name: the directory wins
		"a/d.bin/e", // a file's name used as a directory: the directory wins
		"", "/",
		ControlName, ControlName + "/x", // reserved
		"dup", "dup", // the same key twice: one file
	}
	tr := buildTree(listingOf(keys...), time.Now(), ControlName)

	for _, f := range []string{"a/b/c.bin", "top.txt", "with space/ünï 文件.bin", "p/q", "a/d.bin/e", "dup"} {
		if e, ok := tr.lookup(f); !ok || e.isDir() {
			t.Errorf("file %q missing", f)
		} else if got := tr.obj(e).Key; got != f {
			t.Errorf("file %q has the object of %q", f, got)
		}
	}
	for _, d := range []string{"", "a", "a/b", "marker", "nested/marker", "p", "a/d.bin", "nested"} {
		if e, ok := tr.lookup(d); !ok || !e.isDir() {
			t.Errorf("directory %q missing", d)
		}
	}
	for _, missing := range []string{"nope", "a/nope", "top.txt/x", ControlName, "a/b/c.bin/d"} {
		if _, ok := tr.lookup(missing); ok {
			t.Errorf("%q found, want missing", missing)
		}
	}
	skipped := map[string]bool{}
	for _, s := range tr.skipped {
		skipped[s.Key] = true
	}
	for _, k := range []string{"a//b", "./x", "../y", "a/./z", "bad\x00nul", "/lead", strings.Repeat("n", 256), "p", "a/d.bin", "", ControlName, ControlName + "/x", "dup"} {
		if !skipped[k] {
			t.Errorf("key %q not reported as skipped", k)
		}
	}
	if skipped["/"] {
		t.Error("the root's own marker should be ignored silently")
	}
	if tr.fileCount() != 6 {
		t.Errorf("files = %d, want 6", tr.fileCount())
	}
	// Inode numbers are unique; names listed are the names looked up.
	seen := map[uint64]string{}
	var walk func(e entry, path string)
	walk = func(e entry, path string) {
		if prev, dup := seen[tr.ino(e)]; dup {
			t.Errorf("inode %d used by %q and %q", tr.ino(e), prev, path)
		}
		seen[tr.ino(e)] = path
		if e.isDir() {
			for _, d := range tr.listing(e) {
				c, ok := tr.child(e, d.Name)
				if !ok || tr.ino(c) != d.Ino {
					t.Errorf("%s/%s listed (inode %d) but its lookup gives %v, %v", path, d.Name, d.Ino, c, ok)
					continue
				}
				walk(c, path+"/"+d.Name)
			}
		}
	}
	walk(tr.root(), "")
	if len(seen) != tr.fileCount()+tr.dirCount()+1 {
		t.Errorf("walked %d entries, the tree has %d files and %d directories", len(seen), tr.fileCount(), tr.dirCount())
	}
}

// TestBuildTreeMatchesTheListing: whatever order the listing comes in, every
// key is a file at its path, every directory lists its entries sorted, and
// a walk finds each key once.
func TestBuildTreeMatchesTheListing(t *testing.T) {
	var keys []string
	for d := range 30 {
		for f := range 1 + d*7 {
			keys = append(keys, fmt.Sprintf("train/n%03d/img_%d.jpg", d, f))
		}
		keys = append(keys, fmt.Sprintf("train/n%03d.txt", d), fmt.Sprintf("val/%d/deep/er/x.bin", d))
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	tr := buildTree(listingOf(keys...), time.Now(), ControlName)
	if len(tr.skipped) != 0 || tr.fileCount() != len(keys) {
		t.Fatalf("%d files, %d skipped (%v), want %d files", tr.fileCount(), len(tr.skipped), tr.skipped, len(keys))
	}
	for _, k := range keys {
		for _, p := range []string{k, "/" + k, "./" + k, strings.Replace(k, "/", "//", 1), "val/../" + k} {
			if e, ok := tr.lookup(p); !ok || tr.obj(e).Key != k {
				t.Fatalf("lookup(%q) = %v, %v; want %q", p, e, ok, k)
			}
		}
	}
	for _, p := range []string{"train", "/train/", "val/3/deep"} {
		if e, ok := tr.lookup(p); !ok || !e.isDir() {
			t.Errorf("lookup(%q) = %v, %v; want a directory", p, e, ok)
		}
	}
	var found []string
	var walk func(e entry, path string)
	walk = func(e entry, path string) {
		l := tr.listing(e)
		if !slices.IsSortedFunc(l, func(a, b fuse.DirEntry) int { return strings.Compare(a.Name, b.Name) }) {
			t.Errorf("%q lists unsorted", path)
		}
		tr.each(e, func(name string, c entry) {
			if c.isDir() {
				walk(c, path+name+"/")
			} else {
				found = append(found, path+name)
			}
		})
	}
	walk(tr.root(), "")
	slices.Sort(found)
	slices.Sort(keys)
	if !slices.Equal(found, keys) {
		t.Errorf("a walk found %d files, want the %d keys", len(found), len(keys))
	}
}

// BenchmarkBuildTree builds ImageNet's layout: 1,000 directories of 1,281
// files, listed in key order.
func BenchmarkBuildTree(b *testing.B) {
	l := &backend.Listing{}
	for d := range 1000 {
		for f := range 1281 {
			l.Append(backend.Object{Key: fmt.Sprintf("train/n%08d/n%08d_%d.JPEG", d, d, f), Size: 110000,
				Version: "0123456789abcdef0123456789abcdef", ModTime: time.Unix(1700000000, 0)})
		}
	}
	b.ResetTimer()
	for b.Loop() {
		buildTree(l, time.Now(), ControlName)
	}
}
