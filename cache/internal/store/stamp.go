package store

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Stamp tells one state of one cache file from any other: a file
// deleted and created anew is another inode (or, where inode numbers are
// reused at once, has another birth and change time), and every write,
// truncation or attribute change moves the change time, which no program
// can set back.
type Stamp struct {
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

func (st Stamp) Racy() bool {
	ct := time.Unix(st.ctime.Sec, int64(st.ctime.Nsec))
	return time.Since(ct) < racyWindow
}

func StampPath(path string) (Stamp, error) {
	var sx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, stampMask, &sx); err != nil {
		return Stamp{}, err
	}
	return stampOf(&sx)
}

func StampFile(f *os.File) (Stamp, error) {
	var sx unix.Statx_t
	err := withFd(f, func(fd int) error { return unix.Statx(fd, "", unix.AT_EMPTY_PATH, stampMask, &sx) })
	if err != nil {
		return Stamp{}, err
	}
	return stampOf(&sx)
}

func stampOf(sx *unix.Statx_t) (Stamp, error) {
	if sx.Mode&unix.S_IFMT != unix.S_IFREG {
		return Stamp{}, errors.New("cache: not a regular file")
	}
	st := Stamp{dev: unix.Mkdev(sx.Dev_major, sx.Dev_minor), ino: sx.Ino, size: int64(sx.Size), ctime: sx.Ctime, mtime: sx.Mtime}
	if sx.Mask&unix.STATX_BTIME != 0 {
		st.btime = sx.Btime
	}
	return st, nil
}
