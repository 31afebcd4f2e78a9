package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsmount/dsmount/backend"
)

// ErrNotCached is returned by OpenCached for an object not wholly cached.
var ErrNotCached = errors.New("cache: object not wholly cached")

// OpenCached opens obj's cache file read-only if every chunk of it is
// cached, for handing to the kernel (FUSE passthrough). From then on the
// kernel reads the file itself, with no check of its own, so the file is
// checked here: every chunk against its CRC32C, the first time a file is
// handed over in this process and whenever the file is no longer the one
// last checked (fileStamp: another inode, or its size, change time or
// modification time moved: deleted and recreated, replaced, truncated,
// written to). The file opened is the one checked: its stamp is taken
// again from the open descriptor. The file stays readable after an
// eviction unlinks it, and the daemon never writes an object version's
// file with other bytes than that version's.
func (s *Source) OpenCached(obj backend.Object) (*os.File, error) {
	c := s.c
	meta := metaOf(s.id, obj, c.chunkSize)
	o, err := c.existing(meta)
	if err != nil {
		return nil, err
	}
	if o == nil || obj.Size == 0 || meta.packed() {
		// A packed object (one chunk) has no file of its own to hand over;
		// it is served through the page cache.
		return nil, ErrNotCached
	}
	// Under mu: an eviction (which unlinks the file) is not a vanishing.
	o.mu.RLock()
	whole := !o.dead && o.cachedBytes() == meta.Size
	var before fileStamp
	if whole {
		before, err = stampPath(o.path)
	}
	o.mu.RUnlock()
	if !whole {
		return nil, ErrNotCached
	}
	if errors.Is(err, fs.ErrNotExist) {
		c.vanished(o)
		return nil, ErrNotCached
	}
	if err != nil {
		return nil, ErrNotCached
	}
	if last := o.stamp.Load(); last == nil || *last != before {
		for idx := range meta.numChunks() {
			data, ok := c.readVerified(o, idx)
			if !ok {
				return nil, ErrNotCached
			}
			c.bufs.put(data)
		}
	}
	f, err := os.OpenFile(o.path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, ErrNotCached
	}
	opened, err := stampFile(f)
	if err != nil || opened != before {
		// Changed while being checked: not the file that was checked.
		f.Close()
		return nil, ErrNotCached
	}
	o.mu.RLock()
	dead := o.dead
	if !dead && !racy(opened) {
		o.stamp.Store(&opened)
	}
	o.mu.RUnlock()
	if dead {
		f.Close()
		return nil, ErrNotCached
	}
	return f, nil
}

// fileStamp tells one state of one cache file from any other: a file
// deleted and created anew is another inode (or, where inode numbers are
// reused at once, has another birth and change time), and every write,
// truncation or attribute change moves the change time, which no program
// can set back.
type fileStamp struct {
	dev, ino     uint64
	size         int64
	btime, ctime unix.StatxTimestamp
	mtime        unix.StatxTimestamp
}

const stampMask = unix.STATX_INO | unix.STATX_SIZE | unix.STATX_CTIME | unix.STATX_MTIME | unix.STATX_BTIME

// racyWindow: a file changed this recently may change again within the
// same tick of a coarse file clock (kernels before multigrain timestamps,
// 6.13), leaving its change time as it was; its stamp is not kept, so
// the next open checks it again (git's "racily clean").
const racyWindow = 100 * time.Millisecond

func racy(st fileStamp) bool {
	ct := time.Unix(st.ctime.Sec, int64(st.ctime.Nsec))
	return time.Since(ct) < racyWindow
}

func stampPath(path string) (fileStamp, error) {
	var sx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, stampMask, &sx); err != nil {
		return fileStamp{}, err
	}
	return stampOf(&sx)
}

func stampFile(f *os.File) (fileStamp, error) {
	var sx unix.Statx_t
	err := withFd(f, func(fd int) error { return unix.Statx(fd, "", unix.AT_EMPTY_PATH, stampMask, &sx) })
	if err != nil {
		return fileStamp{}, err
	}
	return stampOf(&sx)
}

func stampOf(sx *unix.Statx_t) (fileStamp, error) {
	if sx.Mode&unix.S_IFMT != unix.S_IFREG {
		return fileStamp{}, errors.New("cache: not a regular file")
	}
	st := fileStamp{dev: unix.Mkdev(sx.Dev_major, sx.Dev_minor), ino: sx.Ino, size: int64(sx.Size), ctime: sx.Ctime, mtime: sx.Mtime}
	if sx.Mask&unix.STATX_BTIME != 0 {
		st.btime = sx.Btime
	}
	return st, nil
}

// ReadCached fills p with obj's bytes at off from the cache alone, each
// chunk read and checked as a read's would be, and never fetches:
// ErrNotCached if a chunk p touches is not cached (or fails its check,
// which drops it). Where a read would wait on the store, a caller that
// only wants to move cached bytes somewhere (the file system's push into
// the kernel's page cache) stops instead.
func (s *Source) ReadCached(obj backend.Object, p []byte, off int64) (int, error) {
	if off < 0 || off > obj.Size {
		return 0, fmt.Errorf("cache: offset %d outside object of %d bytes", off, obj.Size)
	}
	p = p[:min(int64(len(p)), obj.Size-off)]
	c := s.c
	meta := metaOf(s.id, obj, c.chunkSize)
	o, err := c.existing(meta)
	if err != nil {
		return 0, err
	}
	if o == nil {
		return 0, ErrNotCached
	}
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		idx := int(pos / c.chunkSize)
		inner := pos - int64(idx)*c.chunkSize
		want := int(min(int64(len(p)-n), meta.chunkLen(idx)-inner))
		if !c.readChecked(o, idx, p[n:n+want], inner) {
			return n, ErrNotCached
		}
		n += want
	}
	c.stats.hit(n)
	s.stats.hit(n)
	c.touched(o)
	return n, nil
}
