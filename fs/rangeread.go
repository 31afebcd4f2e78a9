package fs

import (
	"cmp"
	"context"
	"errors"
	"io"
	"slices"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
)

// readDeclared serves a READ of parent, a file with declared ranges
// (lists: one per job that declared some), at off. The bytes that range
// objects cover are read from them (the cache, or a fetch of the range
// that it keeps), each such read counted as a read of its item for the
// job's progress; the rest, the kernel's readahead around the ranges,
// comes from the store by one ranged GET of its span (ReadAtRandom), as
// for an undeclared random reader.
func (m *Mount) readDeclared(ctx context.Context, parent backend.Object, lists []*fileSpans, p []byte, off int64) (int, error) {
	if off >= parent.Size {
		return 0, nil
	}
	p = p[:min(int64(len(p)), parent.Size-off)]
	end := off + int64(len(p))
	var buf [8]rangeSpan
	over := buf[:0]
	for _, fs := range lists {
		i, _ := slices.BinarySearchFunc(fs.spans, off-fs.longest, func(s rangeSpan, t int64) int { return cmp.Compare(s.start, t) })
		for ; i < len(fs.spans) && fs.spans[i].start < end; i++ {
			if fs.spans[i].end > off {
				over = append(over, fs.spans[i])
			}
		}
	}
	pid, uid := callerPID(ctx), callerUID(ctx)
	gapFrom, gapTo := int64(-1), int64(-1)
	var candBuf [8]int
	var idBuf [8]cache.ObjectID
	for pos := off; pos < end; {
		// The spans over pos, or where the next one starts.
		cands, next := candBuf[:0], end
		for k, s := range over {
			switch {
			case s.start <= pos && s.end > pos:
				cands = append(cands, k)
			case s.start > pos:
				next = min(next, s.start)
			}
		}
		best := m.pickSpan(over, cands, idBuf[:0])
		if best < 0 {
			if gapFrom < 0 {
				gapFrom = pos
			}
			gapTo, pos = next, next
			continue
		}
		s := over[best]
		segEnd := min(s.end, end)
		if err := m.readSpan(ctx, parent, s, p[pos-off:segEnd-off], pos, pid, uid); err != nil {
			return 0, err
		}
		pos = segEnd
	}
	if gapFrom >= 0 {
		if _, err := m.src.ReadAtRandom(ctx, parent, p[gapFrom-off:gapTo-off], gapFrom); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
	}
	return len(p), nil
}

// pickSpan is which of the spans over[cands] (all over one offset) to
// read it from and count it for: the one a job wants nearest its
// furthest read, else the one reaching furthest; -1 if cands is empty.
func (m *Mount) pickSpan(over []rangeSpan, cands []int, ids []cache.ObjectID) int {
	switch len(cands) {
	case 0:
		return -1
	case 1:
		return cands[0]
	}
	if m.ra != nil {
		for _, k := range cands {
			ids = append(ids, over[k].id)
		}
		if i := m.ra.Pick(ids); i >= 0 {
			return cands[i]
		}
	}
	best := cands[0]
	for _, k := range cands[1:] {
		if over[k].end > over[best].end {
			best = k
		}
	}
	return best
}

// readSpan fills dst with parent's bytes at pos from range object s.
func (m *Mount) readSpan(ctx context.Context, parent backend.Object, s rangeSpan, dst []byte, pos int64, pid int, uid uint32) error {
	obj := backend.RangeOf(parent, s.start, s.end-s.start)
	if ra := m.ra; ra != nil {
		if done := ra.Observe(obj, s.id, pid, uid); done != nil {
			defer done()
		}
	}
	got, err := m.src.ReadAt(ctx, obj, dst, pos-s.start)
	if errors.Is(err, io.EOF) && got == len(dst) {
		err = nil
	}
	if err == nil && got != len(dst) {
		err = io.ErrUnexpectedEOF
	}
	return err
}
