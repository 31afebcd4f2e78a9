package daemon

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dsmount/dsmount/internal/control"
)

// heldJoin joins mp with Hold and returns the Held and a channel that gets
// what its Wait returns, once ctx ends or the mount goes.
func (r *rig) heldJoin(ctx context.Context, mp string) (*Held, <-chan error) {
	r.t.Helper()
	_, held, ok, err := Join(r.dir, control.MountRequest{Source: "/data", Mountpoint: mp, Hold: true})
	if !ok || err != nil || held == nil {
		r.t.Fatalf("held join of %s: answered %v, %v, held %v", mp, ok, err, held)
	}
	done := make(chan error, 1)
	go func() { done <- held.Wait(ctx) }()
	return held, done
}

func waitFor(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s: Wait did not return within a minute", what)
		return nil
	}
}

// TestHeldJoin: a join with Hold lives as long as its connection. Its
// owner ending (ctx) unmounts it and Wait returns nil once it is gone; an
// unmount from outside ends Wait with nil; the daemon stopping ends it
// with ErrDaemonGone. Without Hold no Held is returned.
func TestHeldJoin(t *testing.T) {
	r := newRig(t, nil)

	if _, held, _, err := Join(r.dir, control.MountRequest{Source: "/data", Mountpoint: r.mountpoint("plain")}); err != nil || held != nil {
		t.Fatalf("a join without Hold: held %v, %v", held, err)
	}

	// The owner ends: the daemon unmounts, then Wait returns nil.
	mp := r.mountpoint("owner-ends")
	ctx, cancel := context.WithCancel(context.Background())
	_, done := r.heldJoin(ctx, mp)
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v while the mount is served", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	if err := waitFor(t, "owner ends", done); err != nil {
		t.Fatalf("Wait after the owner ended: %v, want nil", err)
	}
	if slices.Contains(r.mounted(), mp) || r.servedAt(mp).Attached() {
		t.Fatalf("%s still mounted after its holder ended", mp)
	}

	// Unmounted from outside (umount): Wait returns nil.
	mp = r.mountpoint("umount")
	_, done = r.heldJoin(context.Background(), mp)
	r.servedAt(mp).Unmount()
	if err := waitFor(t, "umount", done); err != nil {
		t.Fatalf("Wait after an unmount from outside: %v, want nil", err)
	}

	// Close on the owner's side without Wait: the daemon unmounts too.
	mp = r.mountpoint("closed")
	held, done := r.heldJoin(context.Background(), mp)
	_ = done
	held.Close()
	select {
	case <-r.servedAt(mp).gone:
	case <-time.After(time.Minute):
		t.Fatalf("%s still served a minute after its holder hung up", mp)
	}

	// The daemon stops: Wait says so.
	mp = r.mountpoint("daemon-stops")
	_, done = r.heldJoin(context.Background(), mp)
	r.d.Close()
	if err := waitFor(t, "daemon stops", done); !errors.Is(err, ErrDaemonGone) {
		t.Fatalf("Wait after the daemon stopped: %v, want ErrDaemonGone", err)
	}
}

// TestHeldLastMountUnmounted: a daemon that exits when empty, whose last
// mount (a held one) is unmounted from outside, tells the holder it was
// unmounted, not that the daemon exits: the daemon's exit follows the
// unmount, and a holder told "exiting" would mount again what its user
// took away.
func TestHeldLastMountUnmounted(t *testing.T) {
	for i := range 20 { // the exit races the holder's answer
		r := newRig(t, func(c *Config) { c.ExitWhenEmpty = true })
		ran := make(chan struct{})
		go func() { r.d.Run(context.Background()); close(ran) }()
		mp := r.mountpoint("last")
		_, done := r.heldJoin(context.Background(), mp)
		r.servedAt(mp).Unmount()
		if err := waitFor(t, "umount of the last mount", done); err != nil {
			t.Fatalf("try %d: Wait after the last mount was unmounted: %v, want nil", i, err)
		}
		<-ran
	}
}
