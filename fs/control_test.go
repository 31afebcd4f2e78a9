package fs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsmount/dsmount/cache"
	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/readahead"
)

// openSession starts a control session on the mount at dir as the
// clients do (control.OpenSession).
func openSession(t *testing.T, dir string) io.ReadWriteCloser {
	t.Helper()
	f, err := control.OpenSession(dir)
	if err != nil {
		t.Fatalf("opening a control session: %v", err)
	}
	return f
}

// ask writes one request line in a session of its own and reads its
// events to EOF.
func ask(t *testing.T, dir, line string) []control.Event {
	t.Helper()
	f := openSession(t, dir)
	defer f.Close()
	if _, err := f.Write([]byte(line + "\n")); err != nil {
		t.Fatalf("writing %s: %v", line, err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("reading the answer to %s: %v", line, err)
	}
	var evs []control.Event
	for l := range bytes.Lines(b) {
		evs = append(evs, decodeEvent(t, l))
	}
	return evs
}

func decodeEvent(t *testing.T, line []byte) control.Event {
	t.Helper()
	var ev control.Event
	if !bytes.HasSuffix(line, []byte("\n")) {
		t.Fatalf("an event line without its newline: %q", line)
	}
	if err := json.Unmarshal(line, &ev); err != nil {
		t.Fatalf("event line %q: %v", line, err)
	}
	return ev
}

// oneError checks that evs is one error event whose message holds want.
func oneError(t *testing.T, what string, evs []control.Event, want, code string) {
	t.Helper()
	if len(evs) != 1 || evs[0].Type != control.EventError || !strings.Contains(evs[0].Error, want) || evs[0].Code != code {
		b, _ := json.Marshal(evs)
		t.Errorf("%s: %s; want one error event with %q and code %q", what, b, want, code)
	}
}

var controlFiles = map[string]int{"top": 3000, "d/a": 3*testChunk + 100, "d/b": 1000, "d/e/c": 2 * testChunk, "d/empty": 0}

// TestControlEntry: through a real mount, on a no-open mount and one with
// the fast path off, a session answers a stats request through the
// Config.Stats hook (with its caller, and the mount's figures: the read
// before it counted), and refuses an unknown op, a malformed line and a
// request of a protocol version it doesn't speak with one error event
// each; the entry and its sessions are never listed.
func TestControlEntry(t *testing.T) {
	for _, mode := range []FastPath{FastPathNoOpen, FastPathOff} {
		t.Run(string(mode), func(t *testing.T) {
			s := newStore(controlFiles)
			callers := make(chan Caller, 10)
			sv := serve(t, s, s.listing(), func(c *Config) {
				c.FastPath = mode
				c.Stats = func(m *Mount, c Caller) any {
					callers <- c
					return m.StatsFor(c)
				}
			})
			sv.checkFile(t, "top", payload("top", 3000))

			for _, line := range []string{`{"op":"stats"}`, `{"op":"stats","version":1}`} {
				evs := ask(t, sv.dir, line)
				if len(evs) != 1 || evs[0].Type != control.EventResult {
					t.Fatalf("%s: %+v; want one result", line, evs)
				}
				var st control.MountStats
				if err := json.Unmarshal(evs[0].Stats, &st); err != nil {
					t.Fatal(err)
				}
				if st.Mountpoint != sv.dir || st.Source != s.ID() || st.Files != len(controlFiles) || st.FastPath != string(mode) {
					t.Errorf("stats: %+v", st)
				}
				if st.Reads < 1 || st.BytesRead != 3000 || st.ReadErrors != 0 {
					t.Errorf("stats after a read of 3000 bytes: reads %d, bytes %d, errors %d", st.Reads, st.BytesRead, st.ReadErrors)
				}
				if c := <-callers; c.UID != uint32(os.Getuid()) || !c.Privileged || c.PID <= 0 {
					t.Errorf("the stats hook's caller: %+v", c)
				}
			}

			oneError(t, "an unknown op", ask(t, sv.dir, `{"op":"launch"}`), `unknown control op "launch"`, "")
			oneError(t, "a malformed line", ask(t, sv.dir, `{"op":`), "malformed control request", "")
			oneError(t, "version 4", ask(t, sv.dir, `{"op":"stats","version":4}`), "version 4", control.CodeUnsupportedVersion)
			if len(callers) != 0 {
				t.Errorf("a refused request reached the stats hook")
			}

			// Hidden: the entry, and a session open meanwhile.
			f := openSession(t, sv.dir)
			defer f.Close()
			es, err := os.ReadDir(sv.dir)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range es {
				names = append(names, e.Name())
			}
			if !slices.Equal(names, []string{"d", "top"}) {
				t.Errorf("the root lists %q; want d and top alone", names)
			}
			if fi, err := os.Stat(filepath.Join(sv.dir, ControlName)); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
				t.Errorf("stat of the control entry: %v, %v", fi, err)
			}
		})
	}
}

