package control

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func encodeOrder(t testing.TB, req Request, paths, next []string) []byte {
	var p, n []byte
	for _, s := range paths {
		p = append(append(p, s...), 0)
	}
	for _, s := range next {
		n = append(append(n, s...), 0)
	}
	req.PathsBytes, req.NextBytes = len(p), len(n)
	line, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Concat(line, []byte{'\n'}, p, n)
}

func TestRequestPayload(t *testing.T) {
	paths := []string{"train/a b/ü.jpg", "", "x\ny"}
	next := []string{"z"}
	b := encodeOrder(t, Request{Op: "order", Job: "j"}, paths, next)
	// Any split into writes gives the same request.
	for cut := 0; cut <= len(b); cut++ {
		var r Buffer
		done := r.Add(b[:cut])
		if cut < len(b) && done {
			t.Fatalf("complete after %d of %d bytes", cut, len(b))
		}
		if cut < len(b) && !r.Add(b[cut:]) {
			t.Fatalf("not complete after all %d bytes (cut %d)", len(b), cut)
		}
		req, err := r.Request()
		if err != nil || req.Job != "j" || !slices.Equal(req.Paths, paths) || !slices.Equal(req.Next, next) {
			t.Fatalf("cut %d: %+v, %v", cut, req, err)
		}
	}
	for name, bad := range map[string][]byte{
		"bytes past the payload": append(slices.Clone(b), 'x'),
		"no NUL after a path":    []byte(`{"op":"order","paths_bytes":3}` + "\nabc"),
		"negative length":        []byte(`{"op":"order","paths_bytes":-3}` + "\n"),
		"paths in both places":   []byte(`{"op":"order","paths":["a"],"paths_bytes":2}` + "\na\x00"),
		"not JSON":               []byte("op=order\n"),
		"huge announced lengths": []byte(`{"paths_bytes":9223372036854775807,"next_bytes":9223372036854775807}` + "\n"),
		"more than the limit":    []byte(`{"op":"order","paths_bytes":2000}` + "\n"),
	} {
		r := NewBuffer(1000)
		if !r.Add(bad) {
			t.Errorf("%s: not complete", name)
			continue
		}
		if _, err := r.Request(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzRequest: whatever bytes a session writes, in whatever pieces, the
// request is refused or parsed, never a panic, and a payload's paths are
// exactly its NUL-ended pieces.
func FuzzRequest(f *testing.F) {
	f.Add(encodeOrder(f, Request{Op: "order", Job: "j", Epoch: 2}, []string{"a/b", "c"}, []string{"d"}), 5)
	f.Add([]byte(`{"op":"warm","paths":["x"]}`+"\n"), 0)
	f.Add([]byte(`{"op":"order","paths_bytes":2}`+"\na\x00"), 30)
	f.Add(encodeRanges(f, []string{"t.bin"}, []Range{{Offset: 8192, Length: 2050}}, nil), 40)
	f.Fuzz(func(t *testing.T, b []byte, cut int) {
		r := NewBuffer(1 << 20)
		cut = min(max(cut, 0), len(b))
		done := r.Add(b[:cut])
		if !done {
			done = r.Add(b[cut:])
		}
		if !done {
			return
		}
		req, err := r.Request()
		if err != nil {
			return
		}
		if req.PathsBytes > 0 {
			payload := b[bytes.IndexByte(b, '\n')+1:]
			want := strings.Split(string(payload[:req.PathsBytes]), "\x00")
			if !slices.Equal(req.Paths, want[:len(want)-1]) {
				t.Fatalf("paths %q from payload %q", req.Paths, payload[:req.PathsBytes])
			}
		}
	})
}

func encodeRanges(t testing.TB, files []string, cur, next []Range) []byte {
	var p []byte
	for _, s := range files {
		p = append(append(p, s...), 0)
	}
	rc, rn := AppendRanges(nil, cur), AppendRanges(nil, next)
	req := Request{Version: RangesVersion, Op: "order", Job: "j", PathsBytes: len(p), RangesBytes: len(rc), NextRangesBytes: len(rn)}
	line, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Concat(line, []byte{'\n'}, p, rc, rn)
}

func TestRangesPayload(t *testing.T) {
	files := []string{"train.bin", "val.bin"}
	cur := []Range{{Offset: 0, Length: 2050, File: 0}, {Offset: 1 << 40, Length: 1, File: 1}, {Offset: 7, Length: 0, File: 9}}
	next := []Range{{Offset: 4096, Length: 16384, File: 1}}
	b := encodeRanges(t, files, cur, next)
	for _, cut := range []int{0, 1, len(b) / 2, len(b) - 1, len(b)} {
		var r Buffer
		if !r.Add(b[:cut]) && !r.Add(b[cut:]) {
			t.Fatalf("cut %d: not complete", cut)
		}
		req, err := r.Request()
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if !slices.Equal(req.Paths, files) || !slices.Equal(req.Ranges, cur) || !slices.Equal(req.NextRanges, next) {
			t.Fatalf("cut %d: %q %+v %+v", cut, req.Paths, req.Ranges, req.NextRanges)
		}
	}
	// The daemon checks whether a range lies in its file; the parser
	// refuses what no daemon could read.
	huge := AppendRanges(nil, []Range{{Offset: 1, Length: 1}})
	huge[7] = 0x80 // offset 2^63+1
	for name, bad := range map[string][]byte{
		"not a whole range":   []byte(`{"version":3,"op":"order","paths_bytes":2,"ranges_bytes":15}` + "\na\x00" + strings.Repeat("\x00", 15)),
		"an old version":      []byte(`{"version":2,"op":"order","paths_bytes":2,"ranges_bytes":16}` + "\na\x00" + strings.Repeat("\x00", 16)),
		"ranges and a table":  []byte(`{"version":3,"op":"order","table":"t","ranges_bytes":16}` + "\n" + strings.Repeat("\x00", 16)),
		"ranges and next":     []byte(`{"version":3,"op":"order","paths_bytes":2,"next_bytes":2,"ranges_bytes":16}` + "\na\x00b\x00" + strings.Repeat("\x00", 16)),
		"an offset past 2^63": append([]byte(`{"version":3,"op":"order","paths_bytes":2,"ranges_bytes":16}`+"\na\x00"), huge...),
	} {
		var r Buffer
		if !r.Add(bad) {
			t.Errorf("%s: not complete", name)
			continue
		}
		if _, err := r.Request(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzRanges: a ranges payload is refused or decoded to ranges that
// encode back to the same bytes.
func FuzzRanges(f *testing.F) {
	f.Add(AppendRanges(nil, []Range{{Offset: 4096, Length: 2050, File: 3}}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := DecodeRanges(b)
		if err != nil {
			return
		}
		if got := AppendRanges(nil, rs); !bytes.Equal(got, b) {
			t.Fatalf("%x decoded to %+v, encoded back as %x", b, rs, got)
		}
		for _, r := range rs {
			if r.Offset < 0 {
				t.Fatalf("negative offset from %x", b)
			}
		}
	})
}
