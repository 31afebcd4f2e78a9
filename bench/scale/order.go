package scale

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/test/testenv"
)

// pySampler declares pyEpochs epochs through dsmount's OrderedSampler, as
// a training script would: absolute paths (as a torchvision ImageFolder
// over the mount has them), a sampler that yields a shuffle of every file
// by epoch (with set_epoch, like DistributedSampler; drawn before the
// timing), the time of each iter() that declares measured inside Python. The first declaration sends the
// dataset's path table; the later ones only indices into it. argv:
// mountpoint, the sorted relative paths, job, 1 to declare the next epoch
// too, the number of epochs.
const pySampler = `
import json, random, sys, time
t0 = time.monotonic()
from dsmount.sampler import OrderedSampler
mnt, listing, job, declare_next, epochs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1", int(sys.argv[5])
with open(listing) as f:
    paths = [mnt + "/" + line.rstrip("\n") for line in f]

class Shuffled:
    # Each epoch's permutation is drawn before the timing starts, as
    # torch's RandomSampler draws one with torch.randperm in milliseconds;
    # Python's random.shuffle of 1.28M takes most of a second, which is
    # not dsmount's cost.
    def __init__(self, n, epochs):
        self.n, self.epoch, self.perms = n, 0, []
        for e in range(epochs):
            idx = list(range(n))
            random.Random(e).shuffle(idx)
            self.perms.append(idx)
    def set_epoch(self, e):
        self.epoch = e
    def __len__(self):
        return self.n
    def __iter__(self):
        return iter(self.perms[self.epoch])

sampler = OrderedSampler(Shuffled(len(paths), epochs + 1), paths, mountpoint=mnt, job=job, strict=True, declare_next=declare_next)
t1 = time.monotonic()
declare_s, results = [], []
for e in range(epochs):
    sampler.set_epoch(e)
    t = time.monotonic()
    it = iter(sampler)
    declare_s.append(time.monotonic() - t)
    results.append(sampler.last_result or {})
res = results[0]
print(json.dumps({"setup_s": t1 - t0, "declare_s": declare_s, "declared": min(r.get("declared", 0) for r in results),
                  "next_declared": min(r.get("next_declared", 0) for r in results),
                  "skipped": max(r.get("skipped", 0) for r in results)}))
`

// pyEpochs is how many epochs pySampler declares: the first (with the path
// table) and two more.
const pyEpochs = 3

// pyResult is what pySampler prints.
type pyResult struct {
	SetupS       float64   `json:"setup_s"`
	DeclareS     []float64 `json:"declare_s"`
	Declared     int       `json:"declared"`
	NextDeclared int       `json:"next_declared"`
	Skipped      int       `json:"skipped"`
}

