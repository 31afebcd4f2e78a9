package fs

import (
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dsmount/dsmount/backend"
)

// entry is one file or directory of the tree.
type entry struct {
	name string
	ino  uint64
	obj  backend.Object // files only
	dir  *dirData       // nil for files
}

type dirData struct {
	children map[string]*entry
	mtime    time.Time

	sortOnce sync.Once
	sorted   []fuse.DirEntry
}

func (e *entry) isDir() bool { return e.dir != nil }

// listing returns the directory's entries sorted by name, computed once.
func (d *dirData) listing() []fuse.DirEntry {
	d.sortOnce.Do(func() {
		d.sorted = make([]fuse.DirEntry, 0, len(d.children))
		for name, e := range d.children {
			mode := uint32(fuse.S_IFREG)
			if e.isDir() {
				mode = fuse.S_IFDIR
			}
			d.sorted = append(d.sorted, fuse.DirEntry{Name: name, Ino: e.ino, Mode: mode})
		}
		sort.Slice(d.sorted, func(i, j int) bool { return d.sorted[i].Name < d.sorted[j].Name })
	})
	return d.sorted
}

// SkippedKey is a listed key that the tree leaves out, and why.
type SkippedKey struct {
	Key    string
	Reason string
}

// tree is the immutable namespace of one mount.
type tree struct {
	root    *entry
	files   int
	dirs    int
	skipped []SkippedKey
}

const rootIno = 1

// buildTree makes the namespace from a listing. Directory-marker keys (ending
// in '/') and the prefixes of file keys become directories; a key that is
// both a file and a directory prefix is kept as the directory.
func buildTree(objs []backend.Object, now time.Time) *tree {
	t := &tree{root: &entry{ino: rootIno, dir: &dirData{children: map[string]*entry{}, mtime: now}}}
	nextIno := uint64(rootIno + 1)
	newDir := func(name string) *entry {
		e := &entry{name: name, ino: nextIno, dir: &dirData{children: map[string]*entry{}, mtime: now}}
		nextIno++
		t.dirs++
		return e
	}
	// mkdirs walks (creating) the directories named by parts and returns the
	// last, or nil if a file already stands in the way.
	mkdirs := func(parts []string) *entry {
		d := t.root
		for _, p := range parts {
			c, ok := d.dir.children[p]
			if !ok {
				c = newDir(p)
				d.dir.children[p] = c
			} else if !c.isDir() {
				return nil
			}
			d = c
		}
		return d
	}

	// Directories first, so that a file can't claim a name a directory needs
	// whatever the listing's order.
	type fileKey struct {
		obj   backend.Object
		parts []string
	}
	files := make([]fileKey, 0, len(objs))
	for _, o := range objs {
		key, isMarker := strings.CutSuffix(o.Key, "/")
		parts, reason := splitKey(key)
		if reason != "" {
			if !(isMarker && key == "") { // the root's own marker is harmless
				t.skipped = append(t.skipped, SkippedKey{o.Key, reason})
			}
			continue
		}
		if isMarker {
			mkdirs(parts)
			continue
		}
		mkdirs(parts[:len(parts)-1])
		files = append(files, fileKey{o, parts})
	}
	for _, f := range files {
		d := mkdirs(f.parts[:len(f.parts)-1])
		name := f.parts[len(f.parts)-1]
		if d == nil {
			t.skipped = append(t.skipped, SkippedKey{f.obj.Key, "a parent path is a file"})
			continue
		}
		if _, taken := d.dir.children[name]; taken {
			t.skipped = append(t.skipped, SkippedKey{f.obj.Key, "same name as a directory"})
			continue
		}
		d.dir.children[name] = &entry{name: name, ino: nextIno, obj: f.obj}
		nextIno++
		t.files++
	}
	return t
}

// splitKey splits a key into path components, or says why it can't be a
// path.
func splitKey(key string) ([]string, string) {
	if key == "" {
		return nil, "empty name"
	}
	if strings.IndexByte(key, 0) >= 0 {
		return nil, "contains a NUL byte"
	}
	parts := strings.Split(key, "/")
	for _, p := range parts {
		switch {
		case p == "":
			return nil, "empty path component"
		case p == "." || p == "..":
			return nil, "'.' or '..' path component"
		case len(p) > 255:
			return nil, "path component longer than 255 bytes"
		}
	}
	return parts, ""
}
