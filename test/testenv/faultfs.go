package testenv

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FaultFS is a loopback FUSE filesystem over a directory, served by the
// test process, whose fsync fails the way a failing disk's does once told
// to: fsync and fdatasync return EIO, and the bytes written to the file
// since its last good sync are lost (zeros are read there from then on,
// by this process and by the kernel, whose cached pages of the range are
// dropped). A cache directory placed on it shows what the cache makes of
// a sync that fails.
type FaultFS struct {
	// Dir is where the filesystem is mounted.
	Dir string

	backing string
	server  *fuse.Server
	// failSync, when set, decides which files' syncs fail, by path
	// relative to Dir.
	failSync atomic.Pointer[func(rel string) bool]
	// lost counts syncs that failed and lost their file's unsynced bytes.
	lost atomic.Int64

	mu    sync.Mutex
	dirty map[uint64][]span // unsynced writes by backing inode number
}

type span struct{ off, n int64 }

// StartFaultFS mounts a FaultFS at a new temporary directory until the
// test ends; syncs succeed until FailSyncs.
func StartFaultFS(t T) *FaultFS {
	t.Helper()
	ffs := &FaultFS{Dir: t.TempDir(), backing: t.TempDir(), dirty: map[uint64][]span{}}
	var st syscall.Stat_t
	if err := syscall.Stat(ffs.backing, &st); err != nil {
		t.Fatalf("fault fs: %v", err)
	}
	r := &gofs.LoopbackRoot{Path: ffs.backing, Dev: uint64(st.Dev)}
	r.NewNode = func(r *gofs.LoopbackRoot, parent *gofs.Inode, name string, st *syscall.Stat_t) gofs.InodeEmbedder {
		return &faultNode{LoopbackNode: gofs.LoopbackNode{RootData: r}, ffs: ffs}
	}
	top := &faultNode{LoopbackNode: gofs.LoopbackNode{RootData: r}, ffs: ffs}
	r.RootNode = top
	zero := time.Duration(0)
	server, err := gofs.Mount(ffs.Dir, top, &gofs.Options{
		// Every attribute and entry fresh: the cache reads sizes back.
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{FsName: "faultfs", Name: "faultfs", DirectMount: true, AllowOther: true},
	})
	if err != nil {
		t.Fatalf("fault fs: mount %s: %v", ffs.Dir, err)
	}
	ffs.server = server
	t.Cleanup(func() {
		if err := server.Unmount(); err != nil {
			syscall.Unmount(ffs.Dir, syscall.MNT_DETACH)
		}
	})
	return ffs
}

// FailSyncs makes every later sync of a file whose path (relative to Dir)
// satisfies which fail and lose that file's unsynced bytes.
func (f *FaultFS) FailSyncs(which func(rel string) bool) { f.failSync.Store(&which) }

// LostSyncs is how many syncs have failed and lost bytes so far.
func (f *FaultFS) LostSyncs() int64 { return f.lost.Load() }

// faultNode is a loopback node whose files note their writes and fail
// their syncs when told to.
type faultNode struct {
	gofs.LoopbackNode
	ffs *FaultFS
}

var (
	_ gofs.NodeOpener  = (*faultNode)(nil)
	_ gofs.NodeCreater = (*faultNode)(nil)
)

// O_DIRECT is dropped below: the kernel's FUSE requests come in buffers the
// backing filesystem would refuse for it.
func (n *faultNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags&^syscall.O_DIRECT)
	if errno != 0 {
		return nil, 0, errno
	}
	return &faultFile{inner: fh, n: n}, fl, 0
}

func (n *faultNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	inode, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags&^syscall.O_DIRECT, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	child, _ := inode.Operations().(*faultNode)
	return inode, &faultFile{inner: fh, n: child}, fl, 0
}

func (n *faultNode) rel() string { return n.Path(nil) }

func (n *faultNode) backingPath() string { return filepath.Join(n.ffs.backing, n.rel()) }

// faultFile forwards to the loopback file, keeping track of what was
// written since the last sync.
type faultFile struct {
	inner gofs.FileHandle
	n     *faultNode
}

var (
	_ gofs.FileReader    = (*faultFile)(nil)
	_ gofs.FileWriter    = (*faultFile)(nil)
	_ gofs.FileFsyncer   = (*faultFile)(nil)
	_ gofs.FileFlusher   = (*faultFile)(nil)
	_ gofs.FileReleaser  = (*faultFile)(nil)
	_ gofs.FileGetattrer = (*faultFile)(nil)
	_ gofs.FileSetattrer = (*faultFile)(nil)
	_ gofs.FileAllocater = (*faultFile)(nil)
	_ gofs.FileLseeker   = (*faultFile)(nil)
)

func (f *faultFile) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.inner.(gofs.FileReader).Read(ctx, dest, off)
}

func (f *faultFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	n, errno := f.inner.(gofs.FileWriter).Write(ctx, data, off)
	if errno == 0 && n > 0 {
		ino := f.n.StableAttr().Ino
		f.n.ffs.mu.Lock()
		f.n.ffs.dirty[ino] = append(f.n.ffs.dirty[ino], span{off, int64(n)})
		f.n.ffs.mu.Unlock()
	}
	return n, errno
}

// Fsync fails, when told to, after zeroing the bytes written since the
// last sync in the backing file and (once the reply is out) dropping the
// kernel's cached pages of the file.
func (f *faultFile) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	ffs := f.n.ffs
	ino := f.n.StableAttr().Ino
	ffs.mu.Lock()
	spans := ffs.dirty[ino]
	delete(ffs.dirty, ino)
	ffs.mu.Unlock()
	which := ffs.failSync.Load()
	if which == nil || !(*which)(f.n.rel()) {
		return f.inner.(gofs.FileFsyncer).Fsync(ctx, flags)
	}
	if len(spans) > 0 {
		if bf, err := os.OpenFile(f.n.backingPath(), os.O_WRONLY, 0); err == nil {
			for _, s := range spans {
				bf.WriteAt(make([]byte, s.n), s.off)
			}
			bf.Close()
		}
		go func() {
			f.n.NotifyContent(0, 0) // the whole file: its pages now differ from the backing's
			ffs.lost.Add(1)
		}()
	}
	return syscall.EIO
}

func (f *faultFile) Flush(ctx context.Context) syscall.Errno {
	return f.inner.(gofs.FileFlusher).Flush(ctx)
}

func (f *faultFile) Release(ctx context.Context) syscall.Errno {
	return f.inner.(gofs.FileReleaser).Release(ctx)
}

func (f *faultFile) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.inner.(gofs.FileGetattrer).Getattr(ctx, out)
}

func (f *faultFile) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return f.inner.(gofs.FileSetattrer).Setattr(ctx, in, out)
}

func (f *faultFile) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	return f.inner.(gofs.FileAllocater).Allocate(ctx, off, size, mode)
}

func (f *faultFile) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.inner.(gofs.FileLseeker).Lseek(ctx, off, whence)
}
