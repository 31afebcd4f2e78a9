package fs

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// ControlName is the hidden entry at a mount's root through which the CLI
// (dsmount warm, dsmount stats) talks to the daemon. It works from any
// process that sees the mount, a container with only the mount included.
// It is absent from directory listings and shadows a dataset key of the
// same name (reported as skipped).
//
// Protocol: create (O_CREAT|O_EXCL, read-write) a new entry named
// ControlName + "." + anything unique at the mount's root, write one JSON
// Request terminated by '\n' and the payload it announces, if any (in as
// many writes as needed; see requestBuf), then read JSON
// Event lines until EOF. Closing the file cancels the request. The entry
// exists only while open and is never listed. (Creation, not an open of
// ControlName itself, because a no-open mount gets no OPEN to start a
// session at; on other mounts opening ControlName read-write works too.)
// A no-open mount is told of no close either (the kernel sends no
// RELEASE once an OPEN was answered ENOSYS): there a request runs to its
// end, and its session ends when its answer has been read.
const ControlName = ".dsmount-control"

// controlIno keeps clear of the tree's inode numbers, which count up from 1.
const controlIno = 1 << 62

// Request is one control request.
type Request struct {
	Op    string   `json:"op"`              // "warm", "order" or "stats"
	Paths []string `json:"paths,omitempty"` // warm: files or directories; order: the epoch's files in order; relative to the mount root
	Job   string   `json:"job,omitempty"`   // order: the job's name, unique on the mount
	Epoch int      `json:"epoch,omitempty"` // order: the epoch Paths is the order of
	Next  []string `json:"next,omitempty"`  // order: the next epoch's order, when known
	End   bool     `json:"end,omitempty"`   // order: forget the job (it is done)
	// PID (order) names the training process whose reads (its own and its
	// descendants') are the job's; default: the process writing the
	// request. Anonymous: no owner; reads are matched by file alone.
	PID       int  `json:"pid,omitempty"`
	Anonymous bool `json:"anonymous,omitempty"`
	Parallel  int  `json:"parallel,omitempty"` // warm: chunk fetches in flight
	Check     bool `json:"check,omitempty"`    // warm: report the cached fraction, fetch nothing
	// PathsBytes and NextBytes (order) announce Paths and Next as a
	// payload after the request line instead: see requestBuf.
	PathsBytes int `json:"paths_bytes,omitempty"`
	NextBytes  int `json:"next_bytes,omitempty"`
	// Table (order) names the path table that Indices index (see
	// table.go); TableBytes announces the table itself in the payload
	// (its paths, NUL-ended), after Paths and Next; IndicesBytes and
	// NextIndicesBytes the epoch's and the next's indices into it, as
	// little-endian uint32s, after the table.
	Table            string `json:"table,omitempty"`
	TableBytes       int    `json:"table_bytes,omitempty"`
	IndicesBytes     int    `json:"indices_bytes,omitempty"`
	NextIndicesBytes int    `json:"next_indices_bytes,omitempty"`

	tablePayload         []byte   // the table sent, if any
	indices, nextIndices []uint32 // decoded from the payload
}

// Event is one line of a control response.
type Event struct {
	Type  string `json:"type"` // "plan", "progress", "result" or "error"
	Error string `json:"error,omitempty"`
	// Code names an error a client acts on: "unknown_table" (send the
	// table again).
	Code  string          `json:"code,omitempty"`
	Warm  *WarmProgress   `json:"warm,omitempty"`
	Plan  *WarmPlan       `json:"plan,omitempty"`
	Order *OrderResult    `json:"order,omitempty"`
	Stats json.RawMessage `json:"stats,omitempty"`
}

// controlNode is the control entry's inode.
type controlNode struct {
	gofs.Inode
	m   *Mount
	ino uint64 // controlIno, or a session's own number
}

var (
	_ gofs.NodeOpener    = (*controlNode)(nil)
	_ gofs.NodeGetattrer = (*controlNode)(nil)
	_ gofs.NodeSetattrer = (*controlNode)(nil)
)

func (n *controlNode) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = fuse.S_IFREG | 0o600
	out.Ino = n.ino
	out.Nlink = 1
	out.Uid, out.Gid = n.m.uid, n.m.gid
	return 0
}

// Setattr accepts the truncation an O_TRUNC open may send, changing nothing.
func (n *controlNode) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return n.Getattr(ctx, f, out)
}

func (n *controlNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if n.m.FastPathMode() == FastPathNoOpen {
		return nil, 0, syscall.ENOSYS
	}
	h, errno := n.m.newControlHandle(ctx)
	if errno != 0 {
		return nil, 0, errno
	}
	return h, fuse.FOPEN_DIRECT_IO | fuse.FOPEN_NONSEEKABLE, 0
}

// controlSession answers the creation of a session entry: a fresh inode
// the kernel forgets at once (zero timeouts), and a handle that lives
// until the client closes it.
func (m *Mount) controlSession(ctx context.Context, root *node, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	h, errno := m.newControlHandle(ctx)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	ino := controlIno + m.sessions.Add(1)
	out.Mode = fuse.S_IFREG | 0o600
	out.Ino = ino
	out.Uid, out.Gid = m.uid, m.gid
	out.SetEntryTimeout(0)
	out.SetAttrTimeout(0)
	ctl := &controlNode{m: m, ino: ino}
	inode := root.NewInode(ctx, ctl, gofs.StableAttr{Mode: fuse.S_IFREG, Ino: ino})
	return inode, h, fuse.FOPEN_DIRECT_IO | fuse.FOPEN_NONSEEKABLE, 0
}

