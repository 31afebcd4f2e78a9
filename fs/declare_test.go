package fs

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/readahead"
)

// declKeys are the keys of declMount's dataset: files, directories, and
// keys that can't be file names (skipped by the tree, so never declared).
var declKeys = []string{
	"a/b/c.bin", "a/d.bin", "top.txt", "with space/ünï 文件.bin", "x\ny", "p", "p/q",
	"../up", "./dot", "a//b", "bad\x00nul", "/lead", "marker/", "dup", "dup",
	"d/f0", "d/f1", "d/f2", "d/f3", "d/f4", "d/f5", "d/f6", "d/f7",
}

// declMount is a Mount of declKeys with a readahead registry (no
// prefetch): what an order request reaches through the control entry.
func declMount(tb testing.TB) *Mount {
	c, src := emptySource(tb)
	reg := readahead.New(readahead.Config{NoPrefetch: true})
	tb.Cleanup(reg.Close)
	return New(Config{Cache: c, Source: src, Listing: listingOf(declKeys...), Readahead: reg.Mount("m", src)})
}

// send frames b as a session would deliver it and runs the request; it
// returns the events, nil if b is not a complete request.
func send(m *Mount, c Caller, b []byte) []control.Event {
	r := control.NewBuffer(c.maxRequest())
	if !r.Add(b) {
		return nil
	}
	var evs []control.Event
	emit := func(ev control.Event) { evs = append(evs, ev) }
	req, err := r.Request()
	if err != nil {
		emit(control.Event{Type: "error", Error: err.Error()})
		return evs
	}
	m.handle(context.Background(), req, c, emit)
	return evs
}

// orderBytes encodes an order request with its payload, as the clients do.
func orderBytes(tb testing.TB, req control.Request, payload ...[]byte) []byte {
	line, err := json.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	return slices.Concat(append([][]byte{line, {'\n'}}, payload...)...)
}

func nulJoined(paths []string) []byte {
	var b []byte
	for _, p := range paths {
		b = append(append(b, p...), 0)
	}
	return b
}

// jobOf is the state of uid's job name on m, without the clock's fields.
func jobOf(m *Mount, name string, uid uint32) (readahead.JobStats, bool) {
	for _, j := range m.ra.Jobs() {
		if j.Name == name && j.UID == uid {
			j.IdleSeconds, j.ReadRate = 0, 0
			return j, true
		}
	}
	return readahead.JobStats{}, false
}

// checkCleanKey: a key the tree serves as a file is what a declaration
// may name: relative, clean, no "..", no NUL.
func checkCleanKey(t *testing.T, key string) {
	t.Helper()
	if key == "" || strings.IndexByte(key, 0) >= 0 || strings.HasPrefix(key, "/") || path.Clean(key) != key || key == ".." || strings.HasPrefix(key, "../") {
		t.Fatalf("the tree serves %q, which is not a clean relative path", key)
	}
}

// FuzzLookup: a path from a declaration or a warm finds a file or
// directory only at its cleaned form, which is inside the mount (a ".."
// can't climb out of the root), never a key the tree skipped (NUL, empty
// or dot components); a warm's resolve names each file once.
func FuzzLookup(f *testing.F) {
	m := declMount(f)
	for _, p := range []string{"a/b/c.bin", "/a/b/c.bin", "a/../a/d.bin", "../../a/d.bin", "..", ".", "", "/", "a//b", "./dot", "../up",
		"bad\x00nul", "bad", "x\ny", "dup", "p", "p/q", "d/", "a/b/c.bin/..", strings.Repeat("../", 100) + "top.txt", "marker"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		e, ok := m.tree.lookup(p)
		if !ok {
			return
		}
		want := strings.Trim(path.Clean("/"+p), "/")
		if e.isDir() {
			if e2, ok2 := m.tree.lookup(want); !ok2 || e2 != e {
				t.Fatalf("%q finds a directory that its clean form %q doesn't", p, want)
			}
		} else {
			key := m.tree.obj(e).Key
			checkCleanKey(t, key)
			if key != want {
				t.Fatalf("%q finds file %q, want %q", p, key, want)
			}
		}
		files, notFound := m.resolve([]string{p, want, p})
		if len(notFound) != 0 {
			t.Fatalf("resolve(%q) found nothing for %q", p, notFound)
		}
		seen := map[uint32]bool{}
		for _, f := range files {
			if f.isDir() || seen[f.idx] {
				t.Fatalf("resolve(%q): %d files, one a directory or twice", p, len(files))
			}
			seen[f.idx] = true
			checkCleanKey(t, m.tree.obj(f).Key)
		}
	})
}

