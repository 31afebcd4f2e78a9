package control

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Roots finds the dsmount mount a path lies in by looking for the
// control entry in it and its parents; results are memoised per directory.
type Roots map[string]string

// Find returns the mount root of abs and abs relative to it.
func (r Roots) Find(abs string) (root, rel string, err error) {
	dir := abs
	if st, err := os.Stat(abs); err != nil {
		return "", "", fmt.Errorf("%s: %w", abs, err)
	} else if !st.IsDir() {
		dir = filepath.Dir(abs)
	}
	var walked []string
	for {
		if _, ok := r[dir]; ok {
			break
		}
		if _, err := os.Stat(filepath.Join(dir, EntryName)); err == nil {
			r[dir] = dir
			break
		}
		walked = append(walked, dir)
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", "", fmt.Errorf("%s is not inside a dsmount mount", abs)
		}
		dir = parent
	}
	root = r[dir]
	for _, w := range walked {
		r[w] = root
	}
	rel, err = filepath.Rel(root, abs)
	if err != nil {
		return "", "", err
	}
	return root, filepath.ToSlash(rel), nil
}

// Call sends req to the daemon through a session of the mount's control
// entry (OpenSession) and calls on for each event until the daemon is
// done. A TablePayload, Indices and NextIndices are sent as the request's
// table and indices. Cancelling ctx closes the session, which cancels the request in
// the daemon once the kernel forgets the session's entry: once a receive
// waiting in the daemon returns (the request's next event), or at once
// where the process exits.
func Call(ctx context.Context, root string, req Request, on func(Event) error) error {
	f, err := OpenSession(root)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer func() {
		if stop() {
			f.Close()
		}
	}()
	payload := encodePayload(&req)
	line, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := f.Write(slices.Concat(line, []byte{'\n'}, payload)); err != nil {
		// The daemon refuses a request over its bounds at the write
		// (EFBIG) and says why in the answer, ready to be read.
		if ctx.Err() == nil {
			if rerr := ReadAnswer(f, root, func(Event) error { return nil }); rerr != nil && errors.As(rerr, new(DaemonError)) {
				return rerr
			}
		}
		return fmt.Errorf("send request to %s: %w", root, err)
	}
	err = ReadAnswer(f, root, on)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// DaemonError is an "error" event: the daemon's own words, on one line,
// and the code a program acts on ("" for most).
type DaemonError struct {
	Message string
	Code    string
}

func (e DaemonError) Error() string { return e.Message }

// maxAnswerLine bounds one line of the daemon's answer (a stats report
// of many mounts and jobs is the longest).
const maxAnswerLine = 64 << 20

// ReadAnswer reads the daemon's answer, event lines until EOF, calling on
// for each until an "error" event, which it returns as a DaemonError.
// Whatever r holds, the error it returns is one line.
func ReadAnswer(r io.Reader, root string, on func(Event) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxAnswerLine)
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("malformed answer from %s: %w", root, err)
		}
		if ev.Type == EventError {
			msg := strings.NewReplacer("\n", " ", "\r", " ").Replace(ev.Error)
			if msg == "" {
				msg = "the daemon reported an unnamed error"
			}
			return DaemonError{Message: msg, Code: ev.Code}
		}
		if err := on(ev); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read answer from %s: %w", root, err)
	}
	return nil
}

// movePathsToPayload moves an order's paths out of the JSON request into
// the payload that follows it (Request.PathsBytes), which the daemon
// reads without decoding a string per path. A path holding a NUL byte
// (never a file of a mount) would be split there: such a request stays
// JSON.
func movePathsToPayload(req *Request) []byte {
	if req.Op != OpOrder || len(req.Paths)+len(req.Next) == 0 {
		return nil
	}
	n := 0
	for _, list := range [][]string{req.Paths, req.Next} {
		for _, p := range list {
			if strings.IndexByte(p, 0) >= 0 {
				return nil
			}
			n += len(p) + 1
		}
	}
	payload := make([]byte, 0, n)
	for _, p := range req.Paths {
		payload = append(append(payload, p...), 0)
	}
	req.PathsBytes = len(payload)
	for _, p := range req.Next {
		payload = append(append(payload, p...), 0)
	}
	req.NextBytes = len(payload) - req.PathsBytes
	req.Paths, req.Next = nil, nil
	return payload
}

// encodePayload moves req's paths into the payload (movePathsToPayload)
// and appends its table, indices and ranges after them, in doc.go's order,
// setting the lengths that announce each.
func encodePayload(req *Request) []byte {
	payload := movePathsToPayload(req)
	if req.TablePayload != nil {
		req.TableBytes = len(req.TablePayload)
		payload = append(payload, req.TablePayload...)
	}
	for _, ix := range []struct {
		list []uint32
		n    *int
	}{{req.Indices, &req.IndicesBytes}, {req.NextIndices, &req.NextIndicesBytes}} {
		for _, i := range ix.list {
			payload = binary.LittleEndian.AppendUint32(payload, i)
		}
		*ix.n = 4 * len(ix.list)
	}
	if len(req.Ranges)+len(req.NextRanges) > 0 {
		req.Version = max(req.Version, RangesVersion)
		n := len(payload)
		payload = AppendRanges(payload, req.Ranges)
		req.RangesBytes = len(payload) - n
		payload = AppendRanges(payload, req.NextRanges)
		req.NextRangesBytes = len(payload) - n - req.RangesBytes
	}
	return payload
}
