package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/dsmount/dsmount/internal/control"
)

// Join asks the daemon of cacheDir, if one runs, to add the mount. ok is
// false when no daemon answers on the socket. With req.Hold the mount is
// bound to the returned Held, which the caller must Wait on or Close;
// otherwise held is nil.
func Join(cacheDir string, req control.MountRequest) (reply control.MountReply, held *Held, ok bool, err error) {
	conn, err := dialSocket(filepath.Join(cacheDir, control.SocketName))
	if err != nil {
		return reply, nil, false, nil
	}
	keep := false
	defer func() {
		if !keep {
			conn.Close()
		}
	}()
	// The request goes only to a daemon of this user or root's: another
	// user's daemon on a dir it owns would be handed the mount and its
	// answer believed.
	uid, err := peerUID(conn)
	if err != nil {
		return reply, nil, true, fmt.Errorf("the dsmount daemon of %s: %w", cacheDir, err)
	}
	if uid != 0 && uid != uint32(os.Geteuid()) {
		return reply, nil, true, fmt.Errorf("the dsmount daemon of %s runs as another user (uid %d): not joining it; use a --cache-dir of your own", cacheDir, uid)
	}
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return reply, nil, true, fmt.Errorf("talking to the dsmount daemon of %s: %w: %w", cacheDir, ErrNoReply, err)
	}
	// One line at a time: on a held connection the MountEnded line
	// follows, and must not be swallowed by a decoder's buffer.
	r := bufio.NewReader(conn)
	if err := readLine(r, &reply); err != nil {
		return reply, nil, true, fmt.Errorf("talking to the dsmount daemon of %s: %w: %w", cacheDir, ErrNoReply, err)
	}
	if reply.Error != "" {
		return reply, nil, true, errors.New(reply.Error)
	}
	if req.Hold {
		keep = true
		held = &Held{conn: conn, r: r, pid: reply.Pid, mountpoint: req.Mountpoint}
	}
	return reply, held, true, nil
}

// ErrNoReply says a daemon took the connection but never answered: it
// died, or was dying as it was dialled (a dead process's listening
// socket can still queue a connection, then resets it). Whether the
// mount was made is not known.
var ErrNoReply = errors.New("no answer")

// WaitAndJoin retries Join for a few seconds: a daemon holding the cache
// dir may still be starting (two mounts racing).
func WaitAndJoin(ctx context.Context, cacheDir string, req control.MountRequest) (control.MountReply, *Held, bool, error) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if reply, held, joined, err := Join(cacheDir, req); joined {
			return reply, held, true, err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return control.MountReply{}, nil, false, nil
}

// Held is a mount joined with MountRequest.Hold: it lives as long as the
// connection to the daemon.
type Held struct {
	conn       net.Conn
	r          *bufio.Reader
	pid        int
	mountpoint string
}

// ErrDaemonGone says a held mount ended because the daemon serving it
// stopped or died, not because it was unmounted.
var ErrDaemonGone = errors.New("the dsmount daemon serving the mount stopped")

// heldUnmountWait bounds how long a held mount's owner waits, after asking
// for the unmount, for the daemon to say it is gone: a busy mount is
// detached lazily and its connection ended within a few seconds.
const heldUnmountWait = 30 * time.Second

// Wait returns once the mount is gone. When ctx ends first it asks the
// daemon to unmount and waits (bounded) for that. It returns nil for an
// unmount, and an error wrapping ErrDaemonGone when the daemon stopped or
// died. The connection is closed on return.
func (h *Held) Wait(ctx context.Context) error {
	defer h.conn.Close()
	ended := make(chan error, 1)
	go func() { ended <- h.readEnded() }()
	select {
	case err := <-ended:
		return err
	case <-ctx.Done():
	}
	if uc, ok := h.conn.(*net.UnixConn); ok {
		uc.CloseWrite()
	}
	t := time.NewTimer(heldUnmountWait)
	defer t.Stop()
	select {
	case err := <-ended:
		return err
	case <-t.C:
		h.conn.Close()
		<-ended
		return fmt.Errorf("the dsmount daemon (pid %d) did not unmount %s within %s", h.pid, h.mountpoint, heldUnmountWait)
	}
}

// Close lets go of the mount without waiting: the daemon unmounts it.
func (h *Held) Close() error { return h.conn.Close() }

func (h *Held) readEnded() error {
	var e control.MountEnded
	if err := readLine(h.r, &e); err != nil {
		return fmt.Errorf("%w: the daemon (pid %d) serving %s ended without a word (killed?): %v", ErrDaemonGone, h.pid, h.mountpoint, err)
	}
	if e.Ended == control.EndedUnmounted {
		return nil
	}
	return fmt.Errorf("%w: the daemon (pid %d) serving %s is exiting (%s) and took its mounts with it", ErrDaemonGone, h.pid, h.mountpoint, e.Ended)
}

// readLine decodes one JSON line of r into v.
func readLine(r *bufio.Reader, v any) error {
	line, err := r.ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return err
	}
	return json.Unmarshal(line, v)
}
