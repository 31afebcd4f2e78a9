package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/internal/daemon"
)

// A systemd service's main process ($NOTIFY_SOCKET: a dsmount@ instance)
// holds its own mount and nothing else. The daemon that serves it lives
// apart, in a scope of its own (see daemonCommand): the one that already
// serves the cache dir, or one this process starts for it. So stopping,
// restarting or killing one instance takes away its mount alone; were
// the instance's process the daemon, every other instance's mount on the
// cache dir would go down with it.

// exitWithLastMountFlag is the hidden flag of `dsmount daemon` that an
// instance starts it with: the daemon exits with its last mount, or after
// bareDaemonGrace when no mount comes (the instance died before joining,
// or its mount failed).
const exitWithLastMountFlag = "exit-with-last-mount"

// bareDaemonGrace is how long a daemon started for an instance waits for
// a mount: long enough for systemd's RestartSec to bring back an
// instance whose first try failed.
const bareDaemonGrace = 30 * time.Second

// Bounds on getting a held mount: how long to keep trying while the cache
// dir is held by a daemon still starting or ending, and how many times a
// lost daemon is replaced within lossWindow before the instance gives up
// to systemd's restart.
const (
	acquireTimeout = 30 * time.Second
	maxLosses      = 5
	lossWindow     = time.Minute
)

// instance is a service's mount request and what it needs to (re)start a
// daemon for it.
type instance struct {
	cmd  *cobra.Command
	plan mountPlan
	req  control.MountRequest // with Hold and the shell's credentials
	log  *slog.Logger
}

// serveInstance holds the instance's mount until ctx ends (SIGTERM: it
// unmounts) or the mount is unmounted from outside. When the daemon
// serving it dies or stops, the mount is made again at once, through a
// new daemon if none is left: the unit stays active, and its readers see
// errors only for the moment between.
func serveInstance(ctx context.Context, in instance) error {
	var losses []time.Time
	for {
		reply, held, err := in.acquire(ctx)
		if err != nil {
			return joinError(in.req, err)
		}
		note := "this process holds the mount: stopping it unmounts"
		if len(losses) > 0 {
			note = "mounted again after its daemon ended; " + note
		}
		in.log.Info("mounted", "mountpoint", in.plan.mountpoint, "source", in.plan.source, "files", reply.Files, "dirs", reply.Dirs,
			"daemon_pid", reply.Pid, "credentials", credentialsSource(in.req), "note", note)
		notify(in.log, fmt.Sprintf("READY=1\nSTATUS=serving %s (through the daemon, pid %d)", in.plan.mountpoint, reply.Pid))
		err = held.Wait(ctx)
		if ctx.Err() != nil || err == nil || !errors.Is(err, daemon.ErrDaemonGone) {
			notify(in.log, "STOPPING=1")
			if err == nil {
				in.log.Info("unmounted", "mountpoint", in.plan.mountpoint)
			}
			return err
		}
		now := time.Now()
		losses = append(losses, now)
		for len(losses) > 0 && now.Sub(losses[0]) > lossWindow {
			losses = losses[1:]
		}
		if len(losses) > maxLosses {
			return fmt.Errorf("%w; it ended %d times within %s, giving up", err, len(losses), lossWindow)
		}
		in.log.Warn("the daemon serving the mount ended; mounting again", "mountpoint", in.plan.mountpoint, "err", err)
		notify(in.log, "STATUS=the daemon serving "+in.plan.mountpoint+" ended; mounting again")
		// A killed daemon leaves a dead mount: detach it.
		if _, detached, err := checkMountpoint(in.plan.mountpoint, false); err != nil {
			return err
		} else if detached {
			in.log.Info("detached the dead mount its daemon left", "mountpoint", in.plan.mountpoint)
		}
	}
}

// acquire joins the cache dir's daemon with the mount, holding it, and
// starts a daemon first if none answers. Two instances starting at once
// both start one: the second finds the cache dir held and joins the
// first's. A daemon's refusal (a bad source) is final.
func (in instance) acquire(ctx context.Context) (reply control.MountReply, held *daemon.Held, err error) {
	err = whileBusy(ctx, func() error {
		for started := false; ; started = true {
			r, h, joined, err := daemon.Join(in.plan.cacheDir, in.req)
			if errors.Is(err, daemon.ErrNoReply) {
				// A daemon dying as it was dialled: another takes its place.
				return fmt.Errorf("%w (%w)", errCacheBusy, err)
			}
			if joined {
				reply, held = r, h
				return err
			}
			if started {
				// It listened, and is gone already (its grace ran out).
				return fmt.Errorf("the daemon started for %s does not answer: %w", in.plan.cacheDir, errCacheBusy)
			}
			if err := startBareDaemon(ctx, in.cmd, in.plan.cacheDir); err != nil {
				return err
			}
		}
	})
	return reply, held, err
}

// whileBusy calls try until it returns anything but errCacheBusy, or for
// acquireTimeout: a daemon still starting answers on its socket in a
// moment, and one still ending lets go of the cache dir.
func whileBusy(ctx context.Context, try func() error) error {
	deadline := time.Now().Add(acquireTimeout)
	wait := 50 * time.Millisecond
	for {
		err := try()
		if !errors.Is(err, errCacheBusy) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s: %w", acquireTimeout, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}