// TestControlStatsUnavailable: a mount without a Stats hook answers a
// stats request with an error.
func TestControlStatsUnavailable(t *testing.T) {
	s := newStore(controlFiles)
	sv := serve(t, s, s.listing(), nil)
	oneError(t, "stats without a hook", ask(t, sv.dir, `{"op":"stats"}`), "not available", "")
}

// TestControlWarm: a warm of a directory through the control entry plans
// its files (in it and below it) and bytes, reports progress while the
// store holds the fetches back, and ends with a result that counts every
// chunk fetched; after it the cache holds every byte of those files and
// none of the file outside it, and a warm with check:true plans them all
// cached and fetches nothing.
func TestControlWarm(t *testing.T) {
	s := newStore(controlFiles)
	sv := serve(t, s, s.listing(), nil)
	var inDir []string
	var bytesInDir, chunks int64
	for k, n := range controlFiles {
		if strings.HasPrefix(k, "d/") {
			inDir = append(inDir, k)
			bytesInDir += int64(n)
			chunks += int64((n + testChunk - 1) / testChunk)
		}
	}

	release := s.Hold()
	defer release()
	f := startWarmOfD(t, sv.dir)
	defer f.Close()
	r := bufio.NewReader(f)
	next := func() (control.Event, bool) {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return control.Event{}, false
		}
		if err != nil {
			t.Fatalf("reading the warm's events: %v", err)
		}
		return decodeEvent(t, line), true
	}
	plan, _ := next()
	want := control.WarmPlan{Files: len(inDir), Bytes: bytesInDir, FilesCached: 1 /* the empty one */, CacheFree: -1, Fits: true}
	if plan.Type != control.EventPlan || plan.Plan == nil || !equalPlan(*plan.Plan, want) {
		t.Fatalf("the warm's first event: %+v (plan %+v); want the plan %+v", plan, plan.Plan, want)
	}
	// The store holds every fetch: the next event is a progress report
	// (they come every warmProgressEvery), with nothing fetched yet.
	prog, _ := next()
	if prog.Type != control.EventProgress || prog.Warm == nil || prog.Warm.Files != len(inDir) || prog.Warm.Bytes != bytesInDir || prog.Warm.ChunksFetched != 0 || prog.Warm.FilesDone > 1 {
		t.Fatalf("while the store holds the fetches: %+v (warm %+v); want progress, nothing fetched", prog, prog.Warm)
	}
	release()
	var last control.Event
	for {
		ev, ok := next()
		if !ok {
			break
		}
		if last.Type != "" && last.Type != control.EventProgress {
			t.Errorf("an event after the %s: %+v", last.Type, ev)
		}
		last = ev
	}
	res := last.Warm
	if last.Type != control.EventResult || res == nil {
		t.Fatalf("the warm's last event: %+v; want its result", last)
	}
	if res.Files != len(inDir) || res.FilesDone != int64(len(inDir)) || res.Bytes != bytesInDir || res.BytesDone != bytesInDir ||
		res.ChunksFetched != chunks || res.BytesFetched != bytesInDir || res.ChunksAlreadyCached != 0 || res.ChunksNotCached != 0 ||
		res.Errors != 0 || res.CacheFull || res.Interrupted {
		t.Errorf("the warm's result: %+v; want %d files, %d chunks, %d bytes fetched", res, len(inDir), chunks, bytesInDir)
	}

	for k, obj := range s.objs {
		n, err := sv.src.CachedBytes(obj)
		want := obj.Size
		if !strings.HasPrefix(k, "d/") {
			want = 0
		}
		if err != nil || n != want {
			t.Errorf("%s after the warm: %d bytes cached (%v); want %d", k, n, err, want)
		}
	}
	evs := ask(t, sv.dir, `{"op":"warm","paths":["d"],"check":true}`)
	want = control.WarmPlan{Files: len(inDir), Bytes: bytesInDir, BytesCached: bytesInDir, FilesCached: len(inDir), CacheFree: -1, Fits: true}
	if len(evs) != 1 || evs[0].Type != control.EventPlan || !equalPlan(*evs[0].Plan, want) {
		t.Errorf("warm --check after the warm: %+v; want one plan %+v", evs, want)
	}
}

