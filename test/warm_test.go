package test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// warmTimeout bounds one `dsmount warm` of the warm dataset.
const warmTimeout = 2 * time.Minute

// TestWarm warms a whole mounted tree on a fresh cache and checks, from
// MinIO's own GET counter, that every chunk is fetched exactly once; that
// `warm --check` goes from 0 to 100%; that a verified read pass afterwards
// and a second warm make no GET at all; and the plain (non-JSON) output
// formats. It also checks the hidden control entry: stat works, readdir
// does not show it.
func TestWarm(t *testing.T) {
	f := warmData(t)
	mp, cacheDir := t.TempDir(), t.TempDir()
	d := mountWarm(t, f, f.minio.Endpoint(), warmPrefix, mp, cacheDir, "--cache-size", "1G")

	// The control entry: there for stat, absent from listings.
	if _, err := os.Stat(filepath.Join(mp, ".dsmount-control")); err != nil {
		t.Errorf("stat of %s/.dsmount-control: %v", mp, err)
	}
	names, err := os.ReadDir(mp)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.Contains(n.Name(), "dsmount-control") {
			t.Errorf("the mount root lists %q; the control entry must be hidden", n.Name())
		}
	}
	if err := testenv.CompareListings(f.src, mp); err != nil {
		t.Errorf("listings: %v", err)
	}

	nFiles, total := int64(len(f.paths)), f.total
	c := testenv.WarmCheckT(t, dsmountBin, mp)
	if c != (testenv.WarmCheck{FilesTotal: nFiles, BytesTotal: total}) {
		t.Errorf("warm --check on a fresh cache: %+v; want %d files, %d bytes, none cached", c, nFiles, total)
	}

	g0 := f.gets(t)
	rep, _ := testenv.Warm(t, dsmountBin, warmTimeout, mp)
	g1 := f.gets(t)
	t.Logf("warm: %+v; %d GETs", rep, g1-g0)
	if !getsWithin(t, mp, g1-g0, f.chunks) {
		t.Errorf("warming the whole tree made %d GETs, want exactly one per chunk: %d", g1-g0, f.chunks)
	}
	want := testenv.WarmReport{Files: nFiles, Bytes: total, ChunksFetched: f.chunks, BytesFetched: total, Seconds: rep.Seconds}
	if rep != want || rep.Seconds <= 0 {
		t.Errorf("warm report %+v\nwant %+v (seconds > 0)", rep, want)
	}
	checkFullyCached(t, "after warm", nFiles, total, mp)

	// The plain --check line.
	r := testenv.RunCLI(dsmountBin, nil, time.Minute, "warm", "--check", mp)
	re := regexp.MustCompile(`^cached: (\d+)/(\d+) files, (.+)/(.+) bytes \(([0-9.]+)%\)$`)
	if sm := re.FindStringSubmatch(strings.TrimRight(r.Stdout, "\n")); r.ExitCode != 0 || sm == nil {
		t.Errorf("warm --check (plain): exit %d, stdout %q; want one line matching %s", r.ExitCode, r.Stdout, re)
	} else if sm[1] != sm[2] || sm[2] != strconv.Itoa(len(f.paths)) {
		t.Errorf("warm --check (plain): %q; want %d/%d files", sm[0], len(f.paths), len(f.paths))
	} else if pct, _ := strconv.ParseFloat(sm[5], 64); pct != 100 {
		t.Errorf("warm --check (plain): %q; want 100%%", sm[0])
	}

	// Everything is served from the cache now.
	testenv.CompareTree(t, f.src, mp, f.paths, 8, 1)
	if g2 := f.gets(t); g2 != g1 {
		t.Errorf("a verified read pass after warm made %d GETs, want 0", g2-g1)
	}

	g2 := f.gets(t)
	rep2, _ := testenv.Warm(t, dsmountBin, warmTimeout, mp)
	if g3 := f.gets(t); g3 != g2 {
		t.Errorf("a second warm made %d GETs, want 0", g3-g2)
	}
	want2 := testenv.WarmReport{Files: nFiles, Bytes: total, ChunksAlreadyCached: f.chunks, Seconds: rep2.Seconds}
	if rep2 != want2 {
		t.Errorf("second warm report %+v\nwant %+v", rep2, want2)
	}

	// Plain output of a warm of one subdirectory: one summary line.
	sub := f.topDirs()[0]
	g3 := f.gets(t)
	r = testenv.RunCLI(dsmountBin, nil, warmTimeout, "warm", mpPath(mp, sub))
	lines := strings.Split(strings.TrimRight(r.Stdout, "\n"), "\n")
	if r.ExitCode != 0 || len(lines) != 1 || !strings.HasPrefix(lines[0], "warmed ") {
		t.Errorf("warm %s (stdout not a terminal): exit %d, stdout %q; want exit 0 and one line starting \"warmed \"\nstderr: %s",
			sub, r.ExitCode, r.Stdout, r.Stderr)
	}
	if g4 := f.gets(t); g4 != g3 {
		t.Errorf("warm of a cached subdirectory made %d GETs", g4-g3)
	}
	t.Logf("plain warm: %s", strings.TrimSpace(r.Stdout))
	d.NoErrorLogs()
	d.Stop()
}

