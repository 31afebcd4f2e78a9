// Package posix is the backend for a dataset kept as a directory tree on a
// local or network filesystem (NFS, Lustre, a slow disk) that dsmount fronts
// with its cache.
//
// It owns the root path and one descriptor of the root directory (O_PATH,
// closed by Close) that names are resolved beneath; no other files are kept
// open between calls, and there is no cache here (caching is package
// cache's job).
//
// # Objects and versions
//
// An object is a regular file under the root, or a symlink to one (the
// target's size and identity are reported). Symlinked directories are not
// descended into, so a link pointing at an ancestor cannot make List loop,
// and other file types (sockets, FIFOs, devices) are skipped. Keys are
// '/'-separated paths relative to the root.
//
// A file's Version is its size, modification time and inode number, and its
// status-change time (ctime), both times in nanoseconds. Rewriting a file in
// place changes its size or mtime; replacing it by rename changes its inode;
// and a rewrite that puts the mtime back (rsync --inplace -t, os.Chtimes)
// still changes the ctime, which no one can set; any of them makes the old
// Version stale. ReadAt compares the version of the open file before and
// after it reads, so a read that raced a writer fails with
// backend.ErrChanged instead of returning a mix of old and new bytes.
//
// The ctime also moves on a change of metadata alone (chmod, chown, a hard
// link made or removed, xattrs), so that too counts as a new version: reads
// of chunks not cached yet then fail until a remount with --refresh relists
// the tree. That is the price of never mixing. For the same reason a
// listing stored by a dsmount whose versions had no ctime fails such reads
// too, until the first --refresh.
//
// # Symlinks leading outside
//
// A symlink must resolve inside the root to be served (relative, through
// "..", or absolute, as long as it lands inside). One that leads outside is
// skipped by List, with a warning where it leads to a file (the first few by
// name, then a count), and ReadAt or Stat through it fails with
// backend.ErrPermission: a dataset directory that others can write to must
// not expose whatever the daemon's user can read. Names are opened with
// openat2(2) and RESOLVE_BENEATH against the root's descriptor, so the
// kernel refuses the escape, even through a link retargeted after the
// listing. Where openat2 is missing (ENOSYS: Linux before 5.6, some seccomp
// filters) the path is resolved and checked in user space instead, which a
// link changed between that check and the open can still defeat.
// Options.FollowExternalSymlinks (the mount flag --follow-external-symlinks)
// follows such links as before.
//
// # Concurrency
//
// A Backend is safe for concurrent use: after New only atomic flags change
// (Close, and finding that the kernel has no openat2), and the root's
// descriptor is used under its os.File's reference count, so Close never
// pulls it from under a call. Every ReadAt opens its own file descriptor and
// uses pread, so calls never share file offsets.
package posix
