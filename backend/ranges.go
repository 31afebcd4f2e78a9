package backend

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// A range object is a byte range of another object, named and read as an
// object of its own: a sample that is a range of a big file (a window of
// a token file, a record of an LMDB) is cached, prefetched and evicted
// as one item, as a file is, while the file itself is too big to cache.
//
// Its key is the parent's key, rangeMark, then "<offset>+<length>"; its
// Version and ModTime are the parent's, so a change of the parent's
// version is a change of the range's, and its cache entry is the
// parent's version's alone. No listing holds a NUL in a key (S3's XML
// can't carry one, a path can't hold one), so no real object's key looks
// like a range's.
const rangeMark = "\x00@"

// RangeOf is the range object of length n at off of parent. The caller
// keeps it within the parent: 0 <= off, 0 < n, off+n <= parent.Size.
func RangeOf(parent Object, off, n int64) Object {
	key := AppendRangeKey(make([]byte, 0, len(parent.Key)+len(rangeMark)+24), parent.Key, off, n)
	return Object{Key: string(key), Size: n, ModTime: parent.ModTime, Version: parent.Version}
}

// AppendRangeKey appends the key of the range object of length n at off
// of the object parentKey names.
func AppendRangeKey(b []byte, parentKey string, off, n int64) []byte {
	b = append(b, parentKey...)
	b = append(b, rangeMark...)
	b = strconv.AppendInt(b, off, 10)
	b = append(b, '+')
	return strconv.AppendInt(b, n, 10)
}

// ParseRangeKey splits a range object's key into its parent's key and
// the range. ok is false for any other key, and for a range key that no
// RangeOf makes (a negative or malformed number, an empty range).
func ParseRangeKey(key string) (parent string, off, n int64, ok bool) {
	i := strings.LastIndex(key, rangeMark)
	if i < 0 {
		return "", 0, 0, false
	}
	offStr, nStr, found := strings.Cut(key[i+len(rangeMark):], "+")
	if !found {
		return "", 0, 0, false
	}
	off, err1 := strconv.ParseInt(offStr, 10, 64)
	n, err2 := strconv.ParseInt(nStr, 10, 64)
	if err1 != nil || err2 != nil || off < 0 || n <= 0 || off > (1<<62) || n > (1<<62) ||
		strconv.FormatInt(off, 10) != offStr || strconv.FormatInt(n, 10) != nStr {
		return "", 0, 0, false
	}
	return key[:i], off, n, true
}

// WithRanges returns b reading range objects (RangeOf) as the ranges of
// their parents; every other object is b's own.
func WithRanges(b Backend) Backend { return rangesBackend{b} }

type rangesBackend struct{ Backend }

// ReadAt reads a range object from its parent, bounded to the range.
func (r rangesBackend) ReadAt(ctx context.Context, obj Object, p []byte, off int64) (int, error) {
	parentKey, rOff, rLen, ok := ParseRangeKey(obj.Key)
	if !ok {
		return r.Backend.ReadAt(ctx, obj, p, off)
	}
	if off < 0 || off >= rLen {
		return 0, io.EOF
	}
	want := p
	if rest := rLen - off; int64(len(p)) > rest {
		want = p[:rest]
	}
	parent := Object{Key: parentKey, Size: rOff + rLen, ModTime: obj.ModTime, Version: obj.Version}
	got, err := r.Backend.ReadAt(ctx, parent, want, rOff+off)
	if err == io.EOF && got == len(want) {
		err = nil
	}
	if err == nil && len(want) < len(p) {
		err = io.EOF
	}
	return got, err
}

// Stat describes a range object from its parent's current description.
func (r rangesBackend) Stat(ctx context.Context, key string) (Object, error) {
	parentKey, off, n, ok := ParseRangeKey(key)
	if !ok {
		return r.Backend.Stat(ctx, key)
	}
	parent, err := r.Backend.Stat(ctx, parentKey)
	if err != nil {
		return Object{}, err
	}
	if off+n > parent.Size {
		return Object{}, Wrap("stat", key, ErrChanged, fmt.Errorf("the range ends at %d, the object at %d", off+n, parent.Size))
	}
	return RangeOf(parent, off, n), nil
}
