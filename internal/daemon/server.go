package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sort"
	"time"

	dsfs "github.com/dsmount/dsmount/fs"
	"github.com/dsmount/dsmount/internal/control"
)

// serveSocket accepts mount requests until the listener closes; each
// connection has a goroutine of its own, owned by d.wg.
func (d *Daemon) serveSocket() {
	defer d.wg.Done()
	for {
		conn, err := d.ln.Accept()
		if err != nil {
			return // closed
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			defer conn.Close()
			d.handleConn(conn)
		}()
	}
}

func (d *Daemon) handleConn(conn net.Conn) {
	reply := control.MountReply{Pid: os.Getpid()}
	peerErr := checkPeer(conn)
	// Read even from a peer that is refused, so that it reads the refusal
	// rather than a broken pipe.
	line, err := readRequestLine(conn)
	if err != nil {
		// Nobody to answer: it said nothing in time, or hung up.
		d.log.Debug("daemon socket: no request", "err", err)
		return
	}
	if peerErr != nil {
		d.log.Warn("daemon socket: request refused", "err", peerErr)
		reply.Error = peerErr.Error()
		d.reply(conn, reply)
		return
	}
	if req, err := decodeMountRequest(line); err != nil {
		reply.Error = err.Error()
	} else if err := d.checkSettings(req); err != nil {
		reply.Error = err.Error()
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		m, err := d.AddMount(ctx, req)
		cancel()
		if err != nil {
			reply.Error = err.Error()
		} else {
			reply.Files, reply.Dirs = m.Files(), m.Dirs()
		}
	}
	d.reply(conn, reply)
}

// decodeMountRequest is control.DecodeMountRequest, with the fast path's
// name checked too.
func decodeMountRequest(line []byte) (control.MountRequest, error) {
	r, err := control.DecodeMountRequest(line)
	if err != nil {
		return r, err
	}
	if r.FastPath != "" {
		if _, err := dsfs.ParseFastPath(r.FastPath); err != nil {
			return control.MountRequest{}, fmt.Errorf("malformed request: %w", err)
		}
	}
	return r, nil
}

func (d *Daemon) reply(conn net.Conn, reply control.MountReply) {
	conn.SetWriteDeadline(time.Now().Add(socketWriteTimeout))
	json.NewEncoder(conn).Encode(reply)
}

// checkSettings refuses a joining mount that asked for other cache settings:
// one daemon, one cache, one set of settings.
func (d *Daemon) checkSettings(r control.MountRequest) error {
	if r.CacheSize != 0 && r.CacheSize != d.cache.Capacity() {
		return fmt.Errorf("the dsmount daemon (pid %d) serving %s has --cache-size %d; drop --cache-size or use another --cache-dir", os.Getpid(), d.settings.Dir, d.cache.Capacity())
	}
	if r.ChunkSize != 0 && r.ChunkSize != d.cache.ChunkSize() {
		return fmt.Errorf("the dsmount daemon (pid %d) serving %s has --chunk-size %d; drop --chunk-size or use another --cache-dir", os.Getpid(), d.settings.Dir, d.cache.ChunkSize())
	}
	if r.Policy != "" && r.Policy != d.settings.Policy {
		return fmt.Errorf("the dsmount daemon (pid %d) serving %s has --cache-policy %s; drop --cache-policy or use another --cache-dir", os.Getpid(), d.settings.Dir, d.settings.Policy)
	}
	return nil
}

// stats is the control entry's "stats" answer: the asking mount, every
// mount of the daemon, and the cache. A caller who is not privileged (a
// user other than the daemon's or root, on a mount with --allow-other)
// sees the mount it asks through alone, with its own jobs alone.
func (d *Daemon) stats(asking *dsfs.Mount, c dsfs.Caller) any {
	mine := asking.StatsFor(c)
	all := []control.MountStats{mine}
	if c.Privileged {
		all = d.mountStats()
		sort.Slice(all, func(i, j int) bool { return all[i].Mountpoint < all[j].Mountpoint })
	}
	return control.StatsReport{DaemonPid: os.Getpid(), Mount: mine, Mounts: all,
		Cache:     control.NewCacheStats(d.cache.Stats(), d.settings.Dir, d.settings.Policy, d.settings.ChunkSize),
		PageCache: d.ra.PageCache()}
}

// mountStats are every mount's figures, each under the mountpoint it is
// served at.
func (d *Daemon) mountStats() []control.MountStats {
	mms := d.metricMounts()
	all := make([]control.MountStats, len(mms))
	for i, mm := range mms {
		all[i] = mm.stats
	}
	return all
}