// TestWarmInterruptResume interrupts a slow warm (+20 ms per answer,
// --parallel 4) with SIGINT once some chunks are cached, and wants: exit 130,
// promptly; part of the tree cached; a verified read of the large file and
// of half the small files byte-correct (nothing half-written is served);
// then a new warm that fetches exactly the chunks still missing (MinIO GET
// count), after which everything is cached and a full verified pass makes no
// GET.
func TestWarmInterruptResume(t *testing.T) {
	f := warmData(t)
	mp, d := mountSlowWarm(t, f)

	g0 := f.gets(t)
	// Its stderr is no terminal: it prints a progress line every
	// --progress-interval.
	p, err := testenv.StartCLI(dsmountBin, testenv.CLIOptions{}, "warm", mp, "--parallel", "4", "--json", "--progress-interval", "200ms")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait(time.Second) // kill it if the test fails early
	progress := regexp.MustCompile(`(?m)^dsmount: warm ` + regexp.QuoteMeta(mp) + `: \d+/\d+ files, [0-9.]+ [KMGT]?i?B/[0-9.]+ [KMGT]?i?B \([0-9.]+%\), \d+ MB/s, \d+s elapsed, (about [0-9hms]+ left|time left unknown|finishing)( \(no report from the daemon for \d+s\))?$`)
	err = testenv.WaitFor(30*time.Second, 20*time.Millisecond, "warm --check reporting some bytes cached, and a progress line", func() (bool, error) {
		if p.Exited() {
			r := p.Wait(0)
			return false, fmt.Errorf("warm exited (code %d) before it could be interrupted\nstdout: %s\nstderr: %s", r.ExitCode, r.Stdout, r.Stderr)
		}
		c, err := testenv.WarmCheckErr(dsmountBin, 30*time.Second, mp)
		return c.BytesCached > 0 && progress.MatchString(p.Stderr()), err
	})
	if err != nil {
		t.Fatal(err)
	}
	sigAt := time.Now()
	if err := p.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r := p.Wait(30 * time.Second)
	stopped := time.Since(sigAt)
	t.Logf("interrupted warm: exit %d, %v after SIGINT\nstdout: %s\nstderr: %s", r.ExitCode, stopped.Round(time.Millisecond), r.Stdout, r.Stderr)
	if r.ExitCode != 130 {
		t.Fatalf("warm after SIGINT: exit %d (timed out: %v), want 130\nstdout: %s\nstderr: %s", r.ExitCode, r.TimedOut, r.Stdout, r.Stderr)
	}
	if stopped > 10*time.Second {
		t.Errorf("warm took %v to stop after SIGINT, want under 10s", stopped)
	}
	// Every stderr line is a progress line (or says the warm waits for
	// its first report).
	for _, line := range strings.Split(strings.TrimRight(r.Stderr, "\n"), "\n") {
		if !progress.MatchString(line) && !strings.Contains(line, "waiting for the daemon's first progress report") {
			t.Errorf("warm's stderr line %q is not a progress line (%s)", line, progress)
		}
	}
	if out := strings.TrimSpace(r.Stdout); out != "" {
		var rep testenv.WarmReport
		if err := testenv.DecodeJSONObject(out, &rep); err != nil {
			t.Errorf("interrupted warm --json printed something that is not its report: %v", err)
		} else if !rep.Interrupted || rep.ChunksFetched >= f.chunks {
			t.Errorf("interrupted warm --json report %+v: want interrupted=true and fewer than %d chunks fetched", rep, f.chunks)
		}
	}

	// Fetches the interrupted warm started may finish in the daemon; wait
	// for them before counting.
	waitNoFetches(t, mp)
	c1 := testenv.WarmCheckT(t, dsmountBin, mp)
	gInt := f.gets(t) - g0
	t.Logf("after the interrupt: %d GETs, %+v", gInt, c1)
	if c1.BytesCached == 0 || c1.BytesCached >= c1.BytesTotal {
		t.Fatalf("after the interrupt %d of %d bytes are cached; want some but not all (the warm ran to the end or cached nothing)", c1.BytesCached, c1.BytesTotal)
	}

	// Read what may be partly cached: the large file and every other small
	// file, verifying every byte.
	half := []string{warmLarge}
	for i, p := range f.smallPaths() {
		if i%2 == 0 {
			half = append(half, p)
		}
	}
	testenv.CompareTree(t, f.src, mp, half, 8, 3)
	if lc := testenv.WarmCheckT(t, dsmountBin, mpPath(mp, warmLarge)); lc.FilesCached != 1 || lc.BytesCached != f.sizes[warmLarge] {
		t.Fatalf("after reading %s whole, warm --check on it says %+v; want it cached", warmLarge, lc)
	}
	waitNoFetches(t, mp)
	c2 := testenv.WarmCheckT(t, dsmountBin, mp)
	// Only small files (one chunk each) can be missing now.
	missing := c2.FilesTotal - c2.FilesCached
	if missing <= 0 || c2.BytesTotal-c2.BytesCached <= 0 {
		t.Fatalf("after reading half the files warm --check says %+v; want the other half partly missing", c2)
	}

	g2 := f.gets(t)
	rep, _ := testenv.Warm(t, dsmountBin, warmTimeout, mp)
	g3 := f.gets(t)
	t.Logf("resumed warm: %+v, %d GETs (%d chunks were missing)", rep, g3-g2, missing)
	if !getsWithin(t, mp, g3-g2, missing) {
		t.Errorf("the resumed warm made %d GETs; %d chunks were missing", g3-g2, missing)
	}
	if rep.ChunksFetched != missing || rep.ChunksAlreadyCached != f.chunks-missing || rep.ChunksNotCached != 0 || rep.Interrupted {
		t.Errorf("resumed warm report %+v; want chunks_fetched %d, chunks_already_cached %d", rep, missing, f.chunks-missing)
	}
	checkFullyCached(t, "after the resumed warm", int64(len(f.paths)), f.total, mp)
	testenv.CompareTree(t, f.src, mp, f.paths, 8, 4)
	if g4 := f.gets(t); g4 != g3 {
		t.Errorf("a full verified pass after the resumed warm made %d GETs, want 0", g4-g3)
	}
	t.Logf("GETs in all: %d for %d chunks (%d re-fetched after the interrupt)", f.gets(t)-g0, f.chunks, f.gets(t)-g0-f.chunks)
	d.NoErrorLogs()
	d.Stop()
}

