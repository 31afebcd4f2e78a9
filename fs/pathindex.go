package fs

import (
	"hash/maphash"
	"strings"
)

// pathIndex finds a file by its whole path in one probe or two: a declared
// order names a million files, and a walk down the tree with a binary
// search per directory cost a dozen cache misses per path, which added up
// to seconds. It is an open-addressing table of file indices + 1
// (0: empty), at most half full: 4 bytes a slot, 8 MB for ImageNet.
type pathIndex struct {
	seed  maphash.Seed
	slots []uint32
}

func newPathIndex(t *tree) pathIndex {
	n := 1
	for n < 2*len(t.files) {
		n <<= 1
	}
	x := pathIndex{seed: maphash.MakeSeed(), slots: make([]uint32, n)}
	mask := uint64(n - 1)
	for i, f := range t.files {
		h := maphash.String(x.seed, t.l.Key(int(f))) & mask
		for x.slots[h] != 0 {
			h = (h + 1) & mask
		}
		x.slots[h] = uint32(i) + 1
	}
	return x
}

// find returns the index of the file at path p (clean, relative).
func (x *pathIndex) find(t *tree, p string) (uint32, bool) {
	if len(x.slots) == 0 {
		return 0, false
	}
	mask := uint64(len(x.slots) - 1)
	for h := maphash.String(x.seed, p) & mask; x.slots[h] != 0; h = (h + 1) & mask {
		i := x.slots[h] - 1
		if t.l.Key(int(t.files[i])) == p {
			return i, true
		}
	}
	return 0, false
}

// cleanPath reports whether p is already what lookup's cleaning would
// make of it: no leading or trailing '/', no empty, "." or ".."
// component. Declared paths nearly always are, and cleaning costs an
// allocation each.
func cleanPath(p string) bool {
	if p == "" {
		return true
	}
	if p[0] == '/' || p[len(p)-1] == '/' || strings.Contains(p, "//") {
		return false
	}
	for c := range strings.SplitSeq(p, "/") {
		if c == "." || c == ".." {
			return false
		}
	}
	return true
}
