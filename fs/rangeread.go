package fs

import (
	"cmp"
	"context"
	"errors"
	"io"
	"slices"

	"github.com/dsmount/dsmount/backend"
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
	for pos := off; pos < end; {
		// The span over pos that reaches furthest, or where the next
		// one starts.
		best, next := -1, end
		for k, s := range over {
			switch {
			case s.start <= pos && s.end > pos:
				if best < 0 || s.end > over[best].end {
					best = k
				}
			case s.start > pos:
				next = min(next, s.start)
			}
		}
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
