package fs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dsmount/dsmount/internal/control"
)

// ControlName is the hidden entry at a mount's root through which the CLI
// (dsmount warm, dsmount stats) and the Python package talk to the daemon:
// see internal/control for the protocol. It shadows a dataset key of the
// same name (reported as skipped).
const ControlName = control.EntryName

// controlIno keeps clear of the tree's inode numbers, which count up from 1.
const controlIno = 1 << 62

// controlNode is the control entry's inode, or a session entry's (see
// internal/control: channel 1). A session entry is made when the kernel
// looks up a new ".dsmount-control.<unique>" at the root; its session
// starts at its first ioctl and runs over ioctls (the superblock is
// read-only, so it takes no write). It ends when its answer has been read
// to the end, or when the kernel forgets the entry (its client closed
// it): at its start the daemon drops the kernel's name for the entry, so
// that the close is its last use. A kernel keeps a name whose timeout
// ran out until memory is short.
type controlNode struct {
	gofs.Inode
	m       *Mount
	ino     uint64 // controlIno, or a session entry's own number
	session bool   // a session entry; false for the control entry itself
	name    string // a session entry's name at the root
	root    *gofs.Inode

	mu        sync.Mutex
	sess      *controlHandle // the session, from its first ioctl
	forgotten bool           // the kernel forgot the entry: no session starts
}

var (
	_ gofs.NodeOpener      = (*controlNode)(nil)
	_ gofs.NodeGetattrer   = (*controlNode)(nil)
	_ gofs.NodeIoctler     = (*controlNode)(nil)
	_ gofs.NodeOnForgetter = (*controlNode)(nil)
)

func (n *controlNode) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = fuse.S_IFREG | 0o600
	out.Ino = n.ino
	out.Nlink = 1
	out.Uid, out.Gid = n.m.uid, n.m.gid
	return 0
}

// Open keeps no handle: a session is its entry's.
func (n *controlNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if n.m.FastPathMode() == FastPathNoOpen {
		return nil, 0, syscall.ENOSYS
	}
	return nil, fuse.FOPEN_DIRECT_IO | fuse.FOPEN_NONSEEKABLE, 0
}

// Ioctl moves one chunk of a session's request in (IoctlSend) or of its
// answer out (IoctlRecv); see internal/control. The control entry itself
// holds no session.
func (n *controlNode) Ioctl(ctx context.Context, f gofs.FileHandle, cmd uint32, arg uint64, in, out []byte) (int32, syscall.Errno) {
	if !n.session || (cmd != control.IoctlSend && cmd != control.IoctlRecv) {
		return 0, syscall.ENOTTY
	}
	h, errno := n.start(ctx)
	if errno != 0 {
		return 0, errno
	}
	switch cmd {
	case control.IoctlSend:
		data, err := control.DecodeChunk(in)
		if err != nil {
			return 0, syscall.EINVAL
		}
		took, errno := h.Write(ctx, data, 0)
		return int32(took), errno
	default:
		if len(out) != control.ChunkSize {
			return 0, syscall.EINVAL
		}
		got, errno := h.next(ctx, control.ChunkPayload(out))
		if errno != 0 {
			return 0, errno
		}
		control.SealChunk(out, got)
		return int32(got), 0
	}
}

// start returns the entry's session, starting it at the first ioctl
// within the caller's user's bound (EAGAIN past it).
func (n *controlNode) start(ctx context.Context) (*controlHandle, syscall.Errno) {
	n.mu.Lock()
	if n.sess != nil || n.forgotten {
		h := n.sess
		n.mu.Unlock()
		if h == nil {
			return nil, syscall.EBADF
		}
		return h, 0
	}
	h, errno := n.m.newControlHandle(ctx)
	if errno != 0 {
		n.mu.Unlock()
		return nil, errno
	}
	n.sess = h
	n.mu.Unlock()
	// The client holds the entry open: from now on its close is the
	// kernel's last use of it, and the FORGET that follows ends the
	// session (OnForget). Not sent at the lookup, whose reply may not be
	// in the kernel yet. A failure leaves the name to the kernel's
	// memory pressure; the session still ends when its answer is read.
	n.root.NotifyEntry(n.name)
	return h, 0
}

