package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"time"

	"github.com/dsmount/dsmount/cache"
	dsfs "github.com/dsmount/dsmount/fs"
	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/readahead"
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
	req, err := decodeMountRequest(line)
	if err == nil {
		err = d.checkSettings(req)
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		var m *dsfs.Mount
		m, err = d.AddMount(ctx, req)
		cancel()
		if err == nil {
			reply.Files, reply.Dirs = m.Files(), m.Dirs()
		}
	}
	if err != nil {
		reply.Error = err.Error()
	}
	// A held mount's end is watched from before the reply: the client
	// may act on the reply (stop the daemon) at once.
	var gone chan struct{}
	if err == nil && req.Hold {
		d.mu.Lock()
		gone = d.gone[req.Mountpoint]
		d.mu.Unlock()
	}
	d.reply(conn, reply)
	if err == nil && req.Hold {
		d.hold(conn, req.Mountpoint, gone)
	}
}

// hold serves a held mount's connection (control's package doc): it
// waits for the mount to go or the client to hang up, which unmounts it,
// and then says why the mount ended.
func (d *Daemon) hold(conn net.Conn, mountpoint string, gone chan struct{}) {
	hungUp := make(chan struct{})
	go func() {
		// Nothing more is to come from the client: a read ends only
		// with its hang-up (or the close below).
		io.Copy(io.Discard, conn)
		close(hungUp)
	}()
	defer func() {
		conn.Close()
		<-hungUp
	}()
	// gone is nil when the mount went between AddMount and the look-up.
	if gone != nil {
		select {
		case <-gone:
		case <-hungUp:
			d.log.Info("the process holding the mount ended; unmounting", "mountpoint", mountpoint)
			d.unmount(mountpoint, gone)
		}
	}
	// Whether the daemon exits is read from when the mount went: a last
	// mount unmounted from outside ends a daemon that exits when empty,
	// after the fact.
	d.mu.Lock()
	why := control.EndedUnmounted
	if (gone == nil && d.closing) || d.takenByClose[gone] {
		why = control.EndedDaemonExiting
	}
	d.mu.Unlock()
	d.replyEnded(conn, why)
}

func (d *Daemon) replyEnded(conn net.Conn, why string) {
	conn.SetWriteDeadline(time.Now().Add(socketWriteTimeout))
	json.NewEncoder(conn).Encode(control.MountEnded{Ended: why})
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
		Cache:     wireCache(d.cache.Stats(), d.settings.Dir, d.settings.Policy, d.settings.ChunkSize),
		PageCache: wirePageCache(d.ra.PageCache())}
}

// wireCache reports s, the cache in dir with its policy and chunk size, as
// the control protocol sends it.
func wireCache(s cache.Stats, dir, policy string, chunkSize int64) control.CacheStats {
	return control.CacheStats{
		Dir: dir, Policy: policy, ChunkSize: chunkSize,
		Hits: s.Hits, Misses: s.Misses, BytesFromCache: s.BytesFromCache, BytesFromBackend: s.BytesFromBackend,
		BytesFetched: s.BytesFetched, ChunksFetched: s.ChunksFetched, RangesFetched: s.RangesFetched, FetchesInFlight: s.FetchesInFlight,
		Used: s.Used, Capacity: s.Capacity, Evictions: s.Evictions, Streamed: s.Streamed,
		VerifyFailures: s.VerifyFailures, SyncFailures: s.SyncFailures, WarmChunks: s.WarmChunks, StagedPushedOut: s.StagedPushedOut, DiskFull: s.DiskFull,
	}
}

// wirePageCache reports what the registry learnt of the page cache as the
// control protocol sends it.
func wirePageCache(p readahead.PageCache) control.PageCache {
	horizon := func(h readahead.Horizon) control.Horizon {
		return control.Horizon{Seconds: h.Seconds, Unbounded: h.Unbounded}
	}
	return control.PageCache{Same: horizon(p.Same), Earlier: horizon(p.Earlier), Samples: p.Samples, FillAndHold: p.FillAndHold}
}

// mountStats are every mount's figures, each under the mountpoint it is
// served at.
func (d *Daemon) mountStats() []control.MountStats {
	mms := d.metricMounts()
	all := make([]control.MountStats, len(mms))
	for i, mm := range mms {
		all[i] = mm.stats.Wire()
	}
	return all
}