// FuzzOrder: an order request of any job name, epoch, paths (in the
// payload or as JSON), table and indices, from the mount's owner or
// another user, gets one event: a one-line error, or a result whose
// counts add up (each declared path or index is declared, a repeat, or
// skipped), whose declared files are exactly those the paths name (clean,
// relative, inside the mount), and which the registry holds as said; the
// other job on the mount is untouched either way.
func FuzzOrder(f *testing.F) {
	m := declMount(f)
	keepReq := orderBytes(f, control.Request{Op: "order", Job: "keep", Epoch: 5, PathsBytes: len(nulJoined(declKeys[:4]))}, nulJoined(declKeys[:4]))
	if evs := send(m, Caller{UID: 4242}, keepReq); len(evs) != 1 || evs[0].Type != "result" {
		f.Fatalf("declaring the kept job: %+v", evs)
	}
	keep, _ := jobOf(m, "keep", 4242)
	nul := func(ps ...string) []byte { return nulJoined(ps) }
	idx := func(is ...uint32) []byte {
		var b []byte
		for _, i := range is {
			b = append(b, byte(i), byte(i>>8), byte(i>>16), byte(i>>24))
		}
		return b
	}
	f.Add("train", 0, nul("a/b/c.bin", "top.txt", "nope"), nul("d/f0"), []byte(nil), []byte(nil), []byte(nil), uint8(0), false)
	f.Add("dups", 3, nul("dup", "dup", "./dup", "/dup", "a/../dup", "d"), []byte(nil), []byte(nil), []byte(nil), []byte(nil), uint8(0), true)
	f.Add("json", 1, []byte("a/d.bin\nbad\x00nul\n../../top.txt\nx\ny"), []byte("p/q"), []byte(nil), []byte(nil), []byte(nil), uint8(1), false)
	f.Add("table", 2, []byte(nil), []byte(nil), nul("d/f0", "d/f1", "nope", "d"), idx(0, 1, 2, 3, 4, 1<<31), idx(1, 0), uint8(2), false)
	f.Add("named", 2, []byte(nil), []byte(nil), nul("d/f0"), idx(0), []byte(nil), uint8(3), false)
	f.Add("end", 0, []byte(nil), []byte(nil), []byte(nil), []byte(nil), []byte(nil), uint8(4), true)
	f.Add("", 0, nul("top.txt"), []byte(nil), []byte(nil), []byte(nil), []byte(nil), uint8(0), false)
	f.Add("tab\there", 0, nul("top.txt"), []byte(nil), []byte(nil), []byte(nil), []byte(nil), uint8(0), false)
	f.Add(strings.Repeat("j", 300), 0, nul("top.txt"), []byte(nil), []byte(nil), []byte(nil), []byte(nil), uint8(0), false)
	f.Add("big", 1<<40, nul("top.txt"), []byte(nil), []byte(nil), []byte(nil), []byte(nil), uint8(0), false)
	f.Add("neg", -1, nul("top.txt"), []byte(nil), []byte(nil), []byte(nil), []byte(nil), uint8(0), false)
	f.Add("none", 0, nul("nope", "d", ""), []byte(nil), []byte(nil), []byte(nil), []byte(nil), uint8(0), false)
	f.Add("odd", 0, []byte("top.txt"), []byte(nil), []byte(nil), []byte(nil), []byte("\x01"), uint8(2), false)
	f.Fuzz(func(t *testing.T, job string, epoch int, paths, next, table, indices, nextIdx []byte, mode uint8, privileged bool) {
		// The name as the daemon decodes it from JSON (invalid UTF-8
		// becomes U+FFFD).
		if names := viaJSON(t, []string{job}); len(names) == 1 {
			job = names[0]
		}
		if job == "keep" {
			return // the job that must stay untouched
		}
		c := Caller{UID: 1000, Privileged: privileged}
		if privileged {
			c.UID = 0
		}
		req := control.Request{Op: "order", Job: job, Epoch: epoch, End: mode&4 != 0}
		var payload [][]byte
		var cur, nxt []string // the paths declared, as the daemon gets them
		nIdx, nNextIdx := len(indices)/4, len(nextIdx)/4
		switch mode & 3 {
		case 0: // paths in the payload, as the CLI and the Python client send them
			req.PathsBytes, req.NextBytes = len(paths), len(next)
			payload = [][]byte{paths, next}
			cur, nxt = splitNUL(paths), splitNUL(next)
		case 1: // paths in the JSON line (a path holding a NUL goes so)
			if len(paths) > 0 {
				req.Paths = strings.Split(string(paths), "\n")
			}
			if len(next) > 0 {
				req.Next = strings.Split(string(next), "\n")
			}
			cur, nxt = viaJSON(t, req.Paths), viaJSON(t, req.Next)
		default: // a table, sent (2) or only named (3), and indices into it
			req.Table = control.TableName(table)
			if mode&3 == 2 {
				req.TableBytes = len(table)
			} else {
				table = nil
			}
			req.IndicesBytes, req.NextIndicesBytes = len(indices), len(nextIdx)
			payload = [][]byte{table, indices, nextIdx}
		}
		evs := send(m, c, orderBytes(t, req, payload...))
		defer m.ra.End(job, c.UID, false)
		if len(evs) != 1 {
			t.Fatalf("%d events, want one: %+v", len(evs), evs)
		}
		ev := evs[0]
		switch {
		case ev.Type == "error":
			if ev.Error == "" || strings.Contains(ev.Error, "\n") || (ev.Code != "" && ev.Code != "unknown_table") {
				t.Fatalf("error event %+v: want one line", ev)
			}
		case ev.Type != "result" || ev.Order == nil || ev.Order.Job != job:
			t.Fatalf("event %+v", ev)
		case req.End:
			if checkJobName(job) != nil {
				t.Fatalf("ended job %q, whose name a declaration can't have", job)
			}
		default:
			checkDeclared(t, m, c, req, ev.Order, cur, nxt, nIdx, nNextIdx)
		}
		if s, _ := jobOf(m, "keep", 4242); s != keep {
			t.Fatalf("the other job changed: %+v, was %+v", s, keep)
		}
	})
}

