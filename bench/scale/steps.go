package scale

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/bench/internal/benchenv"
	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/bench/internal/measure"
	"github.com/dsmount/dsmount/test/testenv"
)

// figures carried from one step to a later one.
type carried struct {
	refPar       time.Duration // a (ii), the first mount's reference
	localMade    bool
	cachedChunks int64 // chunk records in the cache, -1 unknown
	jobs         []string
}

func (e *env) run() {
	var c carried
	c.cachedChunks = -1
	for _, step := range []func(*carried){e.refListing, e.firstMount, e.find, e.ls, e.orders, e.warmAndEpoch, e.check, e.remount} {
		if e.en.stopping() {
			return
		}
		step(&c)
	}
}

func (e *env) skipped(step string) bool {
	if e.en.stopping() {
		return true
	}
	if e.cfg.skip[step] {
		cli.Logf("%s: skipped (--skip)", step)
		return true
	}
	return false
}

// a. The store's own listing rate, as a bare client gets it.
func (e *env) refListing(c *carried) {
	client := testenv.NewS3Client(e.endpoint, "fake", "fake-secret")
	ctx := context.Background()
	n := int64(e.keys.Len())
	if !e.skipped("ref-seq") {
		cli.Logf("a (i): sequential listing")
		t0, cpu0 := time.Now(), testenv.SelfCPU()
		keys, pages, err := listFlat(ctx, client)
		d := time.Since(t0)
		e.addTime("a (i) reference: sequential ListObjectsV2, pages of 1000", d, err, keys, n,
			fmt.Sprintf("%d pages, %.0f keys/s, client CPU %.1f s", pages, float64(keys)/d.Seconds(), testenv.SelfCPU()-cpu0))
	}
	if !e.skipped("ref-par") {
		cli.Logf("a (ii): tree walk with delimiter, %d workers", e.cfg.parallel)
		t0, cpu0 := time.Now(), testenv.SelfCPU()
		keys, reqs, err := walkTree(ctx, client, e.cfg.parallel)
		d := time.Since(t0)
		e.addTime(fmt.Sprintf("a (ii) reference: %d workers walking the tree with delimiter \"/\"", e.cfg.parallel), d, err, keys, n,
			fmt.Sprintf("%d requests, %.0f keys/s, client CPU %.1f s", reqs, float64(keys)/d.Seconds(), testenv.SelfCPU()-cpu0))
		if err == nil && keys == n {
			c.refPar = d
		}
	}
}

// addTime adds a context row of a timed listing or walk that must find
// want entries.
func (e *env) addTime(step string, d time.Duration, err error, got, want int64, extra string) {
	if err != nil {
		e.fail(step, err)
		return
	}
	r := row{step: step, figure: fmt.Sprintf("%s (%s)", fmtDur(d), extra)}
	if got != want {
		r.result = fmt.Sprintf("WRONG: %d entries, want %d", got, want)
	}
	cli.Logf("%s: %s", step, r.figure)
	e.rows = append(e.rows, r)
}

func (e *env) fail(step string, err error) {
	cli.Logf("%s: %v", step, err)
	e.rows = append(e.rows, row{step: step, figure: "error", result: "ERROR: " + firstLine(err.Error())})
}

func listFlat(ctx context.Context, c *s3.Client) (keys, pages int64, err error) {
	pg := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), MaxKeys: aws.Int32(1000)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return keys, pages, fmt.Errorf("list: %w", err)
		}
		pages++
		keys += int64(len(page.Contents))
	}
	return keys, pages, nil
}

