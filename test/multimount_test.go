package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// smallLocalSource writes a small local dataset (a second source for a
// daemon) and returns its directory and paths.
func smallLocalSource(t *testing.T, seed uint64) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	paths := testenv.GenerateDataset(t, dir, testenv.DatasetSpec{Seed: seed, SmallFiles: 120, SmallMax: 64 << 10, FilesPerDir: 40, MaxDepth: 2})
	return dir, paths
}

// TestMultiMount runs one `dsmount daemon` on a cache dir and adds mounts to
// it with `dsmount mount`: three of the same S3 source at three mountpoints
// (each command exits 0 at once, naming the daemon's pid; the third with no
// AWS keys in its own environment, so the daemon's are used) and a local
// directory; a join with wrong keys of its own fails with the store's
// refusal, since a joined mount reads with the joining shell's keys. Three concurrent cold verified readers, one per S3
// mountpoint, make exactly one GET per chunk in all (the mounts share one
// cache and its in-flight fetches). stats and /metrics attribute the reads
// to each mount. A second `dsmount daemon` on the dir fails with "in use";
// a join with a different --chunk-size fails with one line. Unmounting the
// S3 mounts leaves the daemon serving the local one; SIGTERM unmounts it and
// exits 0; a new daemon can then start on the same dir.
func TestMultiMount(t *testing.T) {
	f := warmData(t)
	m := f.m(t)
	cacheDir := t.TempDir()
	ports, err := testenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0])
	daemonArgs := []string{"--cache-dir", cacheDir, "--chunk-size", "1M", "--cache-size", "1G",
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", ports[0])}
	d := testenv.StartDaemon(t, testenv.DaemonConfig{Bin: dsmountBin, Args: daemonArgs, Env: s3Env(m)})

	sock := filepath.Join(cacheDir, "dsmount.sock")
	if st, err := os.Lstat(sock); err != nil {
		t.Errorf("the daemon's socket: %v", err)
	} else if st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want a socket with permissions 0600", sock, st.Mode())
	}

	// A second daemon on the same cache dir.
	r := testenv.RunCLI(dsmountBin, s3Env(m), cliPrompt, "daemon", "--cache-dir", cacheDir)
	if err := oneLineError(r, 2); err != nil || !strings.Contains(r.Stderr, "in use") {
		t.Errorf("a second dsmount daemon on %s: %v; stderr %q, want it to say \"in use\"", cacheDir, err, r.Stderr)
	}
	if d.Exited() {
		t.Fatalf("the first daemon exited after a second one was tried: %v\n%s", d.ExitState(), d.Stderr())
	}

	source := "s3://" + warmBucket + "/" + warmPrefix
	joinArgs := []string{"--cache-dir", cacheDir, "--s3-endpoint", m.Endpoint(), "--s3-path-style"}
	mps := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	for i, mp := range mps {
		env, args := s3Env(m), joinArgs
		switch i {
		case 1:
			args = append(append([]string(nil), joinArgs...), "--chunk-size", "1M") // same as the daemon's: fine
		case 2:
			// No keys of its own: the daemon's are used.
			env = nil
			for _, kv := range s3Env(m) {
				if !strings.HasPrefix(kv, "AWS_ACCESS_KEY_ID=") && !strings.HasPrefix(kv, "AWS_SECRET_ACCESS_KEY=") {
					env = append(env, kv)
				}
			}
		}
		j := testenv.JoinMount(t, dsmountBin, env, source, mp, cliPrompt, args...)
		if j.DaemonPID != d.Pid() {
			t.Errorf("join %d: \"mounted\" names daemon_pid %d, the daemon is %d", i, j.DaemonPID, d.Pid())
		}
		t.Logf("joined %s in %v", mp, j.Result.Duration.Round(time.Millisecond))
	}

	// A join with keys of its own reads with them: wrong ones fail the
	// join with the store's refusal, and nothing is mounted.
	wrongKeys := t.TempDir()
	r = testenv.RunCLI(dsmountBin, s3Env(m, "AWS_ACCESS_KEY_ID=not-the-daemons-key", "AWS_SECRET_ACCESS_KEY=not-the-daemons-secret"), cliPrompt,
		append([]string{"mount", source, wrongKeys}, joinArgs...)...)
	if err := oneLineError(r, -1); err != nil || !strings.Contains(r.Stderr, "InvalidAccessKeyId") {
		t.Errorf("join with wrong keys of its own: %v; stderr %q, want the store's InvalidAccessKeyId", err, r.Stderr)
	}
	if ok, _ := testenv.IsMounted(wrongKeys); ok {
		testenv.LazyUnmount(wrongKeys)
		t.Errorf("a join with wrong keys left %s mounted", wrongKeys)
	}

	// A join asking for another chunk size fails and mounts nothing.
	bad := t.TempDir()
	r = testenv.RunCLI(dsmountBin, s3Env(m), cliPrompt, append([]string{"mount", source, bad, "--chunk-size", "4M"}, joinArgs...)...)
	if err := oneLineError(r, -1); err != nil {
		t.Errorf("join with --chunk-size 4M (daemon has 1M): %v", err)
	}
	if ok, _ := testenv.IsMounted(bad); ok {
		testenv.LazyUnmount(bad)
		t.Errorf("join with a conflicting --chunk-size left %s mounted", bad)
	}
	t.Logf("conflicting join: exit %d: %s", r.ExitCode, strings.TrimSpace(r.Stderr))

	// Three cold readers at once, one per mountpoint.
	g0 := f.gets(t)
	var wg sync.WaitGroup
	errs := make([]error, len(mps))
	for i, mp := range mps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := testenv.CompareTreeErr(f.src, mp, f.paths, 4, int64(10+i))
			if err == nil && res.Files != len(f.paths) {
				err = fmt.Errorf("read %d files, want %d", res.Files, len(f.paths))
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("verified reader on %s: %v", mps[i], err)
		}
	}
	waitNoFetches(t, mps[0])
	g1 := f.gets(t)
	t.Logf("3 concurrent cold passes over 3 mounts of one source: %d GETs for %d chunks", g1-g0, f.chunks)
	if !getsWithin(t, mps[0], g1-g0, f.chunks) {
		t.Errorf("3 concurrent cold passes made %d GETs, want the %d of one pass (one per chunk)", g1-g0, f.chunks)
	}

	s := testenv.Stats(t, dsmountBin, mps[1])
	if s.DaemonPid != d.Pid() || s.Mount.Mountpoint != mps[1] || len(s.Mounts) != 3 {
		t.Errorf("stats via %s: daemon_pid %d (want %d), mount %q, %d mounts (want 3)", mps[1], s.DaemonPid, d.Pid(), s.Mount.Mountpoint, len(s.Mounts))
	}
	if s.Cache.ChunksFetched != f.chunks {
		t.Errorf("stats: cache chunks_fetched %d, want %d", s.Cache.ChunksFetched, f.chunks)
	}
	code, samples, err := testenv.ScrapeMetrics(metricsURL)
	if err != nil || code != 200 {
		t.Errorf("GET %s: %d, %v", metricsURL, code, err)
	}
	for _, mp := range mps {
		ms, ok := testenv.MountByPoint(s, mp)
		if !ok {
			t.Errorf("stats lists no mount %s: %+v", mp, s.Mounts)
			continue
		}
		if !strings.HasPrefix(ms.Source, source) || !onePass(ms.BytesRead, f.total) || ms.ReadErrors != 0 || ms.Hits+ms.Misses == 0 {
			t.Errorf("stats of %s: %+v; want source %s[...], bytes_read %d (one full pass, give or take a re-read page), no read errors", mp, ms, source, f.total)
		}
		if v, n := testenv.PromFind(samples, "dsmount_mount_read_bytes_total", "mount", mp); n != 1 || int64(v) != ms.BytesRead {
			t.Errorf("metrics: dsmount_mount_read_bytes_total{mount=%q} = %v (%d series); stats --json says %d", mp, v, n, ms.BytesRead)
		}
	}

	// A second source in the same daemon.
	local, localPaths := smallLocalSource(t, 77)
	mpLocal := t.TempDir()
	j := testenv.JoinMount(t, dsmountBin, nil, local, mpLocal, cliPrompt, "--cache-dir", cacheDir)
	if j.DaemonPID != d.Pid() {
		t.Errorf("local join: daemon_pid %d, want %d", j.DaemonPID, d.Pid())
	}
	testenv.CompareTree(t, local, mpLocal, localPaths, 4, 1)
	if err := testenv.CompareListings(local, mpLocal); err != nil {
		t.Error(err)
	}
	if g := f.gets(t); g != g1 {
		t.Errorf("reading the local source made %d GETs", g-g1)
	}
	// The S3 mounts still read right (from the cache) beside it.
	testenv.CompareTree(t, f.src, mps[2], f.paths[:200], 4, 2)

	for _, mp := range mps {
		testenv.Unmount(t, dsmountBin, mp)
		if d.Exited() {
			t.Fatalf("the daemon exited (%v) after unmounting %s while it still serves %s\n%s", d.ExitState(), mp, mpLocal, d.Stderr())
		}
	}
	// The daemon drops a mount when its watcher sees the kernel's unmount,
	// which can come a moment after `dsmount unmount` returns.
	err = testenv.WaitFor(10*time.Second, 20*time.Millisecond, "the daemon to drop the S3 mounts", func() (bool, error) {
		s = testenv.Stats(t, dsmountBin, mpLocal)
		return len(s.Mounts) == 1 && s.Mounts[0].Mountpoint == mpLocal, nil
	})
	if err != nil {
		t.Errorf("stats after unmounting the S3 mounts: %+v; want only %s (%v)", s.Mounts, mpLocal, err)
	}
	testenv.CompareTree(t, local, mpLocal, localPaths, 4, 3)

	d.NoErrorLogs()
	d.Stop()
	if ok, _ := testenv.IsMounted(mpLocal); ok {
		t.Errorf("the daemon exited 0 after SIGTERM but left %s mounted", mpLocal)
	}
	// The dir is free again.
	d2 := testenv.StartDaemon(t, testenv.DaemonConfig{Bin: dsmountBin, Args: daemonArgs, Env: s3Env(m)})
	d2.Stop()
}

