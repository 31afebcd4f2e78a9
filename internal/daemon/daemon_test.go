package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/memory"
	"github.com/dsmount/dsmount/cache"
	dsfs "github.com/dsmount/dsmount/fs"
	"github.com/dsmount/dsmount/internal/control"
)

// These tests run the daemon whole (cache, registry, socket, joining,
// settings, shutdown) with an in-memory store and mounts that are served
// by a stand-in instead of FUSE: what FUSE adds is tested in package fs
// and under test/.

// standIn serves a mount without FUSE. gone closes when the mount is
// taken away (Unmount, or a test playing the kernel); Wait returns once
// ended is closed too, which a test may hold back to play a server still
// ending after the kernel let go.
type standIn struct {
	dir        string
	gone       chan struct{}
	ended      chan struct{}
	goneOnce   sync.Once
	endedOnce  sync.Once
	holdEnding bool
}

func (s *standIn) Mountpoint() string { return s.dir }
func (s *standIn) Attached() bool {
	select {
	case <-s.gone:
		return false
	default:
		return true
	}
}
func (s *standIn) Wait() { <-s.gone; <-s.ended }
func (s *standIn) Unmount() error {
	s.takeAway()
	s.end()
	return nil
}
func (s *standIn) takeAway() { s.goneOnce.Do(func() { close(s.gone) }) }
func (s *standIn) end()      { s.endedOnce.Do(func() { close(s.ended) }) }

// rig is a daemon over an in-memory store and its stand-in mounts.
type rig struct {
	t     *testing.T
	dir   string // the cache dir
	store *memory.Backend
	d     *Daemon

	mu      sync.Mutex
	served  map[string]*standIn
	opened  int
	openErr error
}

func newRig(t *testing.T, mod func(*Config)) *rig {
	t.Helper()
	r := &rig{t: t, dir: filepath.Join(t.TempDir(), "cache"), store: memory.New(), served: map[string]*standIn{}}
	for _, k := range []string{"a.bin", "d/b.bin", "d/c.bin"} {
		r.store.Put(k, []byte("bytes of "+k))
	}
	cfg := r.config()
	if mod != nil {
		mod(&cfg)
	}
	d, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	r.d = d
	t.Cleanup(d.Close)
	return r
}

func (r *rig) config() Config {
	return Config{
		Settings: Settings{Dir: r.dir, Capacity: 64 << 20, ChunkSize: 1 << 20, Policy: PolicyOrder,
			JobTimeout: time.Minute, PrefetchParallel: 4, PrefetchLead: time.Second},
		Logger: slog.New(slog.DiscardHandler),
		OpenBackend: func(ctx context.Context, req control.MountRequest, log *slog.Logger) (backend.Backend, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.openErr != nil {
				return nil, r.openErr
			}
			r.opened++
			return r.store, nil
		},
		Serve: func(m *dsfs.Mount, mountpoint string, log *slog.Logger) (Served, error) {
			s := &standIn{dir: mountpoint, gone: make(chan struct{}), ended: make(chan struct{})}
			r.mu.Lock()
			r.served[mountpoint] = s
			r.mu.Unlock()
			return s, nil
		},
	}
}

func (r *rig) servedAt(mp string) *standIn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.served[mp]
}

func (r *rig) mountpoint(name string) string { return filepath.Join(r.t.TempDir(), name) }

func (r *rig) join(req control.MountRequest) (control.MountReply, error) {
	r.t.Helper()
	if req.Source == "" {
		req.Source = "/data"
	}
	reply, _, ok, err := Join(r.dir, req)
	if !ok {
		r.t.Fatalf("Join %s: no daemon answered", req.Mountpoint)
	}
	return reply, err
}

func (r *rig) mounted() []string {
	var mps []string
	for _, s := range r.d.mountStats() {
		mps = append(mps, s.Mountpoint)
	}
	return mps
}

// TestJoin: mounts join the running daemon over its socket and share its
// cache; a mountpoint it serves is refused a second time.
func TestJoin(t *testing.T) {
	r := newRig(t, nil)
	mp1, mp2 := r.mountpoint("one"), r.mountpoint("two")
	reply, err := r.join(control.MountRequest{Mountpoint: mp1})
	if err != nil {
		t.Fatal(err)
	}
	if reply.Files != 3 || reply.Dirs != 1 || reply.Pid != os.Getpid() {
		t.Fatalf("reply %+v, want 3 files, 1 dir, pid %d", reply, os.Getpid())
	}
	if _, err := r.join(control.MountRequest{Mountpoint: mp2 + "/./"}); err != nil {
		t.Fatal(err)
	}
	if got := r.mounted(); len(got) != 2 {
		t.Fatalf("mounts %q, want 2", got)
	}
	if r.servedAt(mp2) == nil {
		t.Fatalf("%s was not served at its clean path", mp2)
	}
	if _, err := r.join(control.MountRequest{Mountpoint: mp1}); err == nil || !strings.Contains(err.Error(), "already mounted by this daemon") {
		t.Fatalf("second mount of %s: %v", mp1, err)
	}
	if r.opened != 2 {
		t.Fatalf("%d backends opened, want 2 (the refused request opens none)", r.opened)
	}
}