// writeLists writes the sorted relative paths and a shuffled order of
// them, one per line.
func (e *env) writeLists() (sorted, shuffled string, err error) {
	sorted, shuffled = filepath.Join(e.work, "paths.txt"), filepath.Join(e.work, "order.txt")
	write := func(name string, order []int) error {
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		w := bufio.NewWriterSize(f, 1<<20)
		for _, i := range order {
			w.WriteString(e.keys.Key(i))
			w.WriteByte('\n')
		}
		if err := w.Flush(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	n := e.keys.Len()
	ident := make([]int, n)
	for i := range ident {
		ident[i] = i
	}
	if err := write(sorted, ident); err != nil {
		return "", "", fmt.Errorf("path list: %w", err)
	}
	if err := write(shuffled, rand.New(rand.NewPCG(23, 1)).Perm(n)); err != nil {
		return "", "", fmt.Errorf("order list: %w", err)
	}
	return sorted, shuffled, nil
}

// e. Declaring a shuffled order of every path: CLI, then Python.
func (e *env) orders(c *carried) {
	viaCLI, py, pyNext := !e.skipped("order-cli"), !e.skipped("order-py"), !e.skipped("order-py-next")
	if !viaCLI && !py && !pyNext {
		return
	}
	n := e.keys.Len()
	var sorted, shuffled string
	err := e.en.guard(func() (err error) {
		sorted, shuffled, err = e.writeLists()
		return err
	})
	if err != nil {
		e.fail("e. declare an order", err)
		return
	}
	if viaCLI {
		step := fmt.Sprintf("e. `dsmount order` of %d shuffled paths (CLI)", n)
		cli.Logf("e: %s", step)
		g0, _ := e.counters()
		r := testenv.RunCLI(e.bin, nil, e.cfg.stepTimeout, "order", e.mnt, "--job", "bench-cli", "--epoch", "0", shuffled, "--json")
		g1, _ := e.counters()
		var res struct{ Declared, Skipped int }
		if err := cliJSON(r, &res); err != nil {
			e.fail(step, err)
		} else {
			c.jobs = append(c.jobs, "bench-cli")
			e.rows = append(e.rows, declaredRow(step, r.Duration, res.Declared, res.Skipped, n, 0,
				fmt.Sprintf("; %d GETs at the store meanwhile (prefetch)", g1.Gets-g0.Gets)))
			cli.Logf("order (CLI): %d declared in %v", res.Declared, r.Duration)
		}
		e.rows = append(e.rows, e.rssRow("e. daemon RSS after mount + find + one declared order (CLI)", "300"))
	}
	if py {
		e.pyDeclare(c, sorted, "bench-py", false,
			fmt.Sprintf("e. Python OrderedSampler, %d shuffled paths: the declaring iter(), timed in Python", n), 2*time.Second)
	}
	if pyNext {
		e.pyDeclare(c, sorted, "bench-py-next", true,
			fmt.Sprintf("e. Python OrderedSampler as by default: this epoch's and the next's (2 × %d paths), timed in Python", n), 0)
	}
	for _, job := range c.jobs {
		if r := testenv.RunCLI(e.bin, nil, time.Minute, "order", e.mnt, "--job", job, "--end"); r.ExitCode != 0 {
			e.notes = append(e.notes, fmt.Sprintf("ending job %s: exit %d: %s", job, r.ExitCode, firstLine(r.Stderr)))
		}
	}
	if len(c.jobs) > 0 {
		e.rows = append(e.rows, e.rssRow(fmt.Sprintf("e. daemon RSS after ending the %d jobs", len(c.jobs)), ""))
	}
	c.jobs = nil
}

// declaredRow is the row of a declaration that should keep n paths;
// bound 0 means no target.
func declaredRow(step string, d time.Duration, declared, skipped, n int, bound time.Duration, extra string) row {
	r := row{step: step, figure: fmt.Sprintf("%s (%d declared%s)", fmtDur(d), declared, extra)}
	if bound > 0 {
		r.target, r.result = "≤ "+fmtDur(bound), passMiss(d <= bound)
	}
	if declared != n || skipped != 0 {
		r.result = fmt.Sprintf("WRONG: %d declared, %d skipped, want %d", declared, skipped, n)
	}
	return r
}

// pyDeclare runs pySampler as a job and adds its rows.
func (e *env) pyDeclare(c *carried, sorted, job string, next bool, step string, bound time.Duration) {
	cli.Logf("e: %s", step)
	root, err := testenv.RepoRoot()
	if err != nil {
		e.fail(step, err)
		return
	}
	flag := "0"
	if next {
		flag = "1"
	}
	cmd := exec.Command("python3", "-c", pySampler, e.mnt, sorted, job, flag, strconv.Itoa(pyEpochs))
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "python"))
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	g0, _ := e.counters()
	t0 := time.Now()
	err = cmd.Run()
	total := time.Since(t0)
	g1, _ := e.counters()
	var res pyResult
	if err == nil {
		err = json.Unmarshal(out.Bytes(), &res)
	}
	if err != nil {
		e.fail(step, fmt.Errorf("python3: %w: %s", err, lastLine(stderr.String())))
		return
	}
	c.jobs = append(c.jobs, job)
	if len(res.DeclareS) != pyEpochs {
		e.fail(step, fmt.Errorf("python3 timed %d declarations, want %d", len(res.DeclareS), pyEpochs))
		return
	}
	secs := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	want := e.keys.Len()
	first, later := secs(res.DeclareS[0]), secs(slices.Max(res.DeclareS[1:]))
	for i, d := range []time.Duration{first, later} {
		label := step + ", first epoch (sends the path table)"
		extra := fmt.Sprintf(", %d next; whole process %s, of which start-up and reading the paths %s; %d GETs at the store meanwhile (prefetch)",
			res.NextDeclared, fmtDur(total), fmtDur(secs(res.SetupS)), g1.Gets-g0.Gets)
		if i == 1 {
			label = fmt.Sprintf("%s, each later epoch (the slowest of %d: indices only)", step, pyEpochs-1)
			extra = fmt.Sprintf(", %d next", res.NextDeclared)
		}
		r := declaredRow(label, d, res.Declared, res.Skipped, want, bound, extra)
		if next && res.NextDeclared != want && r.result == "" {
			r.result = fmt.Sprintf("WRONG: %d next declared, want %d", res.NextDeclared, want)
		}
		e.rows = append(e.rows, r)
	}
	cli.Logf("%s: %+v, process %v", job, res, total)
	e.rows = append(e.rows, e.rssRow(fmt.Sprintf("e. daemon RSS after job %s's declaration (%d jobs declared)", job, len(c.jobs)), ""))
}

