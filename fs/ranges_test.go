package fs

import (
	"context"
	"strings"
	"testing"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
	"github.com/dsmount/dsmount/cache"
	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/readahead"
)

// rangeMount is a Mount with a 1 MiB cache of a 64 MiB file, a 100 KiB
// one and a directory: what a declaration of ranges reaches.
func rangeMount(t *testing.T) *Mount { return rangeMountTB(t) }

func rangeMountTB(t testing.TB) *Mount {
	t.Helper()
	c, err := cache.Open(t.TempDir(), cache.Options{Capacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	src := c.Source(memory.New())
	t.Cleanup(src.Close)
	reg := readahead.New(readahead.Config{NoPrefetch: true})
	t.Cleanup(reg.Close)
	l := &backend.Listing{}
	l.Append(backend.Object{Key: "big.bin", Size: 64 << 20, Version: "v1"})
	l.Append(backend.Object{Key: "small.bin", Size: 100 << 10, Version: "v2"})
	l.Append(backend.Object{Key: "d/x", Size: 10, Version: "v3"})
	return New(Config{Cache: c, Source: src, Listing: l, Readahead: reg.Mount("m", src)})
}

func declareRanges(m *Mount, job string, files []string, cur, next []control.Range) []control.Event {
	var evs []control.Event
	m.handle(context.Background(), control.Request{Version: control.RangesVersion, Op: "order", Job: job, Paths: files, Ranges: cur, NextRanges: next},
		Caller{UID: 1000}, func(ev control.Event) { evs = append(evs, ev) })
	return evs
}

// TestDeclareRanges: ranges of a file bigger than the cache become range
// objects of whole pages (ranges next to each other in the order merged),
// ranges of a file the cache holds become that file, once; and every bad
// range refuses the whole declaration, leaving the job as it was.
func TestDeclareRanges(t *testing.T) {
	m := rangeMount(t)
	files := []string{"big.bin", "small.bin"}
	cur := []control.Range{
		{Offset: 5000, Length: 2050, File: 0},    // pages 4096..8192
		{Offset: 8100, Length: 100, File: 0},     // touches the last: merged, 4096..12288
		{Offset: 1 << 20, Length: 2050, File: 0}, // alone
		{Offset: 0, Length: 10, File: 1},         // the small file, whole
		{Offset: 50000, Length: 10, File: 1},     // again: a duplicate
		{Offset: 64<<20 - 1, Length: 1, File: 0}, // the last byte: its page
		{Offset: 3 << 20, Length: 4096, File: 0}, // page-aligned already
	}
	evs := declareRanges(m, "tok", files, cur, nil)
	if len(evs) != 1 || evs[0].Order == nil {
		t.Fatalf("declare: %+v", evs)
	}
	if res := evs[0].Order; res.Declared != 5 || res.Duplicates != 1 {
		t.Fatalf("declared %d, %d duplicates; want 5 items (two ranges merged), 1 duplicate", res.Declared, res.Duplicates)
	}
	big, _ := m.tree.lookup("big.bin")
	var lists []*fileSpans
	lists = m.ranges.of(big.idx, lists)
	if len(lists) != 1 {
		t.Fatalf("%d span lists of big.bin", len(lists))
	}
	var got [][2]int64
	for _, s := range lists[0].spans {
		got = append(got, [2]int64{s.start, s.end})
	}
	want := [][2]int64{{4096, 12288}, {1 << 20, 1<<20 + 4096}, {3 << 20, 3<<20 + 4096}, {64<<20 - 4096, 64 << 20}}
	if len(got) != len(want) {
		t.Fatalf("spans %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("spans %v; want %v", got, want)
		}
	}
	small, _ := m.tree.lookup("small.bin")
	if l := m.ranges.of(small.idx, nil); len(l) != 0 {
		t.Errorf("the small file has spans: it is declared whole")
	}
	before, _ := jobOf(m, "tok", 1000)

	for name, bad := range map[string]struct {
		files []string
		r     control.Range
		msg   string
	}{
		"past the end":       {files, control.Range{Offset: 64<<20 - 10, Length: 11}, "past the end"},
		"zero length":        {files, control.Range{Offset: 0, Length: 0}, "length 0"},
		"no such file index": {files, control.Range{File: 2, Length: 1}, "names file 2 of 2"},
		"a path not there":   {[]string{"../etc/passwd"}, control.Range{Length: 1}, "not in this mount"},
		"a directory":        {[]string{"d"}, control.Range{Length: 1}, "is a directory"},
		"too long":           {files, control.Range{Length: maxRangeLength + 1}, "at most"},
	} {
		evs := declareRanges(m, "tok", bad.files, []control.Range{{Offset: 0, Length: 10}, bad.r}, nil)
		if len(evs) != 1 || evs[0].Type != "error" || !strings.Contains(evs[0].Error, bad.msg) || strings.Contains(evs[0].Error, "\n") {
			t.Errorf("%s: %+v; want one error line saying %q", name, evs, bad.msg)
		}
		if after, _ := jobOf(m, "tok", 1000); after != before {
			t.Errorf("%s: the job changed: %+v, was %+v", name, after, before)
		}
		if l := m.ranges.of(big.idx, nil); len(l) != 1 || len(l[0].spans) != 4 {
			t.Errorf("%s: the ranges index changed", name)
		}
	}
	// Ending the job forgets its ranges: the file's reads are plain again.
	m.handle(context.Background(), control.Request{Op: "order", Job: "tok", End: true}, Caller{UID: 1000}, func(control.Event) {})
	if l := m.ranges.of(big.idx, nil); len(l) != 0 {
		t.Errorf("ended job's ranges still indexed")
	}
}

// FuzzDeclareRanges: any ranges payload, of any files, is declared or
// refused with one error line, never a panic; a refusal leaves the
// job's ranges as they were.
func FuzzDeclareRanges(f *testing.F) {
	f.Add([]byte("big.bin\x00small.bin\x00"), control.AppendRanges(nil, []control.Range{{Offset: 5000, Length: 2050}, {Offset: 1, Length: 1, File: 1}}))
	f.Add([]byte("big.bin\x00"), control.AppendRanges(nil, []control.Range{{Offset: 64<<20 - 1, Length: 1}}))
	f.Add([]byte("d\x00"), []byte{1})
	f.Fuzz(func(t *testing.T, paths, payload []byte) {
		files, err := control.SplitPaths(paths)
		if err != nil || len(files) > 8 {
			return
		}
		rs, err := control.DecodeRanges(payload)
		if err != nil || len(rs) > 64 {
			return
		}
		m := rangeMount(t)
		keep := []control.Range{{Offset: 4096, Length: 1}}
		if evs := declareRanges(m, "tok", []string{"big.bin"}, keep, nil); len(evs) != 1 || evs[0].Type != "result" {
			t.Fatalf("declaring the kept ranges: %+v", evs)
		}
		big, _ := m.tree.lookup("big.bin")
		evs := declareRanges(m, "tok", files, rs, nil)
		if len(evs) != 1 {
			t.Fatalf("%d events", len(evs))
		}
		switch ev := evs[0]; ev.Type {
		case "result":
			if ev.Order.Declared > len(rs) {
				t.Fatalf("declared %d of %d ranges", ev.Order.Declared, len(rs))
			}
		case "error":
			if strings.Contains(ev.Error, "\n") {
				t.Fatalf("a two-line error: %q", ev.Error)
			}
			if l := m.ranges.of(big.idx, nil); len(l) != 1 || len(l[0].spans) != 1 || l[0].spans[0].start != 4096 {
				t.Fatalf("refused, but the ranges changed: %+v", l)
			}
		default:
			t.Fatalf("event %+v", ev)
		}
	})
}

// BenchmarkDeclareRanges: a declaration of a million random 2,050-byte
// windows of a file bigger than the cache, from the parsed request to
// the job (issue 46: millions of ranges in at most 1 s).
func BenchmarkDeclareRanges(b *testing.B) {
	m := rangeMountTB(b)
	rs := make([]control.Range, 1_000_000)
	for i := range rs {
		rs[i] = control.Range{Offset: int64(uint64(i) * 2654435761 % (64<<20 - 2050)), Length: 2050}
	}
	b.ResetTimer()
	for range b.N {
		if evs := declareRanges(m, "tok", []string{"big.bin"}, rs, nil); len(evs) != 1 || evs[0].Type != "result" {
			b.Fatalf("%+v", evs)
		}
	}
}