// TestSecondDaemonRefused: a cache dir has one daemon; a second start is
// refused with cache.ErrInUse (the CLI then joins), and the first keeps
// serving.
func TestSecondDaemonRefused(t *testing.T) {
	r := newRig(t, nil)
	if d, err := Start(r.config()); !errors.Is(err, cache.ErrInUse) {
		if d != nil {
			d.Close()
		}
		t.Fatalf("second Start: %v, want cache.ErrInUse", err)
	}
	if _, err := r.join(control.MountRequest{Mountpoint: r.mountpoint("m")}); err != nil {
		t.Fatalf("the first daemon after a refused second: %v", err)
	}
}

// TestSettingsChecked: a joining mount that names other cache settings is
// refused with the setting to drop, and mounts nothing; the same settings,
// or none, join.
func TestSettingsChecked(t *testing.T) {
	r := newRig(t, nil)
	for _, c := range []struct {
		req  control.MountRequest
		want string
	}{
		{control.MountRequest{CacheSize: 1 << 30}, "--cache-size"},
		{control.MountRequest{ChunkSize: 4 << 20}, "--chunk-size"},
		{control.MountRequest{Policy: "lru"}, "--cache-policy"},
	} {
		c.req.Mountpoint = r.mountpoint("refused")
		if _, err := r.join(c.req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want a refusal naming %s", c.req, err, c.want)
		}
	}
	if got := r.mounted(); len(got) != 0 || r.opened != 0 {
		t.Fatalf("refused requests left mounts %q, %d backends opened", got, r.opened)
	}
	same := control.MountRequest{Mountpoint: r.mountpoint("same"), CacheSize: 64 << 20, ChunkSize: 1 << 20, Policy: PolicyOrder}
	if _, err := r.join(same); err != nil {
		t.Fatalf("the daemon's own settings: %v", err)
	}
}

// TestMalformedRequests: whatever a client writes on the socket, it reads
// one line of refusal, and the daemon goes on serving.
func TestMalformedRequests(t *testing.T) {
	r := newRig(t, nil)
	for _, line := range []string{
		"not json", `{"source":"/data","mountpoint":"relative"}`, `{"source":"data","mountpoint":"/m"}`,
		`{"source":"/data","mountpoint":"/m","fast_path":"warp"}`, `{"version":4,"source":"/data","mountpoint":"/m"}`,
		`{"source":"/data","mountpoint":"/m","cache_size":-1}`,
	} {
		conn, err := dialSocket(filepath.Join(r.dir, control.SocketName))
		if err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte(line + "\n"))
		var reply control.MountReply
		err = json.NewDecoder(conn).Decode(&reply)
		conn.Close()
		if err != nil || reply.Error == "" || strings.Contains(reply.Error, "\n") {
			t.Errorf("%s: reply %+v, %v: want a one-line error", line, reply, err)
		}
	}
	if _, err := r.join(control.MountRequest{Mountpoint: r.mountpoint("m")}); err != nil {
		t.Fatalf("after malformed requests: %v", err)
	}
}

// TestSourceFails: a source that can't be opened is refused, and its
// mountpoint is free for the next request.
func TestSourceFails(t *testing.T) {
	r := newRig(t, nil)
	mp := r.mountpoint("m")
	r.openErr = errors.New("store unreachable")
	if _, err := r.join(control.MountRequest{Mountpoint: mp}); err == nil || !strings.Contains(err.Error(), "store unreachable") {
		t.Fatalf("join with a failing store: %v", err)
	}
	r.mu.Lock()
	r.openErr = nil
	r.mu.Unlock()
	if _, err := r.join(control.MountRequest{Mountpoint: mp}); err != nil {
		t.Fatalf("the same mountpoint after a failed open: %v", err)
	}
}

// TestClose: Close unmounts every mount, removes the socket, refuses new
// mounts and releases the cache dir for the next daemon.
func TestClose(t *testing.T) {
	r := newRig(t, nil)
	mps := []string{r.mountpoint("one"), r.mountpoint("two")}
	for _, mp := range mps {
		if _, err := r.join(control.MountRequest{Mountpoint: mp}); err != nil {
			t.Fatal(err)
		}
	}
	r.d.Close()
	for _, mp := range mps {
		select {
		case <-r.servedAt(mp).gone:
		default:
			t.Errorf("%s still mounted after Close", mp)
		}
	}
	if _, err := os.Stat(filepath.Join(r.dir, control.SocketName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after Close: %v", err)
	}
	if _, _, ok, _ := Join(r.dir, control.MountRequest{Source: "/data", Mountpoint: r.mountpoint("late")}); ok {
		t.Error("a closed daemon answered a join")
	}
	if _, err := r.d.AddMount(context.Background(), control.MountRequest{Source: "/data", Mountpoint: r.mountpoint("late")}); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("AddMount after Close: %v", err)
	}
	r.d.Close() // again: nothing happens
	next, err := Start(r.config())
	if err != nil {
		t.Fatalf("a daemon after Close: %v", err)
	}
	next.Close()
}

