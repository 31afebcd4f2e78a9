package control

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// A control request is one JSON line (Request), optionally followed by a
// payload it announces: for an order, PathsBytes bytes of the epoch's
// paths, each ended by a NUL byte, then NextBytes bytes of the next
// epoch's the same way. Paths as a JSON array cost the daemon a slow
// decode and a heap string each; as a payload they cost a scan, and each
// path is a view of the payload's bytes. NUL ends a path
// because no path of a mount can hold one.

// Buffer assembles one request from a session's writes. The zero value
// has no bound on the request's length; NewBuffer sets one.
type Buffer struct {
	// limit bounds the request's length (0: none), so an announced
	// payload is refused before any room is made for it.
	limit int
	buf   []byte
	line  int // length of the request line with its '\n'; 0 until it came
	need  int // the whole request's length, once the line is parsed
	req   Request
	err   error // the request is malformed: done, with this error
	// discard is what the client will still write of a request refused
	// for its announced length: those bytes are taken and dropped, so
	// that the client's write succeeds and it reads the error that says
	// why (refusing them failed its write with EBUSY, which says nothing).
	discard int
}

// NewBuffer returns a Buffer that refuses a request of more than limit
// bytes (0: no bound).
func NewBuffer(limit int) Buffer { return Buffer{limit: limit} }

// Limit is the bound the buffer was made with.
func (r *Buffer) Limit() int { return r.limit }

// Len is the number of bytes written so far.
func (r *Buffer) Len() int { return len(r.buf) }

// Discard is how many bytes of a request refused for its announced
// length the client will still write: take them and drop them.
func (r *Buffer) Discard() int { return r.discard }

// Add appends one write and reports whether the request is complete (or
// malformed: see err).
func (r *Buffer) Add(data []byte) bool {
	r.buf = append(r.buf, data...)
	if r.line == 0 {
		i := bytes.IndexByte(r.buf, '\n')
		if i < 0 {
			return false
		}
		r.line = i + 1
		if err := json.Unmarshal(r.buf[:i], &r.req); err != nil {
			r.err = fmt.Errorf("malformed control request: %w", err)
			return true
		}
		r.need = r.line
		for _, n := range r.req.payloadParts() {
			if n < 0 {
				r.err = errors.New("malformed control request: negative payload length")
				return true
			}
			if r.need+n < r.need { // overflow
				r.err = errors.New("malformed control request: payload too long")
				return true
			}
			r.need += n
		}
		if r.limit > 0 && r.need > r.limit {
			r.err = fmt.Errorf("control request of %d bytes refused: a request of this user may have at most %d (declare by table indices, or in parts)", r.need, r.limit)
			r.discard = r.need - len(r.buf)
			return true
		}
		if r.need > cap(r.buf) {
			// One copy to the announced size, not one per growth of
			// a 50 MB payload arriving in 128 KiB writes.
			r.buf = append(make([]byte, 0, r.need), r.buf...)
		}
	}
	switch {
	case len(r.buf) < r.need:
		return false
	case len(r.buf) > r.need:
		r.err = fmt.Errorf("malformed control request: %d bytes after the %d announced", len(r.buf)-r.need, r.need-r.line)
	}
	return true
}

