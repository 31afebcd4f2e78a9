package fs

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dsmount/dsmount/backend"
)

// FastPath is how a mount serves hot reads. Each FUSE round trip costs more
// than reading a small file from the page cache, so the fast paths take
// the daemon out of hot reads (docs/performance.md):
//
//   - FastPathNoOpen: Open answers ENOSYS, after which the kernel sends no
//     OPEN, FLUSH or RELEASE for the whole connection and keeps each file's
//     pages across opens; a hot small file costs a page-cache read. For
//     datasets of small files.
//   - FastPathPassthrough: a wholly cached file is opened with its cache
//     file as the kernel's backing file, and the kernel reads it directly.
//     Needs kernel >= 6.9 and CAP_SYS_ADMIN; probed at start-up. For large
//     files.
//   - FastPathOff: every open is answered (keep-cache).
//
// No-open and passthrough can't be mixed on one connection (a no-open
// connection sends no OPEN to attach a backing file to), so a mount has one.
type FastPath string

const (
	FastPathAuto        FastPath = "auto"
	FastPathNoOpen      FastPath = "no-open"
	FastPathPassthrough FastPath = "passthrough"
	FastPathOff         FastPath = "off"
)

// ParseFastPath checks a --fast-path value.
func ParseFastPath(s string) (FastPath, error) {
	switch p := FastPath(s); p {
	case FastPathAuto, FastPathNoOpen, FastPathPassthrough, FastPathOff:
		return p, nil
	}
	return "", fmt.Errorf("unknown fast path %q (want auto, no-open, passthrough or off)", s)
}

// largeFile is the size from which a file counts as large when choosing a
// fast path: several chunks, read in long sequential runs.
const largeFile = 32 << 20

// chooseFastPath picks a mount's fast path from its size profile: mostly
// large files (by bytes) want passthrough, anything else no-open.
func chooseFastPath(l *backend.Listing) FastPath {
	var total, large int64
	for i := range l.Len() {
		size := l.Size(i)
		total += size
		if size >= largeFile {
			large += size
		}
	}
	if total > 0 && 2*large > total {
		return FastPathPassthrough
	}
	return FastPathNoOpen
}

// probePassthrough registers a backing file with the kernel and takes it
// back: the only sure test that this kernel and these privileges allow
// passthrough (go-fuse would otherwise drop it silently on the first open).
func (m *Mount) probePassthrough(dir string) error {
	f, err := os.CreateTemp(dir, "passthrough-probe-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	id, errno := m.server.RegisterBackingFd(&fuse.BackingMap{Fd: int32(f.Fd())})
	if errno != 0 {
		return fmt.Errorf("registering a backing file: %w", errno)
	}
	if errno := m.server.UnregisterBackingFd(id); errno != 0 {
		return fmt.Errorf("unregistering a backing file: %w", errno)
	}
	return nil
}

// openState counts a file node's open handles by kind: the kernel refuses
// (ETXTBSY) to open an inode in passthrough while it is open through the
// page cache, and the other way round, so a node stays in the kind it was
// first opened in until every handle is released.
type openState struct {
	mu          sync.Mutex
	passthrough int
	cached      int
	// backing is the cache file of the passthrough handles, opened by the
	// first and closed with the last: every handle offers the same fd, so
	// whichever go-fuse registers first (after Open returns, in its own
	// lock) is the one the others reuse.
	backing *os.File
}

// openPassthrough opens n for a passthrough mount: passthrough if its
// object is wholly cached (or already open that way), through the page
// cache otherwise.
func (n *node) openPassthrough() (gofs.FileHandle, uint32, syscall.Errno) {
	st := &n.opens
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.passthrough > 0 {
		st.passthrough++
		return &passthroughFile{n: n, f: st.backing}, 0, 0
	}
	if st.cached == 0 {
		if f, err := n.m.src.OpenCached(n.obj()); err == nil {
			st.passthrough++
			st.backing = f
			return &passthroughFile{n: n, f: f}, 0, 0
		}
	}
	st.cached++
	return &cachedFile{n: n}, fuse.FOPEN_KEEP_CACHE, 0
}

// passthroughFile is an open handle whose reads the kernel serves from the
// cache file f (the node's openState.backing; the kernel holds its own
// reference once registered).
type passthroughFile struct {
	n *node
	f *os.File
}

var (
	_ gofs.FilePassthroughFder = (*passthroughFile)(nil)
	_ gofs.FileReleaser        = (*passthroughFile)(nil)
)

func (h *passthroughFile) PassthroughFd() (int, bool) { return int(h.f.Fd()), true }

func (h *passthroughFile) Release(ctx context.Context) syscall.Errno {
	st := &h.n.opens
	st.mu.Lock()
	defer st.mu.Unlock()
	st.passthrough--
	if st.passthrough == 0 {
		st.backing.Close()
		st.backing = nil
	}
	return 0
}

// cachedFile is an open handle of a passthrough mount served through the
// page cache (its object was not wholly cached at open); reads go to the
// node.
type cachedFile struct{ n *node }

var _ gofs.FileReleaser = (*cachedFile)(nil)

func (h *cachedFile) Release(ctx context.Context) syscall.Errno {
	h.n.opens.mu.Lock()
	h.n.opens.cached--
	h.n.opens.mu.Unlock()
	return 0
}

// dirHandle serves a directory's sorted listing; opened with
// FOPEN_CACHE_DIR, the kernel keeps it and doesn't ask again.
type dirHandle struct {
	n   *node // the directory
	cur dirCursor
	pos uint64 // entries returned
	out fuse.DirEntry
}

var (
	_ gofs.FileReaddirenter = (*dirHandle)(nil)
	_ gofs.FileSeekdirer    = (*dirHandle)(nil)
	_ gofs.FileLookuper     = (*dirHandle)(nil)
)

// Lookup fills in an entry of a READDIRPLUS answer: the kernel keeps it as
// if looked up, so opening that name later costs no LOOKUP round trip.
// Not counted as a lookup (stats' lookups are the kernel's own LOOKUPs).
func (d *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return d.n.child(ctx, name, out)
}

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	name, e, ok := d.cur.next()
	if !ok {
		return nil, 0
	}
	d.pos++
	mode := uint32(fuse.S_IFREG)
	if e.isDir() {
		mode = fuse.S_IFDIR
	}
	// go-fuse copies the entry into its reply before asking for the next.
	d.out = fuse.DirEntry{Name: name, Ino: d.n.m.tree.ino(e), Mode: mode}
	return &d.out, 0
}

// Seekdir restarts the walk and skips off entries (rewinddir, or a
// seekdir to a position telldir gave).
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	d.cur, d.pos = d.n.m.tree.cursor(d.n.e), 0
	for d.pos < off {
		if _, _, ok := d.cur.next(); !ok {
			break
		}
		d.pos++
	}
	return 0
}
