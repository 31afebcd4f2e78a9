package fs

import (
	"context"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
	"github.com/dsmount/dsmount/readahead/stream"
)

// node is a file or directory of the mount. One type serves both: the tree
// entry says which.
type node struct {
	gofs.Inode
	m *Mount
	e entry
	// id is the cache's name for the file's object (files of a mount with
	// readahead only), computed once per inode.
	id cache.ObjectID
	// seq detects sequential reading of files bigger than a chunk.
	seq *stream.Detector
	// opens counts open handles by kind (passthrough mounts).
	opens openState
}

// newNode makes the inode data for e.
func (m *Mount) newNode(e entry) *node {
	n := &node{m: m, e: e}
	if !e.isDir() {
		obj := m.tree.obj(e)
		if m.ra != nil {
			// Hashed once per inode, only where reads are reported.
			n.id = m.src.ObjectID(obj)
		}
		if obj.Size > m.cache.ChunkSize() {
			src := m.src
			n.seq = stream.NewDetector(obj.Size, m.cache.ChunkSize(), m.streams, func(idx int, arrived func(int), ended func()) {
				src.PrefetchWatched(obj, idx, arrived, ended)
			})
			n.seq.GuardRandom(func() bool { return m.tooBigToCache(obj) })
		}
	}
	return n
}

var (
	_ gofs.NodeLookuper    = (*node)(nil)
	_ gofs.NodeReaddirer   = (*node)(nil)
	_ gofs.NodeGetattrer   = (*node)(nil)
	_ gofs.NodeOpener      = (*node)(nil)
	_ gofs.NodeReader      = (*node)(nil)
	_ gofs.NodeSetattrer   = (*node)(nil)
	_ gofs.NodeCreater     = (*node)(nil)
	_ gofs.NodeMkdirer     = (*node)(nil)
	_ gofs.NodeMknoder     = (*node)(nil)
	_ gofs.NodeUnlinker    = (*node)(nil)
	_ gofs.NodeRmdirer     = (*node)(nil)
	_ gofs.NodeRenamer     = (*node)(nil)
	_ gofs.NodeSymlinker   = (*node)(nil)
	_ gofs.NodeLinker      = (*node)(nil)
	_ gofs.NodeWriter      = (*node)(nil)
	_ gofs.NodeFlusher     = (*node)(nil)
	_ gofs.NodeOnForgetter = (*node)(nil)

	_ gofs.NodeOpendirHandler = (*node)(nil)
)

// obj is the node's object (files only).
func (n *node) obj() backend.Object { return n.m.tree.obj(n.e) }

func (n *node) fillAttr(out *fuse.Attr) { n.m.fillAttr(n.e, out) }

// fillAttr fills in the attributes of e.
func (m *Mount) fillAttr(e entry, out *fuse.Attr) {
	t := m.tree
	out.Ino = t.ino(e)
	out.Uid, out.Gid = m.uid, m.gid
	if e.isDir() {
		out.Mode = fuse.S_IFDIR | 0o555
		out.Nlink = 2
		out.SetTimes(nil, &t.mtime, &t.mtime)
		return
	}
	obj := t.obj(e)
	out.Mode = fuse.S_IFREG | 0o444
	out.Nlink = 1
	out.Size = uint64(obj.Size)
	out.Blocks = (out.Size + 511) / 512
	out.Blksize = 1 << 20
	mt := obj.ModTime
	out.SetTimes(nil, &mt, &mt)
}

func (n *node) isRoot() bool { return n.e.isDir() && n.e.idx == 0 }

// Getattr answers the kernel's GETATTR. Counted: on a read-only
// superblock the kernel keeps attributes for kernelTimeout, so each one
// is a round trip an fstat() paid.
func (n *node) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.m.getattrs.Add(1)
	n.fillAttr(&out.Attr)
	return 0
}

// Lookup answers the kernel's LOOKUP of one name: a path's first use in
// the mount, unless a listing of its directory (READDIRPLUS, see
// dirHandle.Lookup) introduced it already. Counted: each is a round trip
// on a reader's open.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	n.m.lookups.Add(1)
	return n.child(ctx, name, out)
}

// child looks up name in the directory n for the kernel.
func (n *node) child(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if !n.e.isDir() {
		return nil, syscall.ENOTDIR
	}
	if name == ControlName && n.isRoot() {
		ctl := &controlNode{m: n.m, ino: controlIno}
		out.Mode = fuse.S_IFREG | 0o600
		out.Ino = controlIno
		out.Uid, out.Gid = n.m.uid, n.m.gid
		return n.NewInode(ctx, ctl, gofs.StableAttr{Mode: fuse.S_IFREG, Ino: controlIno}), 0
	}
	c, ok := n.m.tree.child(n.e, name)
	if !ok {
		if n.isRoot() && strings.HasPrefix(name, ControlName+".") {
			return n.m.controlSession(ctx, n, name, out)
		}
		return nil, syscall.ENOENT
	}
	// A child the kernel still holds: reuse its node rather than build
	// (and hash) one that NewInode would throw away.
	if known := n.GetChild(name); known != nil {
		if kn, ok := known.Operations().(*node); ok {
			kn.fillAttr(&out.Attr)
			return known, 0
		}
	}
	child := n.m.newNode(c)
	child.fillAttr(&out.Attr)
	mode := uint32(fuse.S_IFREG)
	if c.isDir() {
		mode = fuse.S_IFDIR
	}
	// NewInode returns the existing inode when this Ino is already known.
	in := n.NewInode(ctx, child, gofs.StableAttr{Mode: mode, Ino: n.m.tree.ino(c)})
	// Only files a declared order can name are pushed (push.go).
	if n.m.ra != nil && !c.isDir() && in.Operations() == gofs.InodeEmbedder(child) {
		n.m.known.add(child)
	}
	return in, 0
}

