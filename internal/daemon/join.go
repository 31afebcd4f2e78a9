package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dsmount/dsmount/internal/control"
)

// Join asks the daemon of cacheDir, if one runs, to add the mount. ok is
// false when no daemon answers on the socket.
func Join(cacheDir string, req control.MountRequest) (reply control.MountReply, ok bool, err error) {
	conn, err := dialSocket(filepath.Join(cacheDir, control.SocketName))
	if err != nil {
		return reply, false, nil
	}
	defer conn.Close()
	// The request goes only to a daemon of this user or root's: another
	// user's daemon on a dir it owns would be handed the mount and its
	// answer believed.
	uid, err := peerUID(conn)
	if err != nil {
		return reply, true, fmt.Errorf("the dsmount daemon of %s: %w", cacheDir, err)
	}
	if uid != 0 && uid != uint32(os.Geteuid()) {
		return reply, true, fmt.Errorf("the dsmount daemon of %s runs as another user (uid %d): not joining it; use a --cache-dir of your own", cacheDir, uid)
	}
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return reply, true, fmt.Errorf("talking to the dsmount daemon of %s: %w", cacheDir, err)
	}
	if err := json.NewDecoder(conn).Decode(&reply); err != nil {
		return reply, true, fmt.Errorf("talking to the dsmount daemon of %s: %w", cacheDir, err)
	}
	if reply.Error != "" {
		return reply, true, errors.New(reply.Error)
	}
	return reply, true, nil
}

// WaitAndJoin retries Join for a few seconds: a daemon holding the cache
// dir may still be starting (two mounts racing).
func WaitAndJoin(ctx context.Context, cacheDir string, req control.MountRequest) (control.MountReply, bool, error) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if reply, joined, err := Join(cacheDir, req); joined {
			return reply, true, err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return control.MountReply{}, false, nil
}