// viaJSON is what the daemon decodes of paths sent as JSON (invalid UTF-8
// becomes U+FFFD).
func viaJSON(t *testing.T, paths []string) []string {
	b, err := json.Marshal(paths)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// splitNUL is the NUL-ended paths of a payload, its last piece included
// (a payload not ending in NUL is refused anyway).
func splitNUL(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// checkDeclared checks an accepted declaration against its request.
func checkDeclared(t *testing.T, m *Mount, c Caller, req control.Request, res *control.OrderResult, cur, nxt []string, nIdx, nNextIdx int) {
	t.Helper()
	if checkJobName(req.Job) != nil || res.Epoch != req.Epoch || req.Epoch < 0 || req.Epoch > maxEpoch {
		t.Fatalf("declared job %q epoch %d", req.Job, req.Epoch)
	}
	total := len(cur) + len(nxt)
	if req.Table != "" {
		total = nIdx + nNextIdx
	}
	if res.Declared < 1 || res.Declared+res.NextDeclared+res.Duplicates+res.Skipped != total {
		t.Fatalf("%d paths or indices: %+v", total, res)
	}
	if req.Table == "" {
		// Exactly the files the paths name, each once.
		files := func(ps []string) int {
			seen := map[uint32]bool{}
			for _, p := range ps {
				if e, ok := m.tree.lookup(p); ok && !e.isDir() {
					checkCleanKey(t, m.tree.obj(e).Key)
					seen[e.idx] = true
				}
			}
			return len(seen)
		}
		if res.Declared != files(cur) || res.NextDeclared != files(nxt) {
			t.Fatalf("declared %d+%d files, the paths name %d+%d: %+v", res.Declared, res.NextDeclared, files(cur), files(nxt), res)
		}
	}
	s, ok := jobOf(m, req.Job, c.UID)
	if !ok || s.Epoch != req.Epoch || s.Declared != res.Declared || s.NextDeclared != res.NextDeclared || s.Frontier != 0 {
		t.Fatalf("the registry holds %+v (found %v) after %+v", s, ok, res)
	}
}

// TestDeclarationBounds: a declaration over a bound (request bytes, files
// in an epoch, a job name's length or characters, the epoch's number,
// jobs on the mount) is refused with an error of one line that names the
// bound, and the job already on the mount keeps its order and can
// declare its next epoch.
func TestDeclarationBounds(t *testing.T) {
	m := declMount(t)
	owner := Caller{UID: 0, Privileged: true}
	declare := func(c Caller, job string, epoch int, paths ...string) control.Event {
		t.Helper()
		p := nulJoined(paths)
		evs := send(m, c, orderBytes(t, control.Request{Op: "order", Job: job, Epoch: epoch, PathsBytes: len(p)}, p))
		if len(evs) != 1 {
			t.Fatalf("%d events", len(evs))
		}
		return evs[0]
	}
	if ev := declare(Caller{UID: 4242}, "keep", 5, "d/f0", "d/f1", "d/f2"); ev.Type != "result" {
		t.Fatal(ev.Error)
	}
	keep, _ := jobOf(m, "keep", 4242)
	refused := func(what string, ev control.Event, want string) {
		t.Helper()
		if ev.Type != "error" || strings.Contains(ev.Error, "\n") || !strings.Contains(ev.Error, want) {
			t.Errorf("%s: %+v; want one error line with %q", what, ev, want)
		}
		if s, _ := jobOf(m, "keep", 4242); s != keep {
			t.Errorf("%s changed the other job: %+v, was %+v", what, s, keep)
		}
	}
	refused("a long job name", declare(owner, strings.Repeat("j", maxJobName+1), 0, "top.txt"), "at most 256 bytes")
	refused("a job name with a newline", declare(owner, "a\nb", 0, "top.txt"), "control character")
	refused("epoch 2^31", declare(owner, "j", maxEpoch+1, "top.txt"), "outside 0..2147483647")

	// More files than an epoch may have, as indices (4 bytes each).
	big := make([]byte, 4*(readahead.MaxDeclared+1))
	evs := send(m, owner, orderBytes(t, control.Request{Op: "order", Job: "big", Table: control.TableName(nil), IndicesBytes: len(big)}, big))
	refused("MaxDeclared+1 files", evs[0], "at most 10000000 files")

	// A request over the user's bound on bytes, announced: refused at
	// its first write, the rest taken and dropped, the error readable.
	h, errno := m.newControlHandle(context.Background()) // no FUSE context: nobody, not privileged
	if errno != 0 {
		t.Fatal(errno)
	}
	line := orderBytes(t, control.Request{Op: "order", Job: "huge", PathsBytes: maxUserRequestBytes})
	if n, errno := h.Write(context.Background(), line, 0); errno != 0 || int(n) != len(line) {
		t.Fatalf("the request line: %d, %v", n, errno)
	}
	chunk := make([]byte, 1<<20)
	for left := maxUserRequestBytes; left > 0; left -= len(chunk) {
		if n, errno := h.Write(context.Background(), chunk[:min(left, len(chunk))], 0); errno != 0 || int(n) != min(left, len(chunk)) {
			t.Fatalf("the refused payload's write with %d bytes left: %d, %v", left, n, errno)
		}
	}
	if _, errno := h.Write(context.Background(), []byte{0}, 0); errno == 0 {
		t.Error("a byte past the refused request's announced length was taken")
	}
	refused("a request over the user's bytes", readEvent(t, h), "at most 67108864")
	h.Release(context.Background())

	// One not announced (a JSON line): its write fails, and the error
	// is readable.
	h, _ = m.newControlHandle(context.Background())
	if _, errno := h.Write(context.Background(), make([]byte, maxUserRequestBytes+1), 0); errno == 0 {
		t.Fatal("a request line over the user's bytes was taken")
	}
	refused("a request line over the user's bytes", readEvent(t, h), "over 67108864 bytes")
	h.Release(context.Background())

	// Jobs on the mount: fill it (the owner has no bound of its own).
	for i := len(m.ra.Jobs()); i < readahead.MaxJobsPerMount; i++ {
		if ev := declare(owner, fmt.Sprint("j", i), 0, "top.txt"); ev.Type != "result" {
			t.Fatalf("job %d: %s", i+1, ev.Error)
		}
	}
	refused("a job over the mount's bound", declare(owner, "one-more", 0, "top.txt"), "at most 256 jobs")
	if ev := declare(Caller{UID: 4242}, "keep", 6, "d/f3"); ev.Type != "result" {
		t.Errorf("the existing job's next epoch on a full mount: %s", ev.Error)
	}
}

// readEvent reads one event line from a session, with a deadline.
func readEvent(t *testing.T, h *controlHandle) control.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	buf := make([]byte, 4096)
	res, errno := h.Read(ctx, buf, 0)
	if errno != 0 {
		t.Fatalf("read the answer: %v", errno)
	}
	b, _ := res.Bytes(buf)
	var ev control.Event
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("answer %q: %v", b, err)
	}
	return ev
}

