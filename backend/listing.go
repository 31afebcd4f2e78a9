package backend

import (
	"math"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Listing is a compact, append-only table of objects: what a listing of a
// million-object prefix returns, held at about 32 bytes per object plus its
// key and version bytes, where a []Object costs twice that in string and
// slice headers and a heap allocation per string.
//
// Keys and versions are copied into slabs that are never written again
// where a string was handed out, so At returns strings that point into
// them without copying. A Listing is built by one goroutine; once built
// (no more Append), any number may read it.
type Listing struct {
	slabs [][]byte
	// recs holds the records in blocks of recBlock: a slice grown by
	// append copies what it holds into fresh pages at each growth, which
	// made building a large listing slow.
	recs [][]listingRec
	n    int
}

const (
	recBlockBits = 17 // 4 MiB blocks: see hugeAdvised
	recBlock     = 1 << recBlockBits
)

type listingRec struct {
	slab, off      uint32
	keyLen, verLen uint32
	size           int64
	mtime          int64 // unix ns; noTime for the zero time
}

// listingSlab is the size of a slab; a key and version longer than that
// get a slab of their own.
const listingSlab = 4 << 20

// noTime stands for the zero time.Time, which has no unix nanoseconds.
const noTime = math.MinInt64

// NewListing returns a listing of objs.
func NewListing(objs []Object) *Listing {
	l := &Listing{}
	for _, o := range objs {
		l.Append(o)
	}
	return l
}

// Append adds o; its strings are copied.
func (l *Listing) Append(o Object) {
	n := len(o.Key) + len(o.Version)
	if len(l.slabs) == 0 || cap(l.slabs[len(l.slabs)-1])-len(l.slabs[len(l.slabs)-1]) < n {
		l.slabs = append(l.slabs, hugeAdvised(make([]byte, 0, max(listingSlab, n))))
	}
	s := len(l.slabs) - 1
	slab := l.slabs[s]
	r := listingRec{slab: uint32(s), off: uint32(len(slab)), keyLen: uint32(len(o.Key)), verLen: uint32(len(o.Version)),
		size: o.Size, mtime: noTime}
	if !o.ModTime.IsZero() {
		r.mtime = o.ModTime.UnixNano()
	}
	slab = append(slab, o.Key...)
	l.slabs[s] = append(slab, o.Version...)
	if l.n%recBlock == 0 {
		block := make([]listingRec, 0, recBlock)
		hugeAdvised(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(block))), recBlock*int(unsafe.Sizeof(listingRec{}))))
		l.recs = append(l.recs, block)
	}
	b := len(l.recs) - 1
	l.recs[b] = append(l.recs[b], r)
	l.n++
}

func (l *Listing) rec(i int) *listingRec { return &l.recs[i>>recBlockBits][i&(recBlock-1)] }

// Len is the number of objects.
func (l *Listing) Len() int {
	if l == nil {
		return 0
	}
	return l.n
}

// At returns object i (0 <= i < Len()).
func (l *Listing) At(i int) Object {
	r := l.rec(i)
	o := Object{Key: l.str(r.slab, r.off, r.keyLen), Version: l.str(r.slab, r.off+r.keyLen, r.verLen), Size: r.size}
	if r.mtime != noTime {
		o.ModTime = time.Unix(0, r.mtime)
	}
	return o
}

// Key returns object i's key.
func (l *Listing) Key(i int) string {
	r := l.rec(i)
	return l.str(r.slab, r.off, r.keyLen)
}

// Size returns object i's size.
func (l *Listing) Size(i int) int64 { return l.rec(i).size }

// str is the string of n bytes at off in a slab, sharing its memory: the
// bytes are never written again (Append only writes past every record).
func (l *Listing) str(slab, off, n uint32) string {
	if n == 0 {
		return ""
	}
	return unsafe.String(&l.slabs[slab][off], n)
}

// Bytes is the memory the listing holds, for logs.
func (l *Listing) Bytes() int64 {
	n := int64(len(l.recs)) * recBlock * int64(unsafe.Sizeof(listingRec{}))
	for _, s := range l.slabs {
		n += int64(cap(s))
	}
	return n
}

// hugeAdvised asks for transparent huge pages behind the 2 MiB-aligned
// part of b's memory and returns b. A large listing is written once into
// fresh memory, and faulting it in 4 KiB at a time was a good part of a
// remount. The pages a block never touches (a small listing's) stay
// unallocated either way; where THP is off, the advice changes nothing.
func hugeAdvised(b []byte) []byte {
	const huge = 2 << 20
	if cap(b) < 2*huge {
		return b
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start := (p + huge - 1) &^ (huge - 1)
	end := (p + uintptr(cap(b))) &^ (huge - 1)
	if end > start {
		full := b[:cap(b)]
		_ = unix.Madvise(full[start-p:end-p], unix.MADV_HUGEPAGE)
	}
	return b
}
