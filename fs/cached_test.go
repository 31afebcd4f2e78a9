package fs

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
	"github.com/dsmount/dsmount/cache"
	"github.com/dsmount/dsmount/internal/control"
)

// TestCachedAnswersWhichTableFilesAreCached: a cached request's bitmap
// has the bits of the table's wholly cached files, none of a file read in
// part, a path that is no file, or a directory; the table is kept, so the
// next request may name it alone; bad requests get one-line errors.
func TestCachedAnswersWhichTableFilesAreCached(t *testing.T) {
	c, err := cache.Open(t.TempDir(), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	be := memory.New()
	l := &backend.Listing{}
	objs := map[string]backend.Object{}
	for _, k := range []string{"d/f0", "d/f1", "d/f2", "d/f3"} {
		objs[k] = be.Put(k, bytes.Repeat([]byte(k), 1000))
		l.Append(objs[k])
	}
	src := c.Source(be)
	t.Cleanup(src.Close)
	m := New(Config{Cache: c, Source: src, Listing: l})

	for _, k := range []string{"d/f1", "d/f3"} {
		buf := make([]byte, objs[k].Size)
		if _, err := src.ReadAt(context.Background(), objs[k], buf, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.ReadAt(context.Background(), objs["d/f2"], make([]byte, 10), 0); err != nil {
		t.Fatal(err) // one chunk: all of it is cached, so d/f2 counts
	}
	c.Settle()
	table := nulJoined([]string{"d/f0", "d/f1", "nope", "d", "d/f3", "d/f2"})
	name := control.TableName(table)
	owner := Caller{Privileged: true}
	ask := func(req control.Request, payload ...[]byte) control.Event {
		t.Helper()
		evs := send(m, owner, orderBytes(t, req, payload...))
		if len(evs) != 1 {
			t.Fatalf("%+v: events %+v, want one", req, evs)
		}
		return evs[0]
	}
	for _, req := range []control.Request{
		{Op: control.OpCached, Table: name, TableBytes: len(table)},
		{Op: control.OpCached, Table: name}, // kept: named alone
	} {
		var payload [][]byte
		if req.TableBytes > 0 {
			payload = append(payload, table)
		}
		ev := ask(req, payload...)
		r := ev.Cached
		if ev.Type != control.EventResult || r == nil {
			t.Fatalf("%+v: %+v", req, ev)
		}
		var got []int
		for i := range 8 {
			if r.Has(i) {
				got = append(got, i)
			}
		}
		if r.Files != 6 || r.Cached != 3 || len(r.Bitmap) != 1 || len(got) != 3 || got[0] != 1 || got[1] != 4 || got[2] != 5 {
			t.Errorf("%+v: %+v (cached %v); want files 1, 4 and 5 of 6 cached", req, r, got)
		}
	}

	other := nulJoined([]string{"d/f0"})
	for _, tc := range []struct {
		req     control.Request
		payload [][]byte
		code    string
	}{
		{req: control.Request{Op: control.OpCached}},
		{req: control.Request{Op: control.OpCached, Table: control.TableName(other)}, code: control.CodeUnknownTable},
		{req: control.Request{Op: control.OpCached, Table: name, TableBytes: len(other)}, payload: [][]byte{other}},
		{req: control.Request{Op: control.OpCached, Table: name, IndicesBytes: 4}, payload: [][]byte{{0, 0, 0, 0}}},
	} {
		ev := ask(tc.req, tc.payload...)
		if ev.Type != control.EventError || ev.Code != tc.code || !strings.HasPrefix(ev.Error, "cached: ") || strings.Contains(ev.Error, "\n") {
			t.Errorf("%+v: %+v; want one error line starting \"cached: \", code %q", tc.req, ev, tc.code)
		}
	}
}

// FuzzCached: any table, sent or named, gets one event: a bitmap of one
// bit per path with no bit past them, or a one-line error.
func FuzzCached(f *testing.F) {
	f.Add(nulJoined([]string{"d/f0", "d/f1", "nope", "d"}), true, false)
	f.Add([]byte("a\x00\x00b"), false, false)
	f.Add([]byte("no nul"), true, true)
	m := declMount(f)
	f.Fuzz(func(t *testing.T, table []byte, sendTable, wrongName bool) {
		req := control.Request{Op: control.OpCached, Table: control.TableName(table)}
		if wrongName {
			req.Table = "x"
		}
		var payload [][]byte
		if sendTable {
			req.TableBytes = len(table)
			payload = append(payload, table)
		}
		evs := send(m, Caller{Privileged: true}, orderBytes(t, req, payload...))
		if len(evs) != 1 {
			t.Fatalf("events %+v, want one", evs)
		}
		ev := evs[0]
		if ev.Type == control.EventError {
			if ev.Error == "" || strings.Contains(ev.Error, "\n") {
				t.Fatalf("error %q", ev.Error)
			}
			return
		}
		r := ev.Cached
		if r == nil || len(r.Bitmap) != (r.Files+7)/8 || r.Files != bytes.Count(table, []byte{0}) {
			t.Fatalf("answer %+v to a table of %q", r, table)
		}
		if r.Files%8 != 0 && r.Bitmap[len(r.Bitmap)-1]>>(r.Files%8) != 0 {
			t.Fatalf("a bit past the table's %d paths: %08b", r.Files, r.Bitmap[len(r.Bitmap)-1])
		}
	})
}