// TestControlWarmNotFound: a warm naming a path the mount doesn't have
// reports it in its plan (not_found, and its name), and warms the rest.
func TestControlWarmNotFound(t *testing.T) {
	s := newStore(controlFiles)
	sv := serve(t, s, s.listing(), nil)
	evs := ask(t, sv.dir, `{"op":"warm","paths":["nope","d/b","d/nope/x"]}`)
	if len(evs) < 2 || evs[0].Plan == nil || evs[len(evs)-1].Warm == nil {
		t.Fatalf("events %+v; want a plan, then a result", evs)
	}
	plan, res := evs[0].Plan, evs[len(evs)-1].Warm
	if plan.NotFound != 2 || !slices.Equal(plan.NotFoundList, []string{"nope", "d/nope/x"}) || plan.Files != 1 || plan.Bytes != 1000 {
		t.Errorf("plan %+v; want 2 not found, named, and d/b", plan)
	}
	if evs[len(evs)-1].Type != control.EventResult || res.FilesDone != 1 || res.ChunksFetched != 1 {
		t.Errorf("result %+v; want d/b warmed", res)
	}
	if n, _ := sv.src.CachedBytes(s.objs["d/b"]); n != 1000 {
		t.Errorf("d/b: %d bytes cached after its warm", n)
	}
}

// equalPlan compares plans, the list of paths not found included.
func equalPlan(a, b control.WarmPlan) bool { return reflect.DeepEqual(a, b) }

