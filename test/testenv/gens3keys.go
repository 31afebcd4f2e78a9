package testenv

// The key table and object bytes of GenS3 (gens3.go).

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"iter"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// GenS3Keys is the sorted key table of a generated dataset: n keys
// train/nSSSSSSSS/nSSSSSSSS_J.JPEG over dirs class directories, the first
// n%dirs classes holding one more than the others. The keys live in one
// byte slice, so 1.28 million of them cost about 50 MB and nothing for the
// garbage collector to scan.
type GenS3Keys struct {
	names []byte   // the keys, concatenated in sorted order
	offs  []uint32 // key i is names[offs[i]:offs[i+1]]
	dirLo []int    // class c's keys are [dirLo[c], dirLo[c+1])
}

// genS3Synset is class c's directory number: ImageNet's first synset, then
// a fixed stride, so the names sort in class order and stay 8 digits.
func genS3Synset(c int) int { return 1440764 + 97*c }

// NewGenS3Keys builds the key table.
func NewGenS3Keys(n, dirs int) (*GenS3Keys, error) {
	if n < 0 || dirs < 1 || dirs > 1_000_000 {
		return nil, fmt.Errorf("generated S3: want objects >= 0 and 1 <= dirs <= 1000000, got %d and %d", n, dirs)
	}
	k := &GenS3Keys{offs: make([]uint32, 0, n+1), dirLo: make([]int, dirs+1)}
	k.names = make([]byte, 0, n*37)
	k.offs = append(k.offs, 0)
	// Within a class the keys differ only in the file number followed by
	// ".JPEG", and '.' sorts before the digits: sorted keys are the file
	// numbers in the order of their decimal strings.
	orders := map[int][]int{}
	for c := 0; c < dirs; c++ {
		m := n / dirs
		if c < n%dirs {
			m++
		}
		order, ok := orders[m]
		if !ok {
			order = make([]int, m)
			for j := range order {
				order[j] = j
			}
			slices.SortFunc(order, func(a, b int) int { return strings.Compare(strconv.Itoa(a), strconv.Itoa(b)) })
			orders[m] = order
		}
		k.dirLo[c] = len(k.offs) - 1
		syn := genS3Synset(c)
		for _, j := range order {
			k.names = fmt.Appendf(k.names, "train/n%08d/n%08d_%d.JPEG", syn, syn, j)
			if len(k.names) > 1<<32-1 {
				return nil, fmt.Errorf("generated S3: %d keys do not fit in 4 GiB", n)
			}
			k.offs = append(k.offs, uint32(len(k.names)))
		}
	}
	k.dirLo[dirs] = n
	return k, nil
}

// Len is the number of keys.
func (k *GenS3Keys) Len() int { return len(k.offs) - 1 }

// Key is the i-th key in sorted order.
func (k *GenS3Keys) Key(i int) string { return string(k.key(i)) }

func (k *GenS3Keys) key(i int) []byte { return k.names[k.offs[i]:k.offs[i+1]] }

// All yields the keys in sorted order with their indices.
func (k *GenS3Keys) All() iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		for i := 0; i < k.Len(); i++ {
			if !yield(i, k.Key(i)) {
				return
			}
		}
	}
}

// Dirs is the number of class directories.
func (k *GenS3Keys) Dirs() int { return len(k.dirLo) - 1 }

// DirPrefix is class c's directory, "train/nSSSSSSSS/".
func (k *GenS3Keys) DirPrefix(c int) string {
	return fmt.Sprintf("train/n%08d/", genS3Synset(c))
}

// DirRange is the range of indices of class c's keys.
func (k *GenS3Keys) DirRange(c int) (lo, hi int) { return k.dirLo[c], k.dirLo[c+1] }

// Find is the index of key, if it is one.
func (k *GenS3Keys) Find(key string) (int, bool) {
	i := k.lower(key)
	return i, i < k.Len() && string(k.key(i)) == key
}

// lower is the first index whose key is >= s; upper the first > s.
func (k *GenS3Keys) lower(s string) int {
	return sort.Search(k.Len(), func(i int) bool { return string(k.key(i)) >= s })
}

func (k *GenS3Keys) upper(s string) int {
	return sort.Search(k.Len(), func(i int) bool { return string(k.key(i)) > s })
}

// pastPrefix is the first index from lo on whose key does not start with
// p; the keys that do are contiguous, so it is a binary search too.
func (k *GenS3Keys) pastPrefix(lo int, p string) int {
	lo = max(lo, k.lower(p))
	bp := []byte(p)
	return lo + sort.Search(k.Len()-lo, func(i int) bool { return !bytes.HasPrefix(k.key(lo+i), bp) })
}

// GenS3ReadAt fills p with the bytes of key's object from offset off on:
// word w of an object is a mix of its key's hash and w, so any range is
// computed directly. The object's size only bounds what a server sends.
func GenS3ReadAt(key string, p []byte, off int64) {
	seed := fnv64a(key, 0)
	for len(p) > 0 {
		w := uint64(off) / 8
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], mix64(seed+w*0x9e3779b97f4a7c15))
		n := copy(p, b[off%8:])
		p, off = p[n:], off+int64(n)
	}
}

// GenS3Bytes is key's whole object of size bytes.
func GenS3Bytes(key string, size int64) []byte {
	p := make([]byte, size)
	GenS3ReadAt(key, p, 0)
	return p
}

// GenS3ETag is key's ETag as the server sends it (quoted, 32 hex digits).
func GenS3ETag(key string, size int64) string {
	b := genS3ETag([]byte(key), size)
	return `"` + hex.EncodeToString(b[:]) + `"`
}

func genS3ETag(key []byte, size int64) (b [16]byte) {
	h := fnv64a(key, uint64(size))
	binary.BigEndian.PutUint64(b[:8], mix64(h))
	binary.BigEndian.PutUint64(b[8:], mix64(h^0x5bd1e9955bd1e995))
	return b
}

// fnv64a is FNV-1a of s, then of the 8 bytes of salt.
func fnv64a[S string | []byte](s S, salt uint64) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	for i := 0; i < 8; i++ {
		h = (h ^ (salt >> (8 * i) & 0xff)) * 1099511628211
	}
	return h
}

// mix64 is splitmix64's finaliser.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