// TestMultiMountFirstMountIsDaemon: with no daemon on the cache dir, the
// first `dsmount mount` becomes it and a second joins it. Unmounting the
// first mount leaves the daemon serving the second; unmounting the last one
// makes it exit 0. SIGTERM to such a daemon unmounts every mount it serves.
func TestMultiMountFirstMountIsDaemon(t *testing.T) {
	local, paths := smallLocalSource(t, 78)
	cacheDir := t.TempDir()
	mp1, mp2 := t.TempDir(), t.TempDir()
	start := func() *testenv.Mount {
		t.Helper()
		first := testenv.StartMount(t, testenv.MountConfig{Bin: dsmountBin, Source: local, Mountpoint: mp1,
			Args: []string{"--cache-dir", cacheDir}})
		j := testenv.JoinMount(t, dsmountBin, nil, local, mp2, cliPrompt, "--cache-dir", cacheDir)
		if j.DaemonPID != first.Pid() {
			t.Errorf("the join names daemon_pid %d, the first mount's process is %d", j.DaemonPID, first.Pid())
		}
		if first.Exited() {
			t.Fatalf("the first mount's process exited when another mount joined: %v", first.ExitState())
		}
		return first
	}

	first := start()
	testenv.CompareTree(t, local, mp1, paths, 4, 1)
	testenv.CompareTree(t, local, mp2, paths, 4, 2)
	testenv.Unmount(t, dsmountBin, mp1)
	if first.Exited() {
		t.Fatalf("the daemon exited (%v) when its first mount was unmounted, though it still serves %s\n%s", first.ExitState(), mp2, first.Stderr())
	}
	testenv.CompareTree(t, local, mp2, paths, 4, 3)
	testenv.Unmount(t, dsmountBin, mp2)
	first.WaitExit(30 * time.Second)

	first = start()
	first.Stop() // SIGTERM: exit 0 with mp1 gone
	if ok, _ := testenv.IsMounted(mp2); ok {
		t.Errorf("SIGTERM to the daemon left the joined mount %s mounted", mp2)
	}
}
