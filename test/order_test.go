package test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/test/testenv"
)

// orderResult is what `dsmount order --json` prints.
type orderResult struct {
	Job             string   `json:"job"`
	Epoch           int      `json:"epoch"`
	Declared        int      `json:"declared"`
	NextDeclared    int      `json:"next_declared"`
	Duplicates      int      `json:"duplicates"`
	Skipped         int      `json:"skipped"`
	SkippedExamples []string `json:"skipped_examples"`
}

// writeList writes paths, one per line, to a new file in dir.
func writeList(t *testing.T, dir, name string, paths []string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(strings.Join(paths, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func declare(t *testing.T, mp, job string, epoch int, list string, extra ...string) orderResult {
	t.Helper()
	args := append([]string{"order", mp, "--job", job, "--epoch", fmt.Sprint(epoch), list, "--json"}, extra...)
	r := testenv.RunCLI(dsmountBin, nil, time.Minute, args...)
	if r.ExitCode != 0 {
		t.Fatalf("dsmount %s: exit %d, stderr %s", strings.Join(args, " "), r.ExitCode, r.Stderr)
	}
	var res orderResult
	if err := testenv.DecodeJSONObject(r.Stdout, &res); err != nil {
		t.Fatalf("dsmount order --json: %v\n%s", err, r.Stdout)
	}
	return res
}

func jobStats(t *testing.T, mp, name string) (control.JobStats, bool) {
	t.Helper()
	s := testenv.Stats(t, dsmountBin, mp)
	return testenv.Job(s.Mount, name)
}

// TestOrderPrefetchesAheadOfReaders declares a shuffled order (and the next
// epoch's) on a fresh mount over MinIO behind 20 ms of latency, then:
//   - before any read, the daemon prefetches the start of the order, and
//     no more than its window (it doesn't fetch the whole dataset for a job
//     that isn't reading);
//   - four readers then read the order like loader workers; every byte
//     matches, the job's frontier reaches the end, most first reads find
//     their file prefetched, and MinIO served exactly one GET per chunk:
//     prefetches and reads of one chunk share one fetch.
func TestOrderPrefetchesAheadOfReaders(t *testing.T) {
	f := warmData(t)
	endpoint := slowEndpoint(t, f)
	mp, cacheDir, tmp := t.TempDir(), t.TempDir(), t.TempDir()
	mountWarm(t, f, endpoint, warmPrefix, mp, cacheDir, "--cache-size", "1G")
	small := f.smallPaths()
	order := testenv.Shuffled(small, 7)
	next := testenv.Shuffled(small, 8)
	g0 := f.gets(t)
	res := declare(t, mp, "train", 0, writeList(t, tmp, "e0", order), "--next", writeList(t, tmp, "e1", next))
	if res.Declared != len(small) || res.NextDeclared != len(small) || res.Skipped != 0 || res.Duplicates != 0 {
		t.Fatalf("order result %+v; want %d declared for this epoch and the next, nothing skipped", res, len(small))
	}

	var j control.JobStats
	err := testenv.WaitFor(time.Minute, 20*time.Millisecond, "the job's first window prefetched", func() (bool, error) {
		s, err := testenv.StatsErr(dsmountBin, mp)
		j, _ = testenv.Job(s.Mount, "train")
		return j.Prefetched >= int64(j.Window) && j.Window > 0 && s.Cache.FetchesInFlight == 0, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if j.Prefetched > int64(j.Window) || !getsWithin(t, mp, f.gets(t)-g0, j.Prefetched) {
		t.Errorf("with no reader, the job prefetched %d items (%d GETs); want exactly its window of %d", j.Prefetched, f.gets(t)-g0, j.Window)
	}

	start := time.Now()
	err = testenv.ReadAllInOrder(mp, order, 4, func(p string, data []byte) error {
		return testenv.CompareFile(f.src, p, data)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("read %d files in the declared order in %v", len(order), time.Since(start).Round(time.Millisecond))
	waitNoFetches(t, mp)
	j, ok := jobStats(t, mp, "train")
	if !ok {
		t.Fatal("job train is gone from stats")
	}
	t.Logf("job after the epoch: %+v", j)
	if j.Read != len(order) || j.Frontier != len(order) || j.TotalReads != int64(len(order)) {
		t.Errorf("job after reading its order: read %d, frontier %d, total_reads %d; want all %d", j.Read, j.Frontier, j.TotalReads, len(order))
	}
	if j.PrefetchHits < int64(len(order))/2 || j.Stalls > int64(len(order))/2 {
		t.Errorf("prefetch_hits %d, stalls %d of %d reads; want most reads served by prefetch", j.PrefetchHits, j.Stalls, len(order))
	}
	// The next epoch's start is prefetched too, and nothing was fetched
	// twice: one GET per chunk of the dataset's small files.
	if got := f.gets(t) - g0; !getsWithin(t, mp, got, int64(len(small))) {
		t.Errorf("MinIO served %d GETs for %d one-chunk files; want exactly one each", got, len(small))
	}
}

// TestOrderBadDeclarations: every malformed declaration gets a one-line
// error (exit 1 for usage, 2 for what the daemon refuses) and leaves the
// other jobs as they were; unknown paths and repeats are reported, not
// fatal; --end forgets a job.
func TestOrderBadDeclarations(t *testing.T) {
	f := warmData(t)
	mp, cacheDir, tmp := t.TempDir(), t.TempDir(), t.TempDir()
	mountWarm(t, f, f.minio.Endpoint(), warmPrefix, mp, cacheDir, "--cache-size", "1G")
	small := f.smallPaths()
	good := writeList(t, tmp, "good", small[:100])
	if res := declare(t, mp, "keep", 3, good); res.Declared != 100 || res.Epoch != 3 {
		t.Fatalf("declaring 100 files: %+v", res)
	}

	mixed := append(append([]string{"no/such/file", "large"}, small[100:110]...), small[100], mp+"/"+small[111])
	res := declare(t, mp, "mixed", 0, writeList(t, tmp, "mixed", mixed))
	if res.Declared != 11 || res.Skipped != 2 || res.Duplicates != 1 || len(res.SkippedExamples) != 2 {
		t.Errorf("declaring 10 files, one repeat, one absolute path, a missing file and a directory: %+v; want 11 declared, 2 skipped with examples, 1 duplicate", res)
	}

	empty := writeList(t, tmp, "empty", nil)
	missing := writeList(t, tmp, "missing", []string{"nope", "nada"})
	sub := mpPath(mp, filepath.Dir(small[0]))
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no job", []string{"order", mp, "--epoch", "0", good}, 1, "--job"},
		{"negative epoch", []string{"order", mp, "--job", "x", "--epoch", "-1", good}, 1, "--epoch"},
		{"no file", []string{"order", mp, "--job", "x"}, 1, "FILE"},
		{"empty list", []string{"order", mp, "--job", "x", empty}, 1, "no paths"},
		{"list file missing", []string{"order", mp, "--job", "x", filepath.Join(tmp, "absent")}, 1, "absent"},
		{"nothing known", []string{"order", mp, "--job", "x", missing}, 2, "none of the 2 paths"},
		{"not the mount root", []string{"order", sub, "--job", "x", good}, 1, "not a mountpoint"},
		{"not a mount", []string{"order", tmp, "--job", "x", good}, 2, "not inside a dsmount mount"},
	}
	for _, c := range cases {
		r := testenv.RunCLI(dsmountBin, nil, time.Minute, c.args...)
		msg := strings.TrimSpace(r.Stderr)
		if r.ExitCode != c.code || !strings.Contains(msg, c.want) || strings.Count(msg, "\n") != 0 {
			t.Errorf("%s: dsmount %s: exit %d, stderr %q; want exit %d and one line mentioning %q", c.name, strings.Join(c.args, " "), r.ExitCode, msg, c.code, c.want)
		}
	}
	if j, ok := jobStats(t, mp, "keep"); !ok || j.Declared != 100 || j.Epoch != 3 {
		t.Errorf("after the bad declarations, job keep is %+v (present %v); want it untouched: 100 declared, epoch 3", j, ok)
	}
	if _, ok := jobStats(t, mp, "x"); ok {
		t.Error("a refused declaration created job x")
	}

	r := testenv.RunCLI(dsmountBin, nil, time.Minute, "order", mp, "--job", "keep", "--end")
	if r.ExitCode != 0 || !strings.Contains(r.Stdout, "ended") {
		t.Errorf("order --end: exit %d, stdout %q", r.ExitCode, r.Stdout)
	}
	if _, ok := jobStats(t, mp, "keep"); ok {
		t.Error("job keep still listed after --end")
	}
	if _, ok := jobStats(t, mp, "mixed"); !ok {
		t.Error("ending job keep removed job mixed")
	}
}

// TestOrderJobExpires: a job that stops reading is forgotten after the
// daemon's --job-timeout.
func TestOrderJobExpires(t *testing.T) {
	f := warmData(t)
	mp, cacheDir, tmp := t.TempDir(), t.TempDir(), t.TempDir()
	mountWarm(t, f, f.minio.Endpoint(), warmPrefix, mp, cacheDir, "--cache-size", "1G", "--job-timeout", "2s")
	declared := time.Now()
	declare(t, mp, "idle", 0, writeList(t, tmp, "l", f.smallPaths()[:50]))
	if _, ok := jobStats(t, mp, "idle"); !ok {
		t.Fatal("job not listed right after declaring it")
	}
	err := testenv.WaitFor(30*time.Second, 50*time.Millisecond, "the idle job to expire", func() (bool, error) {
		s, err := testenv.StatsErr(dsmountBin, mp)
		_, ok := testenv.Job(s.Mount, "idle")
		return !ok, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(declared); el < 2*time.Second {
		t.Errorf("job expired after %v; the timeout is 2s", el)
	}
}

// TestSequentialLargeFileReadahead reads the fixture's 64 MiB file with
// dd-like 1 MiB reads through a fresh mount: the bytes match, and
// sequential readahead fetched every chunk exactly once (GETs == chunks).
func TestSequentialLargeFileReadahead(t *testing.T) {
	f := warmData(t)
	mp, cacheDir := t.TempDir(), t.TempDir()
	mountWarm(t, f, f.minio.Endpoint(), warmPrefix, mp, cacheDir, "--cache-size", "1G")
	g0 := f.gets(t)
	data, err := readInSteps(mpPath(mp, warmLarge), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.CompareFile(f.src, warmLarge, data); err != nil {
		t.Fatal(err)
	}
	waitNoFetches(t, mp)
	if got, want := f.gets(t)-g0, chunksOf(f.sizes[warmLarge]); !getsWithin(t, mp, got, want) {
		t.Errorf("sequential read of %s: %d GETs; want one per chunk, %d", warmLarge, got, want)
	}
}

// TestConcurrentStreamsReadahead: six large files read at once, one
// sequential reader each, through one cold mount: their streams share the
// cache's readahead budgets (each gets a sixth, which binds here: 21 MiB
// ahead of 24 MiB files, in 1 MiB chunks). Every file comes back
// byte-exact with exactly one GET per chunk in all: shrinking shares
// neither lose chunks nor fetch any twice.
func TestConcurrentStreamsReadahead(t *testing.T) {
	f := warmData(t)
	const files, size = 6, 24 << 20
	src := t.TempDir()
	sizes := make([]int64, files)
	for i := range sizes {
		sizes[i] = size
	}
	paths := testenv.GenerateDataset(t, src, testenv.DatasetSpec{Seed: 77, LargeFiles: sizes})
	if err := f.m(t).UploadDirErr(t.Context(), warmBucket, "streams", src, 4); err != nil {
		t.Fatal(err)
	}
	mp, cacheDir := t.TempDir(), t.TempDir()
	mountWarm(t, f, f.minio.Endpoint(), "streams", mp, cacheDir, "--cache-size", "1G")
	g0 := f.gets(t)
	errs := make(chan error, files)
	for _, p := range paths {
		go func() {
			data, err := readInSteps(mpPath(mp, p), 256<<10)
			if err == nil {
				err = testenv.CompareFile(src, p, data)
			}
			errs <- err
		}()
	}
	for range paths {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	waitNoFetches(t, mp)
	if got, want := f.gets(t)-g0, int64(files)*chunksOf(size); !getsWithin(t, mp, got, want) {
		t.Errorf("%d concurrent sequential readers: %d GETs; want one per chunk, %d", files, got, want)
	}
}

// readInSteps reads the file at path from start to end with reads of step
// bytes, as a sequential reader (dd bs=step) would.
func readInSteps(path string, step int) ([]byte, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var data []byte
	buf := make([]byte, step)
	for {
		n, err := file.Read(buf)
		data = append(data, buf[:n]...)
		if err == io.EOF || (n == 0 && err == nil) {
			return data, nil
		}
		if err != nil {
			return data, err
		}
	}
}