// TestSessionEndsWhenItsAnswerIsRead: a session whose answer was read to
// the end no longer counts against its user's bound, with no Release: a
// no-open mount gets no RELEASE, and a user other than the owner was
// locked out after maxUserSessions requests. A session refused for its
// bytes ends at once. One whose answer is unread still counts.
func TestSessionEndsWhenItsAnswerIsRead(t *testing.T) {
	m := declMount(t)
	ctx := context.Background() // no FUSE context: nobody, not privileged
	stats := orderBytes(t, control.Request{Op: "order", Job: "j", End: true})
	for i := range 3 * maxUserSessions {
		h, errno := m.newControlHandle(ctx)
		if errno != 0 {
			t.Fatalf("session %d: %v", i+1, errno)
		}
		switch i % 3 {
		case 0, 1:
			if _, errno := h.Write(ctx, stats, 0); errno != 0 {
				t.Fatal(errno)
			}
			readEvent(t, h) // the one line, to its end
		case 2:
			if _, errno := h.Write(ctx, make([]byte, maxUserRequestBytes+1), 0); errno != syscall.EFBIG {
				t.Fatalf("a request over the bytes: %v", errno)
			}
		}
	}
	var held []*controlHandle
	for range maxUserSessions {
		h, errno := m.newControlHandle(ctx)
		if errno != 0 {
			t.Fatalf("a session after the others were read: %v", errno)
		}
		h.Write(ctx, stats, 0) // answered, not read
		held = append(held, h)
	}
	if _, errno := m.newControlHandle(ctx); errno != syscall.EAGAIN {
		t.Errorf("a session past %d unread ones: %v, want EAGAIN", maxUserSessions, errno)
	}
	for _, h := range held {
		h.Release(ctx)
	}
}