func (n *node) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	if !n.e.isDir() {
		return nil, syscall.ENOTDIR
	}
	return gofs.NewListDirStream(n.m.tree.listing(n.e)), 0
}

func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	n.m.opens.Add(1)
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
		return nil, 0, syscall.EROFS
	}
	switch n.m.FastPathMode() {
	case FastPathNoOpen:
		// The kernel stops sending OPEN (and RELEASE) for good, and keeps
		// every file's pages across opens; reads arrive without a handle.
		return nil, 0, syscall.ENOSYS
	case FastPathPassthrough:
		if !n.e.isDir() {
			return n.openPassthrough()
		}
	}
	// The object behind an inode never changes while mounted.
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

// OpendirHandle opens a directory with its listing cached by the kernel:
// the tree never changes while mounted, so a second readdir needn't ask.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if !n.e.isDir() {
		return nil, 0, syscall.ENOTDIR
	}
	return &dirHandle{n: n, cur: n.m.tree.cursor(n.e)}, fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, 0
}

// Write refuses writes that reach a handle-less node (no-open mounts get no
// OPEN to refuse them at).
func (n *node) Write(ctx context.Context, f gofs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	return 0, syscall.EROFS
}

// ReadObserver is told how long each read a mount serves takes, in seconds
// (Config.ReadLatency); a prometheus.Histogram is one. It is called on
// the read path: it must be cheap, safe for concurrent use, and allocate
// nothing.
type ReadObserver interface {
	Observe(seconds float64)
}

func (n *node) Read(ctx context.Context, f gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if n.e.isDir() {
		return nil, syscall.EISDIR
	}
	// One clock read each side, where the daemon times reads
	// (BenchmarkNodeRead: what it costs).
	var start time.Time
	lat := n.m.readLatency
	if lat != nil {
		start = time.Now()
	}
	obj := n.obj()
	if ra := n.m.ra; ra != nil {
		if done := ra.Observe(obj, n.id, callerPID(ctx), callerUID(ctx)); done != nil {
			defer done()
		}
	}
	// Two calls, not a func value chosen first: a method value of an
	// interface may cost an allocation per read.
	n.m.readsActive.Add(1)
	defer n.m.readsActive.Add(-1)
	var got int
	var err error
	var listBuf [2]*fileSpans
	if lists := n.m.ranges.of(n.e.idx, listBuf[:0]); len(lists) > 0 {
		got, err = n.m.readDeclared(ctx, obj, lists, dest, off)
	} else if n.seq != nil && n.seq.Observe(off, int64(len(dest))) {
		got, err = n.m.src.ReadAtStream(ctx, obj, dest, off)
	} else if n.seq != nil && n.seq.Random() {
		n.m.randomRead(obj)
		got, err = n.m.src.ReadAtRandom(ctx, obj, dest, off)
	} else {
		batched := false
		if off == 0 {
			got, batched = n.m.readBatched(obj, dest)
		}
		if !batched {
			got, err = n.m.src.ReadAt(ctx, obj, dest, off)
		}
	}
	if lat != nil {
		lat.Observe(time.Since(start).Seconds())
	}
	if errno := toErrno(err); errno != 0 {
		n.m.readFailed(obj.Key, off, err)
		return nil, errno
	}
	n.m.reads.Add(1)
	n.m.bytesRead.Add(int64(got))
	return fuse.ReadResultData(dest[:got]), 0
}

// The mount is read-only: everything that would change it fails with EROFS.

func (n *node) Setattr(context.Context, gofs.FileHandle, *fuse.SetAttrIn, *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

func (n *node) Mkdir(context.Context, string, uint32, *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (n *node) Mknod(context.Context, string, uint32, uint32, *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (n *node) Unlink(context.Context, string) syscall.Errno { return syscall.EROFS }
func (n *node) Rmdir(context.Context, string) syscall.Errno  { return syscall.EROFS }

func (n *node) Rename(context.Context, string, gofs.InodeEmbedder, string, uint32) syscall.Errno {
	return syscall.EROFS
}

func (n *node) Symlink(context.Context, string, string, *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (n *node) Link(context.Context, gofs.InodeEmbedder, string, *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

// callerUID is the reading process's user, nobody's if the kernel didn't
// say (see Caller).
func callerUID(ctx context.Context) uint32 {
	if c, ok := fuse.FromContext(ctx); ok {
		return c.Uid
	}
	return nobodyUID
}

// callerPID is the reading process, 0 if the kernel didn't say.
func callerPID(ctx context.Context) int {
	if c, ok := fuse.FromContext(ctx); ok {
		return int(c.Pid)
	}
	return 0
}

// Flush answers ENOSYS: nothing is buffered, and ENOSYS makes the kernel
// stop sending FLUSH for the connection (no-open mounts can't set
// FOPEN_NOFLUSH, having no OPEN to answer).
func (n *node) Flush(ctx context.Context, f gofs.FileHandle) syscall.Errno {
	return syscall.ENOSYS
}
