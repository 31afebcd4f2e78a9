package ranges

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/test/testenv"
)

// mnt is one dsmount mount of the token file's prefix (or the LMDB's), on
// a fresh cache dir.
type mnt struct {
	m        *testenv.Mount
	dir, mp  string
	file     string // the token file (or data.mdb) through the mount
	fastPath string // the mount's fast path (dsmount stats)
}

// mount mounts s3://bucket/prefix through the proxy on a fresh cache dir
// under the work directory's name; cacheSize "" leaves the daemon's
// default.
func (e *env) mount(name, cacheSize string) *mnt { return e.mountOf(name, prefix, fileRel, cacheSize) }

// mountOf is mount of s3://bucket/pfx, whose file rel is the mount's file.
func (e *env) mountOf(name, pfx, rel, cacheSize string) *mnt {
	c := e.cfg
	dir := filepath.Join(e.Work, name)
	mp, cache := filepath.Join(dir, "mnt"), filepath.Join(dir, "cache")
	for _, d := range []string{mp, cache} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			e.T.Fatalf("%v", err)
		}
	}
	args := []string{"--cache-dir", cache, "--s3-endpoint", e.endpoint, "--s3-path-style"}
	if cacheSize != "" {
		args = append(args, "--cache-size", cacheSize)
	}
	if c.chunkSize != "" {
		args = append(args, "--chunk-size", c.chunkSize)
	}
	args = append(args, c.mountArgs...)
	t0 := time.Now()
	m := testenv.StartMount(e.T, testenv.MountConfig{Bin: e.Bin, Source: "s3://" + bucket + "/" + pfx, Mountpoint: mp,
		Env: e.Store.MinIO.Env(c.daemonEnv...), Args: args})
	mt := &mnt{m: m, dir: dir, mp: mp, file: filepath.Join(mp, filepath.FromSlash(rel))}
	st := mt.stats(e)
	mt.fastPath = st.Mount.FastPath
	cli.Logf("%s: mounted in %v, cache capacity %d bytes, chunk size %d, fast path %s", name, cli.Since(t0), st.Cache.Capacity, st.Cache.ChunkSize, mt.fastPath)
	return mt
}

func (m *mnt) stats(e *env) control.StatsReport {
	st, err := testenv.StatsErr(e.Bin, m.mp)
	if err != nil {
		e.T.Fatalf("%v", err)
	}
	return st
}

// daemonSnap is a mount's counters at one moment.
type daemonSnap struct {
	cpu                  float64 // the daemon's utime+stime, seconds
	gets, fetched, reads int64   // GETs sent, bytes fetched from the store, FUSE READs served
	// The declared jobs' counts, all jobs together (dsmount stats).
	jobReads, prefetched, prefetchHits, pushed, stalls, evictedAhead int64
}

func (m *mnt) snap(e *env) daemonSnap {
	st := m.stats(e)
	d := daemonSnap{cpu: testenv.ProcCPU(m.m.Pid()), gets: st.Mount.Backend.Gets, fetched: st.Cache.BytesFetched, reads: st.Mount.Reads}
	for i, j := range st.Mount.Jobs {
		if i == 0 && os.Getenv("DSMOUNT_BENCH_DEBUG") != "" {
			cli.Logf("job %+v", j)
		}
		d.jobReads += j.TotalReads
		d.prefetched += j.Prefetched
		d.prefetchHits += j.PrefetchHits
		d.pushed += j.Pushed
		d.stalls += j.Stalls
		d.evictedAhead += j.PrefetchEvicted
	}
	return d
}

// stop unmounts and leaves the cache dir in place (out of the page
// cache) until the program ends; it fails on the daemon's problem lines.
func (m *mnt) stop(e *env) {
	logs := m.m.ProblemLogs()
	m.m.Stop()
	if err := testenv.SettleKeeping(m.dir); err != nil {
		e.T.Fatalf("settle %s: %v", m.dir, err)
	}
	for i, l := range logs {
		if i == 20 {
			cli.Logf("  ... %d more", len(logs)-i)
			break
		}
		cli.Logf("daemon %s: %s", filepath.Base(m.dir), l)
	}
}

// warm fills the mount's cache with the whole file (`dsmount warm`,
// untimed) and fails unless all of it is cached.
func (m *mnt) warm(e *env) {
	t0 := time.Now()
	r := testenv.RunCLI(e.Bin, nil, 30*time.Minute, "warm", m.mp, "--json")
	if r.ExitCode != 0 {
		e.T.Fatalf("dsmount warm: exit %d\nstdout: %s\nstderr: %s", r.ExitCode, r.Stdout, r.Stderr)
	}
	var rep testenv.WarmReport
	if err := testenv.DecodeJSONObject(r.Stdout, &rep); err != nil {
		e.T.Fatalf("dsmount warm --json: %v", err)
	}
	if rep.ChunksNotCached != 0 || rep.CacheFull || rep.Interrupted {
		e.T.Fatalf("dsmount warm left part of the file uncached: %+v", rep)
	}
	cli.Logf("dsmount warm (untimed): %d chunks fetched, %d already cached, in %v", rep.ChunksFetched, rep.ChunksAlreadyCached, cli.Since(t0))
}

// readWhole reads path from end to end (untimed), so its pages are in the
// page cache, charged to this program's cgroup.
func readWhole(e *env, path string) {
	t0 := time.Now()
	n, _, _, err := testenv.DD(path)
	if err != nil || n != e.cfg.fileSize {
		e.T.Fatalf("reading %s: %d bytes, %v", path, n, err)
	}
	cli.Logf("read %s whole into the page cache (untimed) in %v", path, cli.Since(t0))
}

// dropCaches drops the whole page cache (drop_caches 3).
func dropCaches(e *env) {
	if err := testenv.DropCaches(); err != nil {
		e.T.Fatalf("%v", err)
	}
}

// String names the mount in the report.
func (m *mnt) String() string {
	return fmt.Sprintf("%s (fast path %s)", filepath.Base(m.dir), m.fastPath)
}