// waitNoFetches polls `dsmount stats` until no fetch is in flight.
func waitNoFetches(t *testing.T, mp string) {
	t.Helper()
	err := testenv.WaitFor(30*time.Second, 20*time.Millisecond, "fetches_in_flight == 0", func() (bool, error) {
		s, err := testenv.StatsErr(dsmountBin, mp)
		return s.Cache.FetchesInFlight == 0, err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWarmCapacity warms dirA then dirB (in that order, via --from-file)
// into a cache that holds dirA but not both: the warm says "do not fit" up
// front, caches all of dirA (paths given first win) and not all of dirB, and
// never goes over capacity. dirA then reads with no GET; dirB reads
// correctly (from the cache or streamed) and does not push dirA out.
func TestWarmCapacity(t *testing.T) {
	f := warmData(t)
	mp, cacheDir := t.TempDir(), t.TempDir()
	const capacity = 40 << 20 // dirA is 29.3 MiB, dirA+dirB 58.6 MiB
	d := mountWarm(t, f, f.minio.Endpoint(), capPrefix, mp, cacheDir, "--cache-size", "40M")
	aPaths, bPaths := f.capPaths(t, "dirA"), f.capPaths(t, "dirB")
	dirBytes := int64(capFiles * capFileSize)
	if dirBytes >= capacity || 2*dirBytes <= capacity {
		t.Fatalf("test setup: dirA %d bytes, capacity %d", dirBytes, capacity)
	}

	list := filepath.Join(t.TempDir(), "list.txt")
	if err := os.WriteFile(list, []byte(filepath.Join(mp, "dirA")+"\n"+filepath.Join(mp, "dirB")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g0 := f.gets(t)
	r := testenv.RunCLI(dsmountBin, nil, warmTimeout, "warm", "--from-file", list, "--json")
	g1 := f.gets(t)
	t.Logf("warm dirA, dirB into %d bytes: exit %d, %d GETs\nstdout: %s\nstderr: %s", capacity, r.ExitCode, g1-g0, r.Stdout, r.Stderr)
	if r.ExitCode != 0 {
		t.Errorf("warm of more than fits: exit %d, want 0 (it fills up to capacity)", r.ExitCode)
	}
	if !strings.Contains(r.Stderr, "do not fit") {
		t.Errorf("warm of more than fits: stderr %q does not say \"do not fit\"", r.Stderr)
	}
	var rep testenv.WarmReport
	if err := testenv.DecodeJSONObject(r.Stdout, &rep); err != nil {
		t.Errorf("warm --json: %v", err)
	} else {
		if rep.Files != 2*capFiles || rep.Bytes != 2*dirBytes {
			t.Errorf("warm report counts %d files, %d bytes; want %d, %d", rep.Files, rep.Bytes, 2*capFiles, 2*dirBytes)
		}
		if !rep.CacheFull || rep.ChunksNotCached == 0 || rep.ChunksFetched+rep.ChunksNotCached+rep.ChunksAlreadyCached != 2*capFiles {
			t.Errorf("warm report %+v; want cache_full, chunks_not_cached > 0, and fetched+not_cached+already_cached = %d", rep, 2*capFiles)
		}
		if rep.ChunksFetched < capFiles {
			t.Errorf("warm report: %d chunks fetched, want at least dirA's %d", rep.ChunksFetched, capFiles)
		}
	}
	checkFullyCached(t, "dirA (given first)", capFiles, dirBytes, filepath.Join(mp, "dirA"))
	cb := testenv.WarmCheckT(t, dsmountBin, filepath.Join(mp, "dirB"))
	if cb.FilesTotal != capFiles || cb.BytesCached >= cb.BytesTotal {
		t.Errorf("dirB (given second): warm --check %+v; want it not fully cached", cb)
	}
	t.Logf("dirB after the warm: %d/%d files cached", cb.FilesCached, cb.FilesTotal)
	s := testenv.Stats(t, dsmountBin, mp)
	if s.Cache.Capacity != capacity || s.Cache.Used <= 0 || s.Cache.Used > capacity {
		t.Errorf("stats: used %d, capacity %d; want capacity %d and 0 < used <= capacity", s.Cache.Used, s.Cache.Capacity, capacity)
	}

	g2 := f.gets(t)
	testenv.CompareTree(t, f.capSrc, mp, aPaths, 8, 1)
	if g3 := f.gets(t); g3 != g2 {
		t.Errorf("reading the warmed dirA made %d GETs, want 0", g3-g2)
	}
	testenv.CompareTree(t, f.capSrc, mp, bPaths, 8, 2)
	checkFullyCached(t, "dirA after reading dirB", capFiles, dirBytes, filepath.Join(mp, "dirA"))
	d.NoErrorLogs()
	d.Stop()
}

// TestWarmConcurrentWithReaders starts a cold verified read pass and a warm
// of the same tree at the same moment (+20 ms backend, so they overlap):
// both succeed and MinIO serves each chunk exactly once in all.
func TestWarmConcurrentWithReaders(t *testing.T) {
	f := warmData(t)
	mp, d := mountSlowWarm(t, f)

	g0 := f.gets(t)
	start := make(chan struct{})
	passErr := make(chan error, 1)
	go func() {
		<-start
		res, err := testenv.CompareTreeErr(f.src, mp, f.paths, 8, 5)
		if err == nil && res.Files != len(f.paths) {
			err = fmt.Errorf("read %d files, want %d", res.Files, len(f.paths))
		}
		passErr <- err
	}()
	close(start)
	p, err := testenv.StartCLI(dsmountBin, testenv.CLIOptions{}, "warm", mp, "--json")
	if err != nil {
		t.Fatal(err)
	}
	r := p.Wait(warmTimeout)
	if err := <-passErr; err != nil {
		t.Errorf("verified read pass concurrent with warm: %v", err)
	}
	if r.ExitCode != 0 {
		t.Fatalf("warm concurrent with readers: exit %d\nstdout: %s\nstderr: %s", r.ExitCode, r.Stdout, r.Stderr)
	}
	var rep testenv.WarmReport
	if err := testenv.DecodeJSONObject(r.Stdout, &rep); err != nil {
		t.Fatalf("warm --json: %v", err)
	}
	waitNoFetches(t, mp)
	g1 := f.gets(t)
	t.Logf("warm with readers: %+v; %d GETs for %d chunks", rep, g1-g0, f.chunks)
	if !getsWithin(t, mp, g1-g0, f.chunks) {
		t.Errorf("warm + readers made %d GETs, want exactly one per chunk: %d", g1-g0, f.chunks)
	}
	if rep.ChunksFetched+rep.ChunksAlreadyCached != f.chunks || rep.ChunksNotCached != 0 {
		t.Errorf("warm report %+v: fetched + already cached should be %d", rep, f.chunks)
	}
	s := testenv.Stats(t, dsmountBin, mp)
	if s.Cache.ChunksFetched != f.chunks {
		t.Errorf("stats: chunks_fetched %d, want %d (one per chunk)", s.Cache.ChunksFetched, f.chunks)
	}
	checkFullyCached(t, "after warm + readers", int64(len(f.paths)), f.total, mp)
	d.NoErrorLogs()
	d.Stop()
}

// TestWarmFromStdin warms a directory given relative to the working
// directory and a file given by absolute path, both read from stdin
// (--from-file -): exactly their chunks are fetched and cached, nothing else.
func TestWarmFromStdin(t *testing.T) {
	f := warmData(t)
	mp, cacheDir := t.TempDir(), t.TempDir()
	d := mountWarm(t, f, f.minio.Endpoint(), warmPrefix, mp, cacheDir, "--cache-size", "1G")

	dirs := f.topDirs()
	dir := dirs[len(dirs)-1]
	var file string
	for _, p := range f.smallPaths() {
		if !strings.HasPrefix(p, dir+"/") {
			file = p
			break
		}
	}
	nDir, chDir := f.chunksUnder(dir)
	wantFiles, wantChunks := int64(nDir+1), chDir+chunksOf(f.sizes[file])
	var wantBytes int64
	for _, p := range f.paths {
		if strings.HasPrefix(p, dir+"/") || p == file {
			wantBytes += f.sizes[p]
		}
	}
	if nDir == 0 || nDir == len(f.paths) {
		t.Fatalf("test setup: directory %s holds %d files", dir, nDir)
	}

	stdin := dir + "\n" + mpPath(mp, file) + "\n"
	g0 := f.gets(t)
	r := testenv.RunCLIWith(dsmountBin, testenv.CLIOptions{Dir: mp, Stdin: stdin}, warmTimeout, "warm", "--from-file", "-", "--json")
	g1 := f.gets(t)
	if r.ExitCode != 0 {
		t.Fatalf("warm --from-file - (stdin %q, cwd %s): exit %d\nstdout: %s\nstderr: %s", stdin, mp, r.ExitCode, r.Stdout, r.Stderr)
	}
	var rep testenv.WarmReport
	if err := testenv.DecodeJSONObject(r.Stdout, &rep); err != nil {
		t.Fatalf("warm --json: %v", err)
	}
	t.Logf("warm of %q: %+v, %d GETs", stdin, rep, g1-g0)
	if rep.Files != wantFiles || rep.Bytes != wantBytes || rep.ChunksFetched != wantChunks {
		t.Errorf("warm from stdin: %+v; want %d files, %d bytes, %d chunks fetched", rep, wantFiles, wantBytes, wantChunks)
	}
	if !getsWithin(t, mp, g1-g0, wantChunks) {
		t.Errorf("warm from stdin made %d GETs, want %d", g1-g0, wantChunks)
	}
	checkFullyCached(t, "the warmed directory and file", wantFiles, wantBytes, mpPath(mp, dir), mpPath(mp, file))
	c := testenv.WarmCheckT(t, dsmountBin, mp)
	if c.FilesCached != wantFiles || c.BytesCached != wantBytes {
		t.Errorf("whole tree after warming one directory and one file: %+v; want exactly %d files, %d bytes cached", c, wantFiles, wantBytes)
	}
	d.NoErrorLogs()
	d.Stop()
}

// TestWarmErrors: a path outside any dsmount mount is an error: exit 2, one
// line on stderr starting "dsmount: ", for warm and warm --check.
func TestWarmErrors(t *testing.T) {
	plain := t.TempDir()
	if err := os.WriteFile(filepath.Join(plain, "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"warm", plain},
		{"warm", filepath.Join(plain, "x"), "--json"},
		{"warm", "--check", plain},
	} {
		r := testenv.RunCLI(dsmountBin, nil, cliPrompt, args...)
		if err := oneLineError(r, 2); err != nil {
			t.Errorf("dsmount %s: %v", strings.Join(args, " "), err)
		}
		t.Logf("dsmount %s: exit %d: %s", strings.Join(args, " "), r.ExitCode, strings.TrimSpace(r.Stderr))
	}
}

// oneLineError wants exit code code (any non-zero if code < 0) and exactly
// one line on stderr starting "dsmount: ".
func oneLineError(r testenv.CLIResult, code int) error {
	var errs []string
	if r.TimedOut {
		errs = append(errs, "timed out")
	}
	if (code >= 0 && r.ExitCode != code) || (code < 0 && r.ExitCode == 0) {
		want := strconv.Itoa(code)
		if code < 0 {
			want = "non-zero"
		}
		errs = append(errs, fmt.Sprintf("exit %d, want %s", r.ExitCode, want))
	}
	lines := strings.Split(strings.TrimRight(r.Stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "dsmount: ") {
		errs = append(errs, fmt.Sprintf("stderr is %d lines, want one starting \"dsmount: \": %q", len(lines), r.Stderr))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// onePass reports whether got bytes read through a mount match one pass over
// total bytes. The kernel may read a page twice (it reclaims read-ahead pages
// under memory pressure before the reader copies them), so a re-read of up to
// 1% is one pass; reading less, or a second pass, is not.
func onePass(got, total int64) bool {
	return got >= total && got <= total+total/100
}