// walkTree lists the bucket as a tree: a task lists one prefix with
// delimiter "/" (all its pages), its objects are results and each common
// prefix becomes a new task, par tasks at a time.
func walkTree(ctx context.Context, c *s3.Client, par int) (keys, requests int64, err error) {
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		queue    = []string{""}
		pending  = 1 // tasks queued or running
		firstErr error
		nk, nr   atomic.Int64
		wg       sync.WaitGroup
	)
	task := func(prefix string) error {
		pg := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix),
			Delimiter: aws.String("/"), MaxKeys: aws.Int32(1000)})
		for pg.HasMorePages() {
			page, err := pg.NextPage(ctx)
			if err != nil {
				return fmt.Errorf("list %q: %w", prefix, err)
			}
			nr.Add(1)
			nk.Add(int64(len(page.Contents)))
			mu.Lock()
			for _, p := range page.CommonPrefixes {
				queue = append(queue, aws.ToString(p.Prefix))
				pending++
				cond.Signal()
			}
			mu.Unlock()
		}
		return nil
	}
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			for {
				for len(queue) == 0 && pending > 0 && firstErr == nil {
					cond.Wait()
				}
				if pending == 0 || firstErr != nil {
					cond.Broadcast()
					return
				}
				p := queue[0]
				queue = queue[1:]
				mu.Unlock()
				err := task(p)
				mu.Lock()
				pending--
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if pending == 0 || firstErr != nil {
					cond.Broadcast()
				}
			}
		}()
	}
	wg.Wait()
	return nk.Load(), nr.Load(), firstErr
}

// b. The first mount: the whole listing.
func (e *env) firstMount(c *carried) {
	cli.Logf("b: first mount")
	d, err := e.mount()
	if err != nil {
		e.t.Fatalf("first mount: %v", err)
	}
	r := row{step: "b. first mount: start to mounted", figure: fmtDur(d), target: "≤ 15 s, or ≤ 1.5× a (ii)"}
	ok := d <= 15*time.Second
	if c.refPar > 0 {
		r.ref, r.ratio = fmtDur(c.refPar)+" (a ii)", fmtRatio(d, c.refPar)
		ok = ok || d.Seconds() <= 1.5*c.refPar.Seconds()
	}
	r.result = passMiss(ok)
	e.rows = append(e.rows, r)
	cli.Logf("mounted in %v", d.Round(time.Millisecond))
	e.rows = append(e.rows, e.rssRow("b. daemon RSS after mount", ""))
	if st, err := testenv.StatsErr(e.bin, e.mnt); err != nil {
		e.notes = append(e.notes, "stats after the first mount: "+firstLine(err.Error()))
	} else if st.Mount.Files != e.keys.Len() {
		e.notes = append(e.notes, fmt.Sprintf("stats after the first mount: %d files, the store has %d", st.Mount.Files, e.keys.Len()))
	}
}

// rssRow is a row of the daemon's RSS and peak now, with the daemon's
// CPU time so far; target is "" or a bound in MB.
func (e *env) rssRow(step, target string) row {
	pid := e.m.Pid()
	rss, hwm := benchenv.ProcMem(pid)
	r := row{step: step, figure: fmt.Sprintf("%s (peak %s; daemon CPU so far %.1f s)", fmtMB(rss), fmtMB(hwm), testenv.ProcCPU(pid))}
	if target != "" {
		bound, _ := strconv.ParseFloat(target, 64)
		r.target = "≤ " + target + " MB"
		r.result = passMiss(rss >= 0 && float64(rss) <= bound*1e6)
	}
	cli.Logf("%s: %s", step, r.figure)
	return r
}

