package fs

import (
	"strings"
	"testing"
	"time"

	"github.com/dsmount/dsmount/backend"
)

func TestBuildTreeHandlesOddKeys(t *testing.T) {
	keys := []string{
		"a/b/c.bin", "a/d.bin", "top.txt", "with space/ünï 文件.bin",
		"marker/", "nested/marker/", // directory markers
		"a//b", "./x", "../y", "a/./z", "bad\x00nul", "/lead", strings.Repeat("n", 256),
		"p", "p/q", // file and prefix of the same name: the directory wins
		"a/d.bin/e", // a file's name used as a directory: the directory wins
		"", "/",
	}
	var objs []backend.Object
	for _, k := range keys {
		objs = append(objs, backend.Object{Key: k, Size: 1})
	}
	tr := buildTree(objs, time.Now())

	lookup := func(path string) *entry {
		e := tr.root
		for _, p := range strings.Split(path, "/") {
			if e == nil || !e.isDir() {
				return nil
			}
			e = e.dir.children[p]
		}
		return e
	}
	for _, f := range []string{"a/b/c.bin", "top.txt", "with space/ünï 文件.bin", "p/q", "a/d.bin/e"} {
		if e := lookup(f); e == nil || e.isDir() {
			t.Errorf("file %q missing", f)
		}
	}
	for _, d := range []string{"a", "a/b", "marker", "nested/marker", "p", "a/d.bin"} {
		if e := lookup(d); e == nil || !e.isDir() {
			t.Errorf("directory %q missing", d)
		}
	}
	skipped := map[string]bool{}
	for _, s := range tr.skipped {
		skipped[s.Key] = true
	}
	for _, k := range []string{"a//b", "./x", "../y", "a/./z", "bad\x00nul", "/lead", strings.Repeat("n", 256), "p", "a/d.bin", ""} {
		if !skipped[k] {
			t.Errorf("key %q not reported as skipped", k)
		}
	}
	if skipped["/"] {
		t.Error("the root's own marker should be ignored silently")
	}
	if tr.files != 5 {
		t.Errorf("files = %d, want 5", tr.files)
	}
	// Inode numbers are unique.
	seen := map[uint64]string{}
	var walk func(e *entry, path string)
	walk = func(e *entry, path string) {
		if prev, dup := seen[e.ino]; dup {
			t.Errorf("inode %d used by %q and %q", e.ino, prev, path)
		}
		seen[e.ino] = path
		if e.isDir() {
			for name, c := range e.dir.children {
				walk(c, path+"/"+name)
			}
		}
	}
	walk(tr.root, "")
}
