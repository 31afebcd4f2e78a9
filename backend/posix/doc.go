// Package posix is the backend for a dataset kept as a directory tree on a
// local or network filesystem (NFS, Lustre, a slow disk) that dsmount fronts
// with its cache.
//
// It owns nothing but the root path: no open files are kept between calls and
// there is no cache here (caching is package cache's job).
//
// # Objects and versions
//
// An object is a regular file under the root, or a symlink to one (the
// target's size and identity are reported). Symlinked directories are not
// descended into, so a link pointing at an ancestor cannot make List loop,
// and other file types (sockets, FIFOs, devices) are skipped. Keys are
// '/'-separated paths relative to the root.
//
// A file's Version is its size, modification time in nanoseconds and inode
// number. Rewriting a file in place changes its size or mtime; replacing it
// by rename changes its inode; either makes the old Version stale. ReadAt
// compares the version of the open file before and after it reads, so a read
// that raced a writer fails with backend.ErrChanged instead of returning a
// mix of old and new bytes. A writer that keeps size and mtime identical
// (for example by resetting mtime by hand) is not detected; that is the
// usual limit of stat-based change detection.
//
// # Concurrency
//
// A Backend is immutable after New and safe for concurrent use; every ReadAt
// opens its own file descriptor and uses pread, so calls never share file
// offsets.
package posix
