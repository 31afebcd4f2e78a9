package fs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unsafe"
)

// A control request is one JSON line (Request), optionally followed by a
// payload it announces: for an order, PathsBytes bytes of the epoch's
// paths, each ended by a NUL byte, then NextBytes bytes of the next
// epoch's the same way. A million paths as a JSON array cost the daemon a
// second of decoding and a heap string each; as a payload they cost a
// scan, and each path is a view of the payload's bytes. NUL ends a path
// because no path of a mount can hold one.

// requestBuf assembles one request from a session's writes.
type requestBuf struct {
	// limit bounds the request's length (0: none), so an announced
	// payload is refused before any room is made for it.
	limit int
	buf   []byte
	line int // length of the request line with its '\n'; 0 until it came
	need int // the whole request's length, once the line is parsed
	req  Request
	err  error // the request is malformed: done, with this error
}

// add appends one write and reports whether the request is complete (or
// malformed: see err).
func (r *requestBuf) add(data []byte) bool {
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
		if r.req.PathsBytes < 0 || r.req.NextBytes < 0 {
			r.err = errors.New("malformed control request: negative payload length")
			return true
		}
		r.need = r.line + r.req.PathsBytes + r.req.NextBytes
		if r.need < r.line { // overflow
			r.err = errors.New("malformed control request: payload too long")
			return true
		}
		if r.limit > 0 && r.need > r.limit {
			r.err = fmt.Errorf("control request of %d bytes refused: at most %d", r.need, r.limit)
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

// request returns the complete request, its payload's paths in Paths and
// Next (views of the buffer, which the request keeps alive).
func (r *requestBuf) request() (Request, error) {
	if r.err != nil {
		return Request{}, r.err
	}
	req := r.req
	payload := r.buf[r.line:]
	if req.PathsBytes+req.NextBytes > 0 && (len(req.Paths) > 0 || len(req.Next) > 0) {
		return Request{}, errors.New("malformed control request: paths both in the request and after it")
	}
	var err error
	if req.PathsBytes > 0 {
		if req.Paths, err = splitPaths(payload[:req.PathsBytes]); err != nil {
			return Request{}, err
		}
	}
	if req.NextBytes > 0 {
		if req.Next, err = splitPaths(payload[req.PathsBytes:]); err != nil {
			return Request{}, err
		}
	}
	return req, nil
}

// splitPaths returns the NUL-ended paths of b as strings that share b's
// bytes (b is never written again).
func splitPaths(b []byte) ([]string, error) {
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