// TestExitWhenEmpty: a daemon started by `mount` ends when its last mount
// is unmounted from outside.
func TestExitWhenEmpty(t *testing.T) {
	r := newRig(t, func(c *Config) { c.ExitWhenEmpty = true })
	mp := r.mountpoint("m")
	if _, err := r.join(control.MountRequest{Mountpoint: mp}); err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{})
	go func() { r.d.Run(context.Background()); close(ran) }()
	r.servedAt(mp).Unmount() // as `umount` would
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the last mount went")
	}
	if _, _, ok, _ := Join(r.dir, control.MountRequest{Source: "/data", Mountpoint: mp}); ok {
		t.Error("the daemon answered after exiting")
	}
}

// TestRemountWhileEnding: a request for a mountpoint whose mount the
// kernel has let go but whose server is still ending waits for it to end
// and then mounts, instead of being refused as already mounted.
func TestRemountWhileEnding(t *testing.T) {
	r := newRig(t, nil)
	mp := r.mountpoint("m")
	if _, err := r.join(control.MountRequest{Mountpoint: mp}); err != nil {
		t.Fatal(err)
	}
	first := r.servedAt(mp)
	first.takeAway() // the kernel let go; the server has not ended
	joined := make(chan error, 1)
	go func() {
		_, _, _, err := Join(r.dir, control.MountRequest{Source: "/data", Mountpoint: mp})
		joined <- err
	}()
	select {
	case err := <-joined:
		t.Fatalf("the request did not wait for the old mount to end: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	first.end()
	if err := <-joined; err != nil {
		t.Fatalf("remount after the old mount ended: %v", err)
	}
	if r.servedAt(mp) == first {
		t.Fatal("the old mount was kept")
	}
}

// TestStatsPrivacy: a privileged caller's stats list every mount; another
// user's list only the mount asked through.
func TestStatsPrivacy(t *testing.T) {
	r := newRig(t, nil)
	mps := []string{r.mountpoint("one"), r.mountpoint("two")}
	var first *dsfs.Mount
	for i, mp := range mps {
		m, err := r.d.AddMount(context.Background(), control.MountRequest{Source: "/data", Mountpoint: mp})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = m
		}
	}
	all := r.d.stats(first, dsfs.Caller{UID: 0, Privileged: true}).(control.StatsReport)
	mine := r.d.stats(first, dsfs.Caller{UID: 1234}).(control.StatsReport)
	if len(all.Mounts) != 2 || all.Mounts[0].Mountpoint > all.Mounts[1].Mountpoint {
		t.Errorf("privileged stats: %d mounts %v, want both in order", len(all.Mounts), all.Mounts)
	}
	if len(mine.Mounts) != 1 {
		t.Errorf("unprivileged stats: %d mounts, want the one asked through", len(mine.Mounts))
	}
	if all.Cache.Dir != r.dir || all.Cache.ChunkSize != 1<<20 || all.Cache.Policy != PolicyOrder || all.DaemonPid != os.Getpid() {
		t.Errorf("cache stats %+v", all.Cache)
	}
}

// TestEmptyGrace: a daemon started with no mount (for a unit's process to
// join) exits when nobody mounts within its grace, and when its only
// request fails; a mount made in time keeps it.
func TestEmptyGrace(t *testing.T) {
	ran := func(r *rig) <-chan struct{} {
		done := make(chan struct{})
		go func() { r.d.Run(context.Background()); close(done) }()
		return done
	}
	waitRan := func(done <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the daemon did not exit", what)
		}
	}
	grace := func(c *Config) { c.ExitWhenEmpty, c.EmptyGrace = true, 50*time.Millisecond }

	waitRan(ran(newRig(t, grace)), "no request at all")

	r := newRig(t, func(c *Config) { grace(c); c.EmptyGrace = time.Hour })
	r.openErr = errors.New("the store is unreachable")
	done := ran(r)
	if _, err := r.join(control.MountRequest{Mountpoint: r.mountpoint("m")}); err == nil {
		t.Fatal("a request whose store fails mounted")
	}
	select {
	case <-r.d.done: // closed by stop, synchronously
		t.Fatal("the daemon stopped at once after a failed request, not after its grace")
	default:
	}
	r.d.mu.Lock()
	r.d.idle.Reset(time.Millisecond) // the grace, shortened: it was re-armed by the failure
	r.d.mu.Unlock()
	waitRan(done, "after a failed request")

	r = newRig(t, func(c *Config) { grace(c); c.EmptyGrace = 200 * time.Millisecond })
	mp := r.mountpoint("m")
	if _, err := r.join(control.MountRequest{Mountpoint: mp}); err != nil {
		t.Fatal(err)
	}
	done = ran(r)
	r.d.checkIdle() // as the timer would, with the mount in place
	select {
	case <-r.d.done:
		t.Fatal("a daemon with a mount stopped at its empty grace")
	default:
	}
	r.servedAt(mp).Unmount()
	waitRan(done, "after its last mount went")
}
