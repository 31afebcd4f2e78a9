package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The daemon's socket takes mount requests: a root daemon mounts where a
// request says, so whoever can talk to it can have root mount a filesystem
// anywhere. It serves the daemon's own user and root alone:
//   - the socket is bound inside a fresh directory only the daemon's user
//     may enter, made 0600 there, and only then renamed into place, so it
//     is never reachable with looser permissions (binding it in place and
//     chmodding it after left a window);
//   - every connection's peer is checked (SO_PEERCRED) whatever the
//     socket's mode: an admin who loosens it opens no door;
//   - a request must arrive within socketReadTimeout and fit in
//     maxMountRequest bytes, so a client that connects and says nothing, or
//     too much, holds nothing.

const (
	socketReadTimeout  = 10 * time.Second
	socketWriteTimeout = 10 * time.Second
	maxMountRequest    = 1 << 20
)

// listenPrivate binds a unix socket at path, mode 0600 from the moment it
// is reachable there.
func listenPrivate(path string) (net.Listener, error) {
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".") // 0700
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bound := filepath.Join(tmp, "s")
	var ln net.Listener
	err = viaShortPath(bound, func(p string) error {
		ln, err = net.Listen("unix", p)
		return err
	})
	if err != nil {
		return nil, err
	}
	// The listener would unlink the path it was bound at when closed: it
	// must be the final one (see unlinkingListener).
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(bound, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	if err := os.Rename(bound, path); err != nil {
		ln.Close()
		return nil, err
	}
	return &unlinkingListener{Listener: ln, path: path}, nil
}

// dialSocket connects to the unix socket at path.
func dialSocket(path string) (net.Conn, error) {
	var conn net.Conn
	err := viaShortPath(path, func(p string) (err error) {
		conn, err = net.Dial("unix", p)
		return err
	})
	return conn, err
}

// maxSocketPath is the longest path a unix socket address holds (108
// bytes with the terminating NUL on Linux).
const maxSocketPath = 107

// viaShortPath calls fn with path, or, where path is too long for a unix
// socket address (a deep cache dir), with a short path to the same place
// through the directory's descriptor (/proc/self/fd/N/name).
func viaShortPath(path string, fn func(string) error) error {
	if len(path) <= maxSocketPath {
		return fn(path)
	}
	dir, err := os.OpenFile(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer dir.Close()
	return fn(fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path)))
}

// unlinkingListener removes its socket's final path when closed.
type unlinkingListener struct {
	net.Listener
	path string
}

func (l *unlinkingListener) Close() error {
	err := l.Listener.Close()
	os.Remove(l.path)
	return err
}

// errPeer refuses a connection from a user the daemon doesn't serve.
type errPeer struct{ uid, daemon uint32 }

func (e errPeer) Error() string {
	return fmt.Sprintf("refused: the dsmount daemon (pid %d) serves its own user (uid %d) and root only, not uid %d", os.Getpid(), e.daemon, e.uid)
}

// checkPeer returns errPeer unless conn's peer is root or the daemon's user.
func checkPeer(conn net.Conn) error {
	uid, err := peerUID(conn)
	if err != nil {
		return fmt.Errorf("refused: %w", err)
	}
	if self := uint32(os.Geteuid()); uid != 0 && uid != self {
		return errPeer{uid: uid, daemon: self}
	}
	return nil
}

// peerUID is the user of the process at the other end of a unix socket.
func peerUID(conn net.Conn) (uint32, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return 0, errors.New("not a unix socket connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, fmt.Errorf("peer credentials: %w", credErr)
	}
	return cred.Uid, nil
}

// readRequestLine reads one request line from conn, bounded in time and
// size.
func readRequestLine(conn net.Conn) ([]byte, error) {
	conn.SetReadDeadline(time.Now().Add(socketReadTimeout))
	defer conn.SetReadDeadline(time.Time{})
	line, err := bufio.NewReader(io.LimitReader(conn, maxMountRequest)).ReadBytes('\n')
	if err == io.EOF && len(line) >= maxMountRequest {
		return nil, fmt.Errorf("request over %d bytes", maxMountRequest)
	}
	return line, err
}