// TestControlOrderReadsReported: an order declared through the control
// entry reaches the mount's readahead registry, the reads of its files
// through the mount are reported to it (the job's reads and frontier
// move), and an end forgets the job.
func TestControlOrderReadsReported(t *testing.T) {
	s := newStore(controlFiles)
	reg := readahead.New(readahead.Config{NoPrefetch: true})
	t.Cleanup(reg.Close)
	sv := serve(t, s, s.listing(), func(c *Config) {
		ra := reg.Mount("m", c.Source.(*cache.Source))
		t.Cleanup(ra.Close) // after the unmount
		c.Readahead = ra
	})
	order := []string{"d/b", "top", "d/a", "d/e/c"}
	line, err := json.Marshal(control.Request{Op: control.OpOrder, Job: "j", Paths: append(order, "nope"), Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	evs := ask(t, sv.dir, string(line))
	if len(evs) != 1 || evs[0].Order == nil || evs[0].Order.Declared != len(order) || evs[0].Order.Skipped != 1 {
		t.Fatalf("the order's answer: %+v", evs)
	}
	for _, k := range order[:3] {
		sv.checkFile(t, k, payload(k, controlFiles[k]))
	}
	jobs := sv.m.Jobs()
	if len(jobs) != 1 || jobs[0].Name != "j" || jobs[0].Declared != len(order) || jobs[0].Read != 3 || jobs[0].Frontier != 3 || jobs[0].TotalReads < 3 {
		t.Errorf("the job after 3 reads in its order: %+v", jobs)
	}
	evs = ask(t, sv.dir, `{"op":"order","job":"j","end":true}`)
	if len(evs) != 1 || evs[0].Order == nil || !evs[0].Order.Ended || len(sv.m.Jobs()) != 0 {
		t.Errorf("ending the job: %+v; jobs left %+v", evs, sv.m.Jobs())
	}
}

// TestSessionEndsWhenItsEntryIsClosed: a client that closes its session
// entry with its request half sent (or its answer unread) ends the
// session: the kernel forgets the entry, and its user's place in the
// bound is given back, on a no-open mount (which sends no RELEASE) as on
// one with the fast path off. An entry looked up and closed with no
// ioctl never started a session. A session past the bound fails its
// first ioctl with EAGAIN.
func TestSessionEndsWhenItsEntryIsClosed(t *testing.T) {
	for _, mode := range []FastPath{FastPathNoOpen, FastPathOff} {
		t.Run(string(mode), func(t *testing.T) {
			s := newStore(controlFiles)
			sv := serve(t, s, s.listing(), func(c *Config) { c.FastPath = mode })
			open := func() int {
				sv.m.sessMu.Lock()
				defer sv.m.sessMu.Unlock()
				return sv.m.sessionsOf[0]
			}
			var held []io.Closer
			for i := range maxPrivilegedSessions {
				f := openSession(t, sv.dir)
				held = append(held, f)
				if _, err := f.Write([]byte(`{"op":`)); err != nil { // half a request
					t.Fatalf("session %d: %v", i+1, err)
				}
			}
			if n := open(); n != maxPrivilegedSessions {
				t.Fatalf("%d sessions counted; want %d", n, maxPrivilegedSessions)
			}
			extra := openSession(t, sv.dir)
			if _, err := extra.Write([]byte(`{"op":"stats"}` + "\n")); !errors.Is(err, syscall.EAGAIN) {
				t.Errorf("a session past the bound: %v; want EAGAIN", err)
			}
			extra.Close()
			for _, f := range held {
				f.Close()
			}
			// The kernel sends its FORGETs after the closes, in its own time.
			deadline := time.Now().Add(10 * time.Second)
			for open() != 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := open(); n != 0 {
				t.Fatalf("%d sessions still counted after their entries were closed; want none", n)
			}
			for range 3 {
				if f, err := os.Open(filepath.Join(sv.dir, ControlName+".idle")); err != nil {
					t.Fatal(err)
				} else {
					f.Close()
				}
			}
			if n := open(); n != 0 {
				t.Errorf("entries opened with no ioctl count %d sessions; want none", n)
			}
			oneError(t, "a session after the others ended", ask(t, sv.dir, `{"op":"stats"}`), "not available", "")
		})
	}
}

// TestCloseCancelsControlRequests: Mount.Close cancels the control
// requests running (a warm waiting on a store that holds every fetch)
// and returns once they have, and the mount takes no request after.
func TestCloseCancelsControlRequests(t *testing.T) {
	s := newStore(controlFiles)
	sv := serve(t, s, s.listing(), nil)
	release := s.Hold()
	defer release()
	f := startWarmOfD(t, sv.dir)
	defer f.Close()
	if ev := decodeEvent(t, mustLine(t, bufio.NewReader(f))); ev.Type != control.EventPlan {
		t.Fatalf("the warm's first event: %+v; want its plan", ev)
	}
	closed := make(chan struct{})
	go func() {
		sv.m.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return with a warm running on a held store")
	}
	oneError(t, "a request after Close", ask(t, sv.dir, `{"op":"stats"}`), "being unmounted", "")
}

// startWarmOfD opens a session on the mount at dir and sends it a warm
// of directory d.
func startWarmOfD(t *testing.T, dir string) io.ReadWriteCloser {
	t.Helper()
	f := openSession(t, dir)
	if _, err := f.Write([]byte(`{"op":"warm","paths":["d"]}` + "\n")); err != nil {
		f.Close()
		t.Fatal(err)
	}
	return f
}

func mustLine(t *testing.T, r *bufio.Reader) []byte {
	t.Helper()
	line, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading an event: %v", err)
	}
	return line
}
