package fs

import (
	"cmp"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dsmount/dsmount/backend"
)

// The tree is built for datasets of millions of files (ImageNet: 1.28M in
// 1,000 directories), so a file costs it 4 bytes: its index into the
// listing, placed so that every directory's files are one run of the
// files table, sorted by name, and its subdirectories one run of the dirs
// table. Names are the listing's own key bytes; a lookup is a binary
// search of the run; a directory's entries are made when it is opened and
// not kept (the kernel caches them, FOPEN_CACHE_DIR). No map or heap
// object per file outlives the build.

// entry is one file or directory of the tree: an index into the tree's
// dirs or files.
type entry struct {
	idx uint32
	dir bool
}

func (e entry) isDir() bool { return e.dir }

// dirData is one directory: its name (a substring of a listed key) and
// its runs of subdirectories and files.
type dirData struct {
	name string
	// base is where a file's name starts in its key: the length of the
	// directory's path and its '/'.
	base             uint32
	subdirs, dirsEnd uint32
	files, filesEnd  uint32
	parent           uint32
}

// SkippedKey is a listed key that the tree leaves out, and why.
type SkippedKey struct {
	Key    string
	Reason string
}

// tree is the immutable namespace of one mount.
//
// Invariants: dirs[0] is the root; the subdirectories of a directory are
// dirs[subdirs:dirsEnd] and its files files[files:filesEnd], each sorted by
// name with no name twice in the directory; a directory's inode number is
// rootIno + its index, a file's rootIno + len(dirs) + its index.
type tree struct {
	l     *backend.Listing
	dirs  []dirData
	files []uint32 // listing indices
	// byPath is built on the first lookup by path (a declaration or a
	// warm): a mount that is only read never needs it, and building it
	// would lengthen a large mount's start-up.
	byPathOnce sync.Once
	byPath     pathIndex
	// empty has a bit set for each file of no bytes, made on first use.
	emptyOnce sync.Once
	empty     []uint64
	mtime     time.Time
	skipped   []SkippedKey
}

const rootIno = 1

func (t *tree) root() entry { return entry{idx: 0, dir: true} }

// ino is e's inode number.
func (t *tree) ino(e entry) uint64 {
	if e.dir {
		return rootIno + uint64(e.idx)
	}
	return rootIno + uint64(len(t.dirs)) + uint64(e.idx)
}

// obj is the object of file e.
func (t *tree) obj(e entry) backend.Object { return t.l.At(int(t.files[e.idx])) }

// isFileKey reports whether file i exists and its key is p.
func (t *tree) isFileKey(i uint32, p string) bool {
	return int(i) < len(t.files) && t.l.Key(int(t.files[i])) == p
}

// Object is file ref's object: the tree is the readahead.Objects of the
// mount's declared orders, whose items name files by index.
func (t *tree) Object(ref uint32) backend.Object { return t.obj(entry{idx: ref}) }

// Empty says whether file ref has no bytes (readahead.Objects), from a
// bitset made once: a declaration asks it of every file it names.
func (t *tree) Empty(ref uint32) bool {
	t.emptyOnce.Do(func() {
		t.empty = make([]uint64, (len(t.files)+63)/64)
		for i, f := range t.files {
			if t.l.Size(int(f)) == 0 {
				t.empty[i/64] |= 1 << (i % 64)
			}
		}
	})
	return t.empty[ref/64]&(1<<(ref%64)) != 0
}

// size is the size of file e.
func (t *tree) size(e entry) int64 { return t.l.Size(int(t.files[e.idx])) }

// fileName is the name of file i in its directory.
func (t *tree) fileName(i uint32) string {
	k := t.l.Key(int(t.files[i]))
	return k[strings.LastIndexByte(k, '/')+1:]
}

// fileNameIn is fileName for a file of directory dd, without searching
// for the name's start.
func (t *tree) fileNameIn(dd *dirData, i uint32) string {
	return t.l.Key(int(t.files[i]))[dd.base:]
}

// name is e's name in its directory ("" for the root).
func (t *tree) name(e entry) string {
	if e.dir {
		return t.dirs[e.idx].name
	}
	return t.fileName(e.idx)
}

// fileCount and dirCount count the tree's files and directories (the root
// not counted).
func (t *tree) fileCount() int { return len(t.files) }
func (t *tree) dirCount() int  { return len(t.dirs) - 1 }

// child finds name in directory d.
func (t *tree) child(d entry, name string) (entry, bool) {
	dd := &t.dirs[d.idx]
	lo, hi := int(dd.subdirs), int(dd.dirsEnd)
	if i, ok := slices.BinarySearchFunc(t.dirs[lo:hi], name, func(x dirData, n string) int { return strings.Compare(x.name, n) }); ok {
		return entry{idx: uint32(lo + i), dir: true}, true
	}
	lo, hi = int(dd.files), int(dd.filesEnd)
	i, ok := search(lo, hi, func(j int) int { return strings.Compare(t.fileNameIn(dd, uint32(j)), name) })
	if ok {
		return entry{idx: uint32(i)}, true
	}
	return entry{}, false
}

