package main

import (
	"log/slog"

	"github.com/coreos/go-systemd/v22/daemon"
)

// notify tells systemd (a Type=notify unit: $NOTIFY_SOCKET) how the daemon
// stands: READY=1 once the mount serves reads (or, for `dsmount daemon`,
// once its socket listens), STOPPING=1 when it begins to unmount. Outside
// systemd it does nothing.
func notify(log *slog.Logger, state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		log.Warn("telling systemd the daemon's state", "state", state, "err", err)
	}
}
