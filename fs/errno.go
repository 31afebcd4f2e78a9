package fs

import (
	"context"
	"errors"
	"io"
	"syscall"

	"github.com/dsmount/dsmount/backend"
)

// toErrno maps an error from the cache or backend to the errno the kernel
// returns to the reader. It is the only such mapping in dsmount.
func toErrno(err error) syscall.Errno {
	switch {
	case err == nil, err == io.EOF: // bare EOF: the read reached the end; a wrapped one is a failure
		return 0
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	case errors.Is(err, backend.ErrNotFound):
		return syscall.ENOENT
	case errors.Is(err, backend.ErrPermission):
		return syscall.EACCES
	case errors.Is(err, backend.ErrInvalid):
		return syscall.EINVAL
	case errors.Is(err, backend.ErrChanged), errors.Is(err, backend.ErrThrottled), errors.Is(err, backend.ErrUnavailable):
		// The store failed; its kind says so, whatever errno its cause
		// holds (an S3 read whose connection was reset must not end a
		// reader's read(2) with ECONNRESET).
		return syscall.EIO
	}
	// An errno of the cache's own disk, say. Declared here, past the
	// cases above: errors.As moves it to the heap, an allocation that
	// every read, the ones that succeed included, paid when it was
	// declared at the top.
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	// Deadlines and anything unforeseen: the read failed, and retrying
	// won't obviously help.
	return syscall.EIO
}