// OnForget ends the entry's session: its client closed it. The request
// is cancelled, and the session's place in its user's bound given back.
func (n *controlNode) OnForget() {
	n.mu.Lock()
	n.forgotten = true
	h := n.sess
	n.mu.Unlock()
	if h != nil {
		h.end()
	}
}

// controlSession answers the lookup of a new session entry at the root:
// a fresh inode whose session starts at its first ioctl. A name looked up
// again while the kernel holds it is the same entry.
func (m *Mount) controlSession(ctx context.Context, root *node, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	out.SetEntryTimeout(0)
	out.SetAttrTimeout(0)
	out.Mode = fuse.S_IFREG | 0o600
	out.Nlink = 1
	out.Uid, out.Gid = m.uid, m.gid
	if known := root.GetChild(name); known != nil {
		if ctl, ok := known.Operations().(*controlNode); ok {
			out.Ino = ctl.ino
			return known, 0
		}
	}
	ino := controlIno + m.sessions.Add(1)
	out.Ino = ino
	ctl := &controlNode{m: m, ino: ino, session: true, name: name, root: root.EmbeddedInode()}
	return root.NewInode(ctx, ctl, gofs.StableAttr{Mode: fuse.S_IFREG, Ino: ino}), 0
}

// newControlHandle opens a session for the caller behind ctx, within its
// user's bound on sessions.
func (m *Mount) newControlHandle(ctx context.Context) (*controlHandle, syscall.Errno) {
	c := m.caller(ctx)
	if errno := m.openSession(c); errno != 0 {
		return nil, errno
	}
	return &controlHandle{m: m, caller: c, notify: make(chan struct{}), req: control.NewBuffer(c.maxRequest())}, 0
}

// controlHandle is one client session: a request being written, then the
// response being read. Its request runs in a goroutine it owns, counted in
// the mount's requests (Mount.Close waits for it); end cancels it, and
// Release (tests) also waits for it.
type controlHandle struct {
	m      *Mount
	caller Caller // who opened the session; PID: who wrote the request

	mu      sync.Mutex
	req     control.Buffer
	discard int // bytes of a refused request still to take and drop (control.Buffer.Discard)
	started bool
	out     []byte        // response bytes not read yet
	done    bool          // the request finished; out is all there will be
	notify  chan struct{} // closed and replaced whenever out or done changes
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	ended   sync.Once // the session's place in its user's bound is given back
}

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
	if h.req.Len()+len(data) > h.caller.maxRequest() {
		// Refused whole: nothing more is kept, and the session is over.
		// The write fails (the request's length is not known, so the
		// rest can't be taken and dropped); a client that reads after
		// it learns why.
		h.req = control.NewBuffer(h.req.Limit())
		h.started, h.done = true, true
		line, _ := json.Marshal(control.Event{Type: "error", Error: fmt.Sprintf("control request refused: over %d bytes, the most a request of this user may have", h.caller.maxRequest())})
		h.out = append(line, '\n')
		h.wake()
		h.endSession() // it holds nothing now
		return 0, syscall.EFBIG
	}
	if pid := callerPID(ctx); pid != 0 && h.req.Len() == 0 {
		h.caller.PID = pid
	}
	if h.req.Add(data) {
		h.start()
	}
	return uint32(len(data)), 0
}