// Request returns the complete request, its payload's paths in Paths and
// Next (views of the buffer, which the request keeps alive).
func (r *Buffer) Request() (Request, error) {
	if r.err != nil {
		return Request{}, r.err
	}
	req := r.req
	if req.PathsBytes+req.NextBytes > 0 && (len(req.Paths) > 0 || len(req.Next) > 0) {
		return Request{}, errors.New("malformed control request: paths both in the request and after it")
	}
	if req.IndicesBytes+req.NextIndicesBytes+req.TableBytes > 0 && req.Table == "" {
		return Request{}, errors.New("malformed control request: indices or a table with no table name")
	}
	if req.RangesBytes+req.NextRangesBytes > 0 {
		switch {
		case req.Version < RangesVersion:
			return Request{}, fmt.Errorf("malformed control request: ranges need protocol version %d, the request says %d", RangesVersion, req.Version)
		case req.Table != "" || req.NextBytes > 0 || len(req.Next) > 0:
			return Request{}, errors.New("malformed control request: ranges name their files by paths alone (no table, no next paths)")
		}
	}
	parts := req.payloadParts()
	var pieces [len(parts)][]byte
	payload := r.buf[r.line:]
	for i, n := range parts {
		pieces[i], payload = payload[:n], payload[n:]
	}
	var err error
	if req.PathsBytes > 0 {
		if req.Paths, err = SplitPaths(pieces[0]); err != nil {
			return Request{}, err
		}
	}
	if req.NextBytes > 0 {
		if req.Next, err = SplitPaths(pieces[1]); err != nil {
			return Request{}, err
		}
	}
	if req.TableBytes > 0 {
		req.TablePayload = pieces[2]
	}
	if req.Indices, err = decodeIndices(pieces[3]); err != nil {
		return Request{}, err
	}
	if req.NextIndices, err = decodeIndices(pieces[4]); err != nil {
		return Request{}, err
	}
	if req.Ranges, err = DecodeRanges(pieces[5]); err != nil {
		return Request{}, err
	}
	if req.NextRanges, err = DecodeRanges(pieces[6]); err != nil {
		return Request{}, err
	}
	return req, nil
}

// payloadParts are the lengths of the payload's parts, in order.
func (req *Request) payloadParts() [7]int {
	return [7]int{req.PathsBytes, req.NextBytes, req.TableBytes, req.IndicesBytes, req.NextIndicesBytes, req.RangesBytes, req.NextRangesBytes}
}

// DecodeRanges reads RangeSize-byte ranges (Range). Offsets past
// math.MaxInt64 are refused here; whether a range lies in its file is
// the daemon's to check.
func DecodeRanges(b []byte) ([]Range, error) {
	if len(b)%RangeSize != 0 {
		return nil, fmt.Errorf("malformed control request: %d bytes of ranges, not a multiple of %d", len(b), RangeSize)
	}
	if len(b) == 0 {
		return nil, nil
	}
	out := make([]Range, len(b)/RangeSize)
	for i := range out {
		r := b[RangeSize*i:]
		off := binary.LittleEndian.Uint64(r)
		if off > math.MaxInt64 {
			return nil, fmt.Errorf("malformed control request: range %d's offset %d is past any file's end", i, off)
		}
		out[i] = Range{Offset: int64(off), Length: binary.LittleEndian.Uint32(r[8:]), File: binary.LittleEndian.Uint32(r[12:])}
	}
	return out, nil
}

// AppendRanges appends rs in the payload's encoding.
func AppendRanges(b []byte, rs []Range) []byte {
	for _, r := range rs {
		b = binary.LittleEndian.AppendUint64(b, uint64(r.Offset))
		b = binary.LittleEndian.AppendUint32(b, r.Length)
		b = binary.LittleEndian.AppendUint32(b, r.File)
	}
	return b
}

// decodeIndices reads little-endian uint32s.
func decodeIndices(b []byte) ([]uint32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("malformed control request: %d bytes of indices, not a multiple of 4", len(b))
	}
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out, nil
}

// SplitPaths returns the NUL-ended paths of b as strings that share b's
// bytes (b is never written again).
func SplitPaths(b []byte) ([]string, error) {
	if len(b) > 0 && b[len(b)-1] != 0 {
		return nil, errors.New("malformed control request: the payload's last path has no NUL after it")
	}
	out := make([]string, 0, bytes.Count(b, []byte{0}))
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		if i == 0 {
			out = append(out, "")
		} else {
			out = append(out, unsafe.String(&b[0], i))
		}
		b = b[i+1:]
	}
	return out, nil
}