// shell runs a command line through sh and returns its trimmed stdout.
func shell(script string, args ...string) (string, time.Duration, error) {
	cmd := exec.Command("sh", append([]string{"-c", script, "sh"}, args...)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	if err != nil {
		return "", d, fmt.Errorf("%s: %w: %s", script, err, firstLine(stderr.String()))
	}
	return strings.TrimSpace(out.String()), d, nil
}

// countFiles times `find DIR -type f | wc -l` after dropping the caches.
func countFiles(dir string) (int64, time.Duration, error) {
	if err := testenv.DropCaches(); err != nil {
		return 0, 0, err
	}
	out, d, err := shell(`find "$1" -type f | wc -l`, dir)
	if err != nil {
		return 0, d, err
	}
	n, err := strconv.ParseInt(out, 10, 64)
	return n, d, err
}

func (e *env) ensureLocal(c *carried) error {
	if c.localMade {
		return nil
	}
	cli.Logf("creating the local tree of %d empty files", e.keys.Len())
	d, err := e.makeLocalTree()
	if err != nil {
		return err
	}
	c.localMade = true
	e.notes = append(e.notes, fmt.Sprintf("The local reference tree (%d empty files under %s) took %s to create (not counted).",
		e.keys.Len(), filepath.Base(e.local), fmtDur(d)))
	cli.Logf("local tree made in %v", d.Round(time.Millisecond))
	return nil
}

// c. A full find, against a local tree of empty files.
func (e *env) find(c *carried) {
	if e.skipped("find") {
		return
	}
	const step = "c. `find MNT -type f | wc -l` after drop_caches"
	cli.Logf("c: find through the mount")
	n, d, err := countFiles(e.mnt)
	if err != nil {
		e.fail(step, err)
		return
	}
	cli.Logf("find: %d files in %v", n, d.Round(time.Millisecond))
	r := row{step: step, figure: fmt.Sprintf("%s (%d files)", fmtDur(d), n), target: "≤ 3× local"}
	rss := e.rssRow("c. daemon RSS after find", "")
	if err := e.ensureLocal(c); err != nil {
		e.fail(step, err)
		return
	}
	ln, ld, err := countFiles(e.local)
	if err != nil {
		e.fail(step, err)
		return
	}
	r.ref, r.ratio = fmtDur(ld)+" (local tree)", fmtRatio(d, ld)
	r.result = passMiss(d.Seconds() <= 3*ld.Seconds())
	if n != int64(e.keys.Len()) || ln != n {
		r.result = fmt.Sprintf("WRONG: %d files, local %d, store %d", n, ln, e.keys.Len())
	}
	e.rows = append(e.rows, r, rss)
}

// d. `ls -l` of one class directory, against the local tree.
func (e *env) ls(c *carried) {
	if e.skipped("ls") {
		return
	}
	cls := e.keys.Dirs() / 2
	lo, hi := e.keys.DirRange(cls)
	dir := e.keys.DirPrefix(cls)
	step := fmt.Sprintf("d. `ls -l` of %s (%d files)", dir, hi-lo)
	if err := e.ensureLocal(c); err != nil {
		e.fail(step, err)
		return
	}
	cli.Logf("d: ls -l %s", dir)
	t, err := timeLs(filepath.Join(e.mnt, dir), filepath.Join(e.local, dir), hi-lo)
	if err != nil {
		e.fail(step, err)
		return
	}
	e.rows = append(e.rows,
		row{step: fmt.Sprintf("%s, after drop_caches (median of %d)", step, lsRounds), figure: fmtDur(t.mntCold), ref: fmtDur(t.localCold) + " (local)",
			ratio: fmtRatio(t.mntCold, t.localCold), target: "≤ 2× local", result: passMiss(t.mntCold.Seconds() <= 2*t.localCold.Seconds())},
		row{step: fmt.Sprintf("%s, repeated (median of %d)", step, lsRounds), figure: fmtDur(t.mntWarm), ref: fmtDur(t.localWarm) + " (local)",
			ratio: fmtRatio(t.mntWarm, t.localWarm), target: "≤ 2× local", result: passMiss(t.mntWarm.Seconds() <= 2*t.localWarm.Seconds())})
	if !e.cfg.skip["find"] {
		e.notes = append(e.notes, fmt.Sprintf("The `ls -l` directory %s is one the `find` of step c had visited (the kernel's caches were dropped since).", dir))
	}
	e.notes = append(e.notes, fmt.Sprintf("`ls -l` after drop_caches, each round: mount %s, local %s.", fmtDurs(t.mntColds), fmtDurs(t.localColds)))
	cli.Logf("ls -l: mount %v / %v, local %v / %v", t.mntCold, t.mntWarm, t.localCold, t.localWarm)
}

// lsRounds is how many times each `ls -l` is timed: one sample of a cold
// listing is at the mercy of whatever else the machine did then.
const lsRounds = 5

type lsTimes struct {
	mntCold, localCold, mntWarm, localWarm time.Duration
	mntColds, localColds                   []time.Duration
}

// timeLs times `ls -l` of the mount's directory and the local one, taking
// turns: each after drop_caches, lsRounds times, then lsRounds repeats
// each with the caches warm; medians. Each must list want files.
func timeLs(mnt, local string, want int) (lsTimes, error) {
	var t lsTimes
	var mc, lc, mw, lw []float64
	run := func(dir string) (time.Duration, error) {
		var out bytes.Buffer
		d, err := measure.Ls(&out, "-l", dir)
		if err != nil {
			return 0, err
		}
		if n := bytes.Count(out.Bytes(), []byte("\n")) - 1; n != want { // less the "total" line
			return 0, fmt.Errorf("ls -l %s: %d entries, want %d", dir, n, want)
		}
		return d, nil
	}
	for range lsRounds {
		for _, side := range []struct {
			dir   string
			times *[]float64
			all   *[]time.Duration
		}{{mnt, &mc, &t.mntColds}, {local, &lc, &t.localColds}} {
			if err := testenv.DropCaches(); err != nil {
				return t, err
			}
			d, err := run(side.dir)
			if err != nil {
				return t, err
			}
			*side.times = append(*side.times, d.Seconds())
			*side.all = append(*side.all, d)
		}
	}
	for range lsRounds {
		for _, side := range []struct {
			dir   string
			times *[]float64
		}{{mnt, &mw}, {local, &lw}} {
			d, err := run(side.dir)
			if err != nil {
				return t, err
			}
			*side.times = append(*side.times, d.Seconds())
		}
	}
	sec := func(v []float64) time.Duration { return time.Duration(testenv.Median(v) * float64(time.Second)) }
	t.mntCold, t.localCold, t.mntWarm, t.localWarm = sec(mc), sec(lc), sec(mw), sec(lw)
	return t, nil
}

// fmtDurs is durations, comma-separated.
func fmtDurs(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = fmtDur(d)
	}
	return strings.Join(s, ", ")
}