// h. Stop, the cache's size on disk, and a remount on the same cache.
func (e *env) remount(c *carried) {
	if e.cfg.warmAll {
		const step = "h. `dsmount warm MNT` of every object (--warm-all)"
		cli.Logf("%s", step)
		r := testenv.RunCLI(e.bin, nil, e.cfg.stepTimeout, "warm", "--json", e.mnt)
		var rep testenv.WarmReport
		if err := cliJSON(r, &rep); err != nil {
			e.fail(step, err)
		} else {
			e.rows = append(e.rows, row{step: step, figure: fmt.Sprintf("%s (%d chunks fetched, %d already cached)",
				fmtDur(r.Duration), rep.ChunksFetched, rep.ChunksAlreadyCached)})
			if e.cfg.size <= 4<<20 {
				c.cachedChunks = rep.ChunksFetched + rep.ChunksAlreadyCached
			}
		}
	}
	e.problemLogs("first mount")
	cli.Logf("h: stopping the mount")
	t0 := time.Now()
	if err := e.m.StopErr(); err != nil {
		e.t.Fatalf("stopping the mount: %v", err)
	}
	e.rows = append(e.rows, row{step: "h. graceful stop (SIGTERM to exit)", figure: fmtDur(time.Since(t0))})
	idx, err1 := testenv.DirUsage(filepath.Join(e.cacheDir, "index"))
	all, err2 := testenv.DirUsage(e.cacheDir)
	if err1 != nil || err2 != nil {
		e.notes = append(e.notes, fmt.Sprintf("du of the cache: %v %v", err1, err2))
	}
	records := "unknown"
	if c.cachedChunks >= 0 {
		records = fmt.Sprint(c.cachedChunks)
	}
	e.rows = append(e.rows, row{step: "h. cache on disk (du): index / whole cache dir",
		figure: fmt.Sprintf("%s / %s (cached chunk records: %s)", fmtMB(idx), fmtMB(all), records)})
	if e.skipped("remount") {
		return
	}
	cli.Logf("h: remount")
	d, err := e.mount()
	if err != nil {
		e.fail("h. remount on the same cache", err)
		return
	}
	e.rows = append(e.rows, row{step: "h. remount on the same cache: start to mounted", figure: fmtDur(d), target: "≤ 1 s",
		result: passMiss(d <= time.Second)})
	r := row{step: "h. start-up with ≥ 1M cached chunk records", target: "≤ 1 s"}
	if c.cachedChunks >= 1_000_000 {
		r.figure, r.result = fmt.Sprintf("%s (%d records)", fmtDur(d), c.cachedChunks), passMiss(d <= time.Second)
	} else {
		why := "run with --warm-all"
		if e.cfg.warmAll {
			why = "the store has fewer objects"
		}
		r.figure, r.result = fmt.Sprintf("not measured: %s records (%s)", records, why), "n/a"
	}
	e.rows = append(e.rows, r, e.rssRow("h. daemon RSS after the remount", ""))
	cli.Logf("remounted in %v", d)
	// The cache counts its records in the background once the mount is
	// up; stats waits for that count.
	t0 = time.Now()
	if st, err := testenv.StatsErr(e.bin, e.mnt); err != nil || st.Mount.Files != e.keys.Len() {
		e.notes = append(e.notes, fmt.Sprintf("stats after the remount: %d files (want %d), %v", st.Mount.Files, e.keys.Len(), err))
	}
	e.rows = append(e.rows, row{step: "h. `dsmount stats` right after the remount (waits for the cache to count its records)", figure: fmtDur(time.Since(t0))},
		e.rssRow("h. daemon RSS after that count", ""))
	e.problemLogs("remount")
	if err := e.m.StopErr(); err != nil {
		e.notes = append(e.notes, "stopping the remount: "+firstLine(err.Error()))
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// problemLogs notes what the daemon of the mount logged at WARN or ERROR
// (or not as JSON: a panic).
func (e *env) problemLogs(which string) {
	logs := e.m.ProblemLogs()
	if len(logs) == 0 {
		e.notes = append(e.notes, fmt.Sprintf("The %s's daemon logged nothing at WARN or ERROR.", which))
		return
	}
	e.notes = append(e.notes, fmt.Sprintf("The %s's daemon logged %d WARN/ERROR or non-JSON lines; the first: %s",
		which, len(logs), strings.Join(logs[:min(3, len(logs))], " | ")))
}