// search is a binary search of [lo, hi) for the index where compare is 0.
func search(lo, hi int, compare func(int) int) (int, bool) {
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch c := compare(m); {
		case c == 0:
			return m, true
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return lo, false
}

// each calls fn for the entries of directory d in name order.
func (t *tree) each(d entry, fn func(name string, e entry)) {
	dd := &t.dirs[d.idx]
	i, j := dd.subdirs, dd.files
	for i < dd.dirsEnd || j < dd.filesEnd {
		if j == dd.filesEnd || i < dd.dirsEnd && t.dirs[i].name < t.fileNameIn(dd, j) {
			fn(t.dirs[i].name, entry{idx: i, dir: true})
			i++
			continue
		}
		fn(t.fileNameIn(dd, j), entry{idx: j})
		j++
	}
}

// dirCursor walks a directory's entries in name order, as each does,
// one at a time: a find over a million files would otherwise make (and
// drop) a slice of entries per directory it opens.
type dirCursor struct {
	t    *tree
	d    *dirData
	i, j uint32 // next subdirectory, next file
}

func (t *tree) cursor(d entry) dirCursor {
	dd := &t.dirs[d.idx]
	return dirCursor{t: t, d: dd, i: dd.subdirs, j: dd.files}
}

// next returns the next entry, or false at the end.
func (c *dirCursor) next() (string, entry, bool) {
	dd, t := c.d, c.t
	switch {
	case c.i == dd.dirsEnd && c.j == dd.filesEnd:
		return "", entry{}, false
	case c.j == dd.filesEnd || c.i < dd.dirsEnd && t.dirs[c.i].name < t.fileNameIn(dd, c.j):
		c.i++
		return t.dirs[c.i-1].name, entry{idx: c.i - 1, dir: true}, true
	default:
		c.j++
		return t.fileNameIn(dd, c.j-1), entry{idx: c.j - 1}, true
	}
}

// listing returns directory d's entries sorted by name.
func (t *tree) listing(d entry) []fuse.DirEntry {
	dd := &t.dirs[d.idx]
	out := make([]fuse.DirEntry, 0, int(dd.dirsEnd-dd.subdirs)+int(dd.filesEnd-dd.files))
	t.each(d, func(name string, e entry) {
		mode := uint32(fuse.S_IFREG)
		if e.dir {
			mode = fuse.S_IFDIR
		}
		out = append(out, fuse.DirEntry{Name: name, Ino: t.ino(e), Mode: mode})
	})
	return out
}

// lookup finds the entry at a '/'-separated path relative to the root.
func (t *tree) lookup(p string) (entry, bool) {
	if !cleanPath(p) {
		p = strings.Trim(path.Clean("/"+p), "/")
	}
	t.byPathOnce.Do(func() { t.byPath = newPathIndex(t) })
	if i, ok := t.byPath.find(t, p); ok {
		return entry{idx: i}, true
	}
	e := t.root()
	for p != "" {
		if !e.dir {
			return entry{}, false
		}
		name, rest, _ := strings.Cut(p, "/")
		var ok bool
		if e, ok = t.child(e, name); !ok {
			return entry{}, false
		}
		p = rest
	}
	return e, true
}

// buildTree makes the namespace from a listing. Directory-marker keys (ending
// in '/') and the prefixes of file keys become directories; a key that is
// both a file and a directory prefix is kept as the directory; a key whose
// first component is reserved (dsmount's control entry) is left out.
func buildTree(l *backend.Listing, now time.Time, reserved string) *tree {
	b := treeBuilder{l: l, t: &tree{l: l, mtime: now}, ids: map[string]int32{"": 0}, reserved: reserved}
	b.tmp = []tmpDir{{parent: -1}}
	fileDir := make([]int32, l.Len())
	for i := range fileDir {
		fileDir[i] = b.add(i)
	}
	// A file named like a directory (its key is also a prefix): the
	// directory wins, whatever the listing's order.
	for i, d := range fileDir {
		if d < 0 {
			continue
		}
		if _, isDir := b.ids[l.Key(i)]; isDir {
			b.skip(l.Key(i), "same name as a directory")
			fileDir[i] = -1
		}
	}
	order := b.placeDirs()
	b.placeFiles(fileDir, order)
	return b.t
}

type tmpDir struct {
	name     string
	parent   int32
	children []int32
}

type treeBuilder struct {
	l        *backend.Listing
	t        *tree
	tmp      []tmpDir
	ids      map[string]int32 // directory path → tmp index
	reserved string
	// lastPath and lastID: consecutive keys are mostly in one directory.
	lastPath string
	lastID   int32
}

func (b *treeBuilder) skip(key, why string) { b.t.skipped = append(b.t.skipped, SkippedKey{key, why}) }

// add places listed object i: it returns its directory's tmp index for a
// file, or -1 (a marker, or a key left out).
func (b *treeBuilder) add(i int) int32 {
	key := b.l.Key(i)
	k, isMarker := strings.CutSuffix(key, "/")
	if reason := badPath(k); reason != "" {
		if !(isMarker && k == "") { // the root's own marker is harmless
			b.skip(key, reason)
		}
		return -1
	}
	if first, _, _ := strings.Cut(k, "/"); first == b.reserved {
		b.skip(key, "reserved for dsmount's control entry")
		return -1
	}
	if isMarker {
		b.dir(k)
		return -1
	}
	if b.l.Size(i) < 0 {
		// A store's answer (or a stored listing) said so; as a file
		// it would show 16 EiB less the amount.
		b.skip(key, "negative size")
		return -1
	}
	parent := ""
	if j := strings.LastIndexByte(k, '/'); j >= 0 {
		parent = k[:j]
	}
	return b.dir(parent)
}

// dir returns the tmp index of the directory at p, made (with its
// parents) if new.
func (b *treeBuilder) dir(p string) int32 {
	if p == b.lastPath && b.lastID > 0 {
		return b.lastID
	}
	id, ok := b.ids[p]
	if !ok {
		parent, name := int32(0), p
		if j := strings.LastIndexByte(p, '/'); j >= 0 {
			parent, name = b.dir(p[:j]), p[j+1:]
		}
		id = int32(len(b.tmp))
		b.tmp = append(b.tmp, tmpDir{name: name, parent: parent})
		b.tmp[parent].children = append(b.tmp[parent].children, id)
		b.ids[p] = id
	}
	b.lastPath, b.lastID = p, id
	return id
}

// placeDirs lays the directories out breadth first, each one's
// subdirectories a sorted run, and returns each tmp directory's index in
// t.dirs.
func (b *treeBuilder) placeDirs() []uint32 {
	order := make([]uint32, len(b.tmp))
	queue := make([]int32, 1, len(b.tmp))
	dirs := make([]dirData, 1, len(b.tmp))
	for q := 0; q < len(queue); q++ {
		id := queue[q]
		kids := b.tmp[id].children
		slices.SortFunc(kids, func(x, y int32) int { return strings.Compare(b.tmp[x].name, b.tmp[y].name) })
		dirs[q].subdirs = uint32(len(dirs))
		for _, k := range kids {
			order[k] = uint32(len(dirs))
			base := uint32(len(b.tmp[k].name) + 1)
			if q > 0 {
				base += dirs[q].base
			}
			dirs = append(dirs, dirData{name: b.tmp[k].name, parent: uint32(q), base: base})
			queue = append(queue, k)
		}
		dirs[q].dirsEnd = uint32(len(dirs))
	}
	b.t.dirs = dirs
	b.tmp, b.ids = nil, nil
	return order
}

// placeFiles lays the files out as a sorted run per directory (a counting
// sort by directory, then by name within it), leaving out a second key of
// the same name.
func (b *treeBuilder) placeFiles(fileDir []int32, order []uint32) {
	t := b.t
	start := make([]uint32, len(t.dirs)+1)
	for _, d := range fileDir {
		if d >= 0 {
			start[order[d]+1]++
		}
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	files := make([]uint32, start[len(t.dirs)])
	next := slices.Clone(start[:len(t.dirs)])
	for i, d := range fileDir {
		if d >= 0 {
			files[next[order[d]]] = uint32(i)
			next[order[d]]++
		}
	}
	base := func(i uint32) string {
		k := b.l.Key(int(i))
		return k[strings.LastIndexByte(k, '/')+1:]
	}
	out := files[:0]
	for d := range t.dirs {
		run := files[start[d]:start[d+1]]
		slices.SortStableFunc(run, func(x, y uint32) int { return cmp.Compare(base(x), base(y)) })
		t.dirs[d].files = uint32(len(out))
		for i, f := range run {
			if i > 0 && base(f) == base(run[i-1]) {
				b.skip(b.l.Key(int(f)), "the same key listed twice")
				continue
			}
			out = append(out, f)
		}
		t.dirs[d].filesEnd = uint32(len(out))
	}
	t.files = slices.Clip(out)
}

// badPath says why a key can't be a path, or "" if it can.
func badPath(key string) string {
	if key == "" {
		return "empty name"
	}
	if strings.IndexByte(key, 0) >= 0 {
		return "contains a NUL byte"
	}
	for p := range strings.SplitSeq(key, "/") {
		switch {
		case p == "":
			return "empty path component"
		case p == "." || p == "..":
			return "'.' or '..' path component"
		case len(p) > 255:
			return "path component longer than 255 bytes"
		}
	}
	return ""
}