// warmAndEpoch is f: a warm of the first --subset of the directories, then
// a cold epoch over --subset of the files of the others.
func (e *env) warmAndEpoch(c *carried) {
	w := int(math.Ceil(e.cfg.subset * float64(e.keys.Dirs())))
	_, warmedHi := e.keys.DirRange(w - 1)
	if !e.skipped("warm") {
		args := []string{"warm", "--json"}
		for d := 0; d < w; d++ {
			args = append(args, filepath.Join(e.mnt, e.keys.DirPrefix(d)))
		}
		step := fmt.Sprintf("f. `dsmount warm` of %d dirs (%d files)", w, warmedHi)
		cli.Logf("f: %s", step)
		g0, _ := e.counters()
		r := testenv.RunCLI(e.bin, nil, e.cfg.stepTimeout, args...)
		g1, _ := e.counters()
		var rep testenv.WarmReport
		if err := cliJSON(r, &rep); err != nil {
			e.fail(step, err)
		} else {
			e.rows = append(e.rows, row{step: step, figure: fmt.Sprintf("%s (%.0f files/s, %d chunks fetched, %d GETs at the store)",
				fmtDur(r.Duration), float64(rep.Files)/r.Duration.Seconds(), rep.ChunksFetched, g1.Gets-g0.Gets)})
			cli.Logf("warm: %+v in %v", rep, r.Duration)
		}
		e.rows = append(e.rows, e.rssRow("f. daemon RSS after the warm", ""))
	}
	if e.skipped("epoch") {
		return
	}
	n := int(math.Ceil(e.cfg.subset * float64(e.keys.Len())))
	rest := e.keys.Len() - warmedHi
	if rest < n {
		e.fail("f. cold epoch", fmt.Errorf("only %d files outside the warmed dirs, want %d", rest, n))
		return
	}
	rng := rand.New(rand.NewPCG(23, 2))
	perm := rng.Perm(rest)[:n]
	for i := range perm {
		perm[i] += warmedHi
	}
	step := fmt.Sprintf("f. cold epoch: %d other files, %d readers, every byte checked", n, e.cfg.readers)
	cli.Logf("f: %s", step)
	if err := testenv.DropCaches(); err != nil {
		e.fail(step, err)
		return
	}
	g0, _ := e.counters()
	t0 := time.Now()
	err := e.readFiles(perm)
	d := time.Since(t0)
	g1, _ := e.counters()
	if err != nil {
		e.fail(step, err)
	} else {
		e.rows = append(e.rows, row{step: step, figure: fmt.Sprintf("%s (%.0f files/s, %d GETs at the store)",
			fmtDur(d), float64(n)/d.Seconds(), g1.Gets-g0.Gets)})
		cli.Logf("epoch: %d files in %v", n, d)
	}
	e.rows = append(e.rows, e.rssRow("f. daemon RSS after the cold epoch", ""))
}

