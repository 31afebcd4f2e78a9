package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// fuseConnections is where the fusectl filesystem shows each FUSE
// connection, by the minor number of its device.
const fuseConnections = "/sys/fs/fuse/connections"

// Abort ends the mount's FUSE connection, as writing to its fusectl
// "abort" file does: every request in flight and every later one on the
// connection fails (ENOTCONN), and the server's loops end. It is how a
// daemon that must exit ends a mount that was lazily detached while a
// file stayed open in it: its holder then gets errors instead of keeping
// the daemon waiting. scratch is a private directory where fusectl is
// mounted for the moment if it is not mounted at its usual place (a
// container); that needs CAP_SYS_ADMIN.
func (m *Mount) Abort(scratch string) error {
	if m.dev == 0 {
		return errors.New("the mount's FUSE connection is unknown")
	}
	name := fmt.Sprint(unix.Minor(m.dev))
	err := writeAbort(filepath.Join(fuseConnections, name))
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	// fusectl is not mounted here: mount it privately for the write.
	dir, err := os.MkdirTemp(scratch, ".fusectl-")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	if err := syscall.Mount("fusectl", dir, "fusectl", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting fusectl to abort the connection: %w", err)
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	return writeAbort(filepath.Join(dir, name))
}

func writeAbort(conn string) error {
	f, err := os.OpenFile(filepath.Join(conn, "abort"), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte("1"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
