package fs

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/dsmount/dsmount/backend"
)

// FuzzBuildTree: whatever keys and sizes a listing holds (a store's
// answer, or a listing read back from the index), the tree serves as
// files only keys that can be paths, with a size that is not negative,
// each once and found where its key says; every other key is skipped or
// is a directory marker; a walk from the root finds each file once,
// under names that are single path components.
func FuzzBuildTree(f *testing.F) {
	join := func(keys ...string) []byte { return []byte(strings.Join(keys, "\xff")) }
	f.Add(join("a/b/c.bin", "a/d.bin", "top.txt", "marker/", "a//b", "./x", "../y", "bad\x00nul", "/lead", "p", "p/q", "dup", "dup"), []byte{1, 2, 3})
	f.Add(join("", "/", ControlName, ControlName+"/x", strings.Repeat("n", 256), "x/"+strings.Repeat("n", 255)), []byte{0})
	f.Add(join("neg", "neg/x", "zero", "a/b/"), []byte{0xff, 5, 0, 0x80})
	f.Add(join("a", "a/b", "a/b/c", "a/b/c/"), []byte{})
	f.Fuzz(func(t *testing.T, keyBytes, sizes []byte) {
		keys := strings.Split(string(keyBytes), "\xff")
		l := &backend.Listing{}
		for i, k := range keys {
			size := int64(0)
			if len(sizes) > 0 {
				size = int64(int8(sizes[i%len(sizes)])) << 20 // negative ones too
			}
			l.Append(backend.Object{Key: k, Size: size, Version: "v", ModTime: time.Unix(1, 0)})
		}
		tr := buildTree(l, time.Unix(2, 0), ControlName)
		if tr.fileCount()+len(tr.skipped) > len(keys) {
			t.Fatalf("%d keys: %d files and %d skipped", len(keys), tr.fileCount(), len(tr.skipped))
		}
		for _, s := range tr.skipped {
			if !bytes.Contains(append(append([]byte{0xff}, keyBytes...), 0xff), []byte("\xff"+s.Key+"\xff")) || s.Reason == "" || strings.Contains(s.Reason, "\n") {
				t.Fatalf("skipped %+v, not a listed key with a reason", s)
			}
		}
		seen := map[string]bool{}
		for i := range tr.fileCount() {
			e := entry{idx: uint32(i)}
			obj := tr.obj(e)
			if badPath(obj.Key) != "" || obj.Size < 0 || seen[obj.Key] || strings.HasPrefix(obj.Key+"/", ControlName+"/") {
				t.Fatalf("file %q of size %d served (twice: %v)", obj.Key, obj.Size, seen[obj.Key])
			}
			seen[obj.Key] = true
			if got, ok := tr.lookup(obj.Key); !ok || got != e {
				t.Fatalf("file %q is not found at its key", obj.Key)
			}
		}
		walked := 0
		var walk func(d entry, depth int)
		walk = func(d entry, depth int) {
			if depth > len(keyBytes)+1 {
				t.Fatal("the tree is deeper than its keys are long")
			}
			tr.each(d, func(name string, e entry) {
				if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
					t.Fatalf("entry named %q", name)
				}
				if e.isDir() {
					walk(e, depth+1)
				} else {
					walked++
				}
			})
		}
		walk(tr.root(), 0)
		if walked != tr.fileCount() {
			t.Fatalf("a walk finds %d files of %d", walked, tr.fileCount())
		}
	})
}
