package control

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"
)

// A session of channel 1, version 2, runs over ioctls on a session entry
// opened read-only (see the package documentation): the mount's
// superblock is read-only, so nothing is written to it.
//
// Both ioctls carry one Chunk: a little-endian uint32 count of the bytes
// it holds, 4 reserved bytes (zero), then up to ChunkData bytes. Its size
// is fixed (the kernel copies as many bytes as the command's size field
// says), ChunkSize, the largest a size field holds rounded down to 8.
const (
	ChunkSize   = 16376
	chunkHeader = 8
	ChunkData   = ChunkSize - chunkHeader

	ioctlType = 'D'
	// IoctlSend gives the daemon the next bytes of the session's request
	// (the request line, then its payload). Its result is the count
	// taken; it fails with EFBIG when the request grows past the caller's
	// bound (the answer then says why), EBUSY when the request was
	// already whole, EINVAL on a malformed chunk.
	IoctlSend uint32 = iocWrite<<30 | ChunkSize<<16 | ioctlType<<8 | 1
	// IoctlRecv takes the next bytes of the answer (event lines), waiting
	// until there are some. Its result is their count, 0 once the answer
	// was read to its end.
	IoctlRecv uint32 = iocRead<<30 | ChunkSize<<16 | ioctlType<<8 | 2

	// The direction bits of an ioctl command, as Linux encodes them on
	// x86 and arm (asm-generic/ioctl.h).
	iocWrite = 1
	iocRead  = 2
)

// ErrChunk is a Chunk that is not ChunkSize bytes, or counts more bytes
// than it can hold, or sets reserved bytes.
var ErrChunk = errors.New("malformed control chunk")

// DecodeChunk returns the bytes a Chunk carries.
func DecodeChunk(b []byte) ([]byte, error) {
	if len(b) != ChunkSize || binary.LittleEndian.Uint32(b[4:]) != 0 {
		return nil, ErrChunk
	}
	n := binary.LittleEndian.Uint32(b)
	if n > ChunkData {
		return nil, ErrChunk
	}
	return b[chunkHeader : chunkHeader+n], nil
}

// PutChunk fills b (ChunkSize bytes) with up to ChunkData bytes of data
// and returns how many it took.
func PutChunk(b, data []byte) int {
	clear(b[4:chunkHeader])
	n := copy(b[chunkHeader:], data)
	binary.LittleEndian.PutUint32(b, uint32(n))
	return n
}

// ChunkPayload is where an answer's bytes go in a Chunk the daemon
// fills; it returns that space.
func ChunkPayload(b []byte) []byte { return b[chunkHeader:ChunkSize] }

// SealChunk sets the count of a Chunk whose payload the daemon filled
// with n bytes, and clears the rest: the whole chunk goes back to the
// caller, and its buffer may hold anything before.
func SealChunk(b []byte, n int) {
	binary.LittleEndian.PutUint32(b, uint32(n))
	clear(b[4:chunkHeader])
	clear(b[chunkHeader+n:])
}

// OpenSession starts a control session on the mount at root: a version 2
// session where the daemon speaks it, else (an older daemon, which has no
// session entries to look up) a version 1 session, created. root must be
// a mount's root: nothing is created anywhere else.
func OpenSession(root string) (io.ReadWriteCloser, error) {
	if _, err := os.Stat(filepath.Join(root, EntryName)); err != nil {
		return nil, fmt.Errorf("%s is not the root of a dsmount mount: %w", root, err)
	}
	name := filepath.Join(root, fmt.Sprintf("%s.%d-%x", EntryName, os.Getpid(), rand.Uint64()))
	f, err := os.OpenFile(name, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open a control session on %s: %w", root, err)
		}
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open a control session on %s: %w", root, err)
	}
	return &ioctlSession{f: f, buf: make([]byte, ChunkSize)}, nil
}

// ioctlSession is a version 2 session as an io.ReadWriteCloser. It is
// used by one goroutine at a time, but may be closed from another.
type ioctlSession struct {
	f    *os.File
	buf  []byte
	left []byte // answer bytes received and not read yet
	eof  bool
}

func (s *ioctlSession) Write(p []byte) (int, error) {
	sent := 0
	for sent < len(p) {
		n := PutChunk(s.buf, p[sent:])
		got, err := s.ioctl(IoctlSend)
		if err != nil {
			return sent, fmt.Errorf("send to the control session: %w", err)
		}
		if got != n {
			return sent + min(got, n), fmt.Errorf("send to the control session: the daemon took %d of %d bytes", got, n)
		}
		sent += n
	}
	return sent, nil
}

func (s *ioctlSession) Read(p []byte) (int, error) {
	for len(s.left) == 0 {
		if s.eof {
			return 0, io.EOF
		}
		n, err := s.ioctl(IoctlRecv)
		if err != nil {
			return 0, fmt.Errorf("read the control session: %w", err)
		}
		if n < 0 || n > ChunkData {
			return 0, fmt.Errorf("read the control session: the daemon answered %d bytes, more than a chunk holds", n)
		}
		if n == 0 {
			s.eof = true
			continue
		}
		s.left = s.buf[chunkHeader : chunkHeader+n]
	}
	n := copy(p, s.left)
	s.left = s.left[n:]
	return n, nil
}

func (s *ioctlSession) Close() error { return s.f.Close() }

// ioctl issues cmd with s.buf as its chunk, retrying when a signal
// interrupts it, and returns the daemon's result.
func (s *ioctlSession) ioctl(cmd uint32) (int, error) {
	rc, err := s.f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var r uintptr
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		for {
			r, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, uintptr(cmd), uintptr(unsafe.Pointer(&s.buf[0])))
			if errno != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, errno
	}
	return int(int32(r)), nil
}