// start runs the request; h.mu is held.
func (h *controlHandle) start() {
	h.started = true
	req, err := h.req.Request()
	h.discard = h.req.Discard()
	large := h.req.Len() >= largeRequestBytes
	h.req = control.Buffer{}
	ctx, cancel, ok := h.m.requests.begin()
	if !ok {
		req, err = control.Request{}, errors.New("control request refused: the mount is being unmounted")
		ctx, cancel = context.WithCancel(context.Background())
	}
	h.cancel = cancel
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		if ok {
			defer h.m.requests.wg.Done()
		}
		defer h.finish()
		if err != nil {
			h.emit(control.Event{Type: "error", Error: err.Error()})
			return
		}
		h.m.handle(ctx, req, h.caller, h.emit)
		if large {
			// A request of a million paths leaves its bytes and what
			// was made of them as garbage about the size of what it
			// declared: back to the system now, not when the
			// scavenger gets to it (the daemon's RSS is the node's).
			req = control.Request{}
			debug.FreeOSMemory()
		}
	}()
}

// controlRequests are a mount's control requests running. Invariant:
// once closed, none starts, and Mount.Close waits for those running.
type controlRequests struct {
	mu     sync.Mutex // guards closed against a begin after close
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
}

// begin counts a request in and returns its context, unless the mount
// is closing.
func (r *controlRequests) begin() (context.Context, context.CancelFunc, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, false
	}
	r.wg.Add(1)
	ctx, cancel := context.WithCancel(r.ctx)
	return ctx, cancel, true
}

// close cancels the requests running and waits for them.
func (r *controlRequests) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
}

// largeRequestBytes is the size of a request whose garbage is returned to
// the system at once (about 250,000 paths).
const largeRequestBytes = 10 << 20

func (h *controlHandle) emit(ev control.Event) {
	line, err := json.Marshal(ev)
	if err != nil {
		line, _ = json.Marshal(control.Event{Type: "error", Error: err.Error()})
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
	n, errno := h.next(ctx, dest)
	if errno != 0 {
		return nil, errno
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// next copies the next response bytes into dest, as Read.
func (h *controlHandle) next(ctx context.Context, dest []byte) (int, syscall.Errno) {
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
			return n, 0
		}
		if h.done || !h.started {
			done := h.done
			h.mu.Unlock()
			if done {
				h.endSession()
			}
			return 0, 0
		}
		ch := h.notify
		h.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, syscall.EINTR
		}
	}
}

// Release ends the session and waits for its request to return.
func (h *controlHandle) Release(ctx context.Context) syscall.Errno {
	h.end()
	h.wg.Wait()
	return 0
}

// end cancels the session's request, if it runs, and ends the session;
// the request's goroutine returns on its own.
func (h *controlHandle) end() {
	h.mu.Lock()
	cancel := h.cancel
	h.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	h.endSession()
}

// endSession gives the session's place in its user's bound back, once:
// when its answer has been read to the end, or when the session ends.
// Waiting for the kernel to forget the entry would hold it for as long
// as the kernel keeps an inode.
func (h *controlHandle) endSession() {
	h.ended.Do(func() { h.m.closeSession(h.caller) })
}

// handle serves one control request from c, reporting through emit.
func (m *Mount) handle(ctx context.Context, req control.Request, c Caller, emit func(control.Event)) {
	if req.Version < 0 || req.Version > control.Version {
		emit(control.Event{Type: control.EventError, Code: control.CodeUnsupportedVersion,
			Error: fmt.Sprintf("control request of protocol version %d refused: this daemon speaks version %d (upgrade it)", req.Version, control.Version)})
		return
	}
	switch req.Op {
	case "warm":
		m.warm(ctx, req, c, emit)
	case "order":
		m.order(ctx, req, c, emit)
	case control.OpCached:
		m.cached(ctx, req, emit)
	case "stats":
		if m.statsHook == nil {
			emit(control.Event{Type: "error", Error: "stats are not available on this mount"})
			return
		}
		b, err := json.Marshal(m.statsHook(m, c))
		if err != nil {
			emit(control.Event{Type: "error", Error: err.Error()})
			return
		}
		emit(control.Event{Type: "result", Stats: b})
	default:
		emit(control.Event{Type: "error", Error: "unknown control op " + strconv.Quote(req.Op)})
	}
}