// readFiles reads the files of the given key indices through the mount,
// e.cfg.readers at a time, and checks each one's bytes.
func (e *env) readFiles(items []int) error {
	return testenv.Parallel(len(items), e.cfg.readers, func() func(int) error {
		want := make([]byte, e.cfg.size)
		return func(i int) error {
			key := e.keys.Key(items[i])
			data, err := os.ReadFile(filepath.Join(e.mnt, key))
			if err != nil {
				return err
			}
			testenv.GenS3ReadAt(key, want, 0)
			if !bytes.Equal(data, want) {
				return fmt.Errorf("%s: %d bytes through the mount differ from the store's %d", key, len(data), len(want))
			}
			return nil
		}
	})
}

// cliJSON decodes a dsmount command's --json output, wanting exit 0.
func cliJSON(r testenv.CLIResult, v any) error {
	if r.ExitCode != 0 {
		return fmt.Errorf("exit %d (timed out: %v) after %v: %s", r.ExitCode, r.TimedOut, r.Duration.Round(time.Millisecond),
			firstLine(strings.TrimSpace(r.Stderr)))
	}
	return json.Unmarshal([]byte(r.Stdout), v)
}

// g. warm --check of the whole tree.
func (e *env) check(c *carried) {
	if e.skipped("check") {
		return
	}
	const step = "g. `dsmount warm --check MNT` (whole tree)"
	cli.Logf("g: warm --check")
	r := testenv.RunCLI(e.bin, nil, e.cfg.stepTimeout, "warm", "--check", "--json", e.mnt)
	var wc testenv.WarmCheck
	if err := cliJSON(r, &wc); err != nil {
		e.fail(step, err)
		return
	}
	frac := 0.0
	if wc.FilesTotal > 0 {
		frac = float64(wc.FilesCached) / float64(wc.FilesTotal)
	}
	r2 := row{step: step, figure: fmt.Sprintf("%s (%.1f%% of files cached: %d of %d; %d of %d bytes)",
		fmtDur(r.Duration), 100*frac, wc.FilesCached, wc.FilesTotal, wc.BytesCached, wc.BytesTotal)}
	if wc.FilesTotal != int64(e.keys.Len()) {
		r2.result = fmt.Sprintf("WRONG: %d files, want %d", wc.FilesTotal, e.keys.Len())
	}
	e.rows = append(e.rows, r2)
	if e.cfg.size <= 4<<20 { // the default chunk size: one chunk per object
		c.cachedChunks = wc.FilesCached
	}
	cli.Logf("check: %+v in %v", wc, r.Duration)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