// newControlHandle opens a session for the caller behind ctx, within its
// user's bound on sessions.
func (m *Mount) newControlHandle(ctx context.Context) (*controlHandle, syscall.Errno) {
	c := m.caller(ctx)
	if errno := m.openSession(c); errno != 0 {
		return nil, errno
	}
	return &controlHandle{m: m, caller: c, notify: make(chan struct{}), req: requestBuf{limit: c.maxRequest()}}, 0
}

// controlHandle is one client session: a request being written, then the
// response being read. Its request runs in a goroutine it owns; Release
// cancels it and waits for it.
type controlHandle struct {
	m      *Mount
	caller Caller // who opened the session; PID: who wrote the request

	mu      sync.Mutex
	req     requestBuf
	discard int // bytes of a refused request still to take and drop (requestBuf.discard)
	started bool
	out     []byte        // response bytes not read yet
	done    bool          // the request finished; out is all there will be
	notify  chan struct{} // closed and replaced whenever out or done changes
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	ended   sync.Once // the session's place in its user's bound is given back
}

var (
	_ gofs.FileWriter   = (*controlHandle)(nil)
	_ gofs.FileReader   = (*controlHandle)(nil)
	_ gofs.FileReleaser = (*controlHandle)(nil)
)

func (h *controlHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.started {
		if len(data) <= h.discard {
			h.discard -= len(data)
			return uint32(len(data)), 0
		}
		return 0, syscall.EBUSY
	}
	if len(h.req.buf)+len(data) > h.caller.maxRequest() {
		// Refused whole: nothing more is kept, and the session is over.
		// The write fails (the request's length is not known, so the
		// rest can't be taken and dropped); a client that reads after
		// it learns why.
		h.req = requestBuf{limit: h.req.limit}
		h.started, h.done = true, true
		line, _ := json.Marshal(Event{Type: "error", Error: fmt.Sprintf("control request refused: over %d bytes, the most a request of this user may have", h.caller.maxRequest())})
		h.out = append(line, '\n')
		h.wake()
		h.endSession() // it holds nothing now
		return 0, syscall.EFBIG
	}
	if pid := callerPID(ctx); pid != 0 && len(h.req.buf) == 0 {
		h.caller.PID = pid
	}
	if h.req.add(data) {
		h.start()
	}
	return uint32(len(data)), 0
}

// start runs the request; h.mu is held.
func (h *controlHandle) start() {
	h.started = true
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	req, err := h.req.request()
	h.discard = h.req.discard
	large := len(h.req.buf) >= largeRequestBytes
	h.req = requestBuf{}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer h.finish()
		if err != nil {
			h.emit(Event{Type: "error", Error: err.Error()})
			return
		}
		h.m.handle(ctx, req, h.caller, h.emit)
		if large {
			// A request of a million paths leaves its bytes and what
			// was made of them as garbage about the size of what it
			// declared: back to the system now, not when the
			// scavenger gets to it (the daemon's RSS is the node's).
			req = Request{}
			debug.FreeOSMemory()
		}
	}()
}

// largeRequestBytes is the size of a request whose garbage is returned to
// the system at once (about 250,000 paths).
const largeRequestBytes = 10 << 20

func (h *controlHandle) emit(ev Event) {
	line, err := json.Marshal(ev)
	if err != nil {
		line, _ = json.Marshal(Event{Type: "error", Error: err.Error()})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.out = append(append(h.out, line...), '\n')
	h.wake()
}

func (h *controlHandle) finish() {
	h.mu.Lock()
	h.done = true
	h.wake()
	drained := len(h.out) == 0 // read before the request ended
	h.mu.Unlock()
	if drained {
		h.endSession()
	}
}

// wake tells blocked readers something changed; h.mu is held.
func (h *controlHandle) wake() {
	close(h.notify)
	h.notify = make(chan struct{})
}

// Read returns response bytes as they come, blocking until there are some;
// 0 bytes (EOF) once the request is done and everything was read.
func (h *controlHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	for {
		h.mu.Lock()
		if len(h.out) > 0 {
			n := copy(dest, h.out)
			h.out = h.out[n:]
			drained := h.done && len(h.out) == 0
			h.mu.Unlock()
			if drained {
				h.endSession()
			}
			return fuse.ReadResultData(dest[:n]), 0
		}
		if h.done || !h.started {
			done := h.done
			h.mu.Unlock()
			if done {
				h.endSession()
			}
			return fuse.ReadResultData(nil), 0
		}
		ch := h.notify
		h.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, syscall.EINTR
		}
	}
}

func (h *controlHandle) Release(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	cancel := h.cancel
	h.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	h.wg.Wait()
	h.endSession()
	return 0
}

// endSession gives the session's place in its user's bound back, once:
// when its answer has been read to the end, or at Release. Once a mount
// has answered an OPEN with ENOSYS (no-open), the kernel sends no
// RELEASE for any file of it, the control sessions created since
// included: counting sessions until Release locked a user other than
// the owner out of the control entry after 8 requests. (Such a mount
// doesn't learn either that a client closed its session early, so a
// request whose client went away runs to its end.)
func (h *controlHandle) endSession() {
	h.ended.Do(func() { h.m.closeSession(h.caller) })
}

// handle serves one control request from c, reporting through emit.
func (m *Mount) handle(ctx context.Context, req Request, c Caller, emit func(Event)) {
	switch req.Op {
	case "warm":
		m.warm(ctx, req, c, emit)
	case "order":
		m.order(ctx, req, c, emit)
	case "stats":
		if m.statsHook == nil {
			emit(Event{Type: "error", Error: "stats are not available on this mount"})
			return
		}
		b, err := json.Marshal(m.statsHook(m, c))
		if err != nil {
			emit(Event{Type: "error", Error: err.Error()})
			return
		}
		emit(Event{Type: "result", Stats: b})
	default:
		emit(Event{Type: "error", Error: "unknown control op " + strconv.Quote(req.Op)})
	}
}
