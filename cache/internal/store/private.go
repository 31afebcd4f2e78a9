package store

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// The daemon is often root, and it creates, truncates, preallocates and
// deletes files in its cache directory. A cache directory that another user
// owns, or may write to, lets that user plant symlinks or files there (a
// link named dsmount.lock or reserve to /etc/shadow, say) that the daemon
// would then write through. So Open refuses such a directory before
// opening anything in it, and the same of the directories the cache makes
// in it (data/, data/xx/, packs/, index/), which must not be symlinks; and
// the cache's own files in it (lock, reserve, packs, data files) are
// opened with O_NOFOLLOW: a link found there anyway (made by the daemon's
// own user) fails the open instead of being followed.

// ErrNotPrivate is returned by Open for a cache directory that another
// user owns or may write to.
var ErrNotPrivate = errors.New("the cache directory must be owned by the daemon's user and writable by it alone")

// CheckPrivate refuses dir unless it is a directory owned by this
// process's effective user, with no write permission for group or others.
// dir itself may be reached through a symlink (an admin's choice); see
// CheckPrivateSub for what is inside.
func CheckPrivate(dir string) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("cache dir %s: %w", dir, err)
	}
	return checkPrivateStat(dir, &st)
}

// CheckPrivateSub is CheckPrivate for a directory inside the cache dir,
// which must not be a symlink either: a file opened in it with O_NOFOLLOW
// is still reached through it (data/ab -> /etc/cron.d would do).
func CheckPrivateSub(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("cache dir %s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return fmt.Errorf("cache dir %s is a symlink: %w; remove it", dir, ErrNotPrivate)
	}
	return checkPrivateStat(dir, &st)
}

func checkPrivateStat(dir string, st *unix.Stat_t) error {
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("cache dir %s is not a directory", dir)
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid {
		return fmt.Errorf("cache dir %s is owned by uid %d, not by this user (uid %d): %w; pick another --cache-dir", dir, st.Uid, uid, ErrNotPrivate)
	}
	if perm := st.Mode & 0o777; perm&0o022 != 0 {
		return fmt.Errorf("cache dir %s is writable by group or others (mode %04o): %w; run chmod go-w on it or pick another --cache-dir", dir, perm, ErrNotPrivate)
	}
	return nil
}

// LinkErr words the error of an O_NOFOLLOW open that met a symlink.
func LinkErr(err error) error {
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("%w (a symlink in the cache dir: dsmount opens no file there through a link; remove it)", err)
	}
	return err
}
