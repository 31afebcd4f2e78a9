package ranges

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// cgroupSlack is what the readers' memory cgroup allows beyond what they
// hold when ready and the page cache bound: their few allocations while
// reading (a window's arrays, the interpreter's).
const cgroupSlack = 16 << 20

// readers is --readers processes of reader.py, started and waiting for
// "go", in a memory cgroup of their own.
type readers struct {
	e     *env
	cg    *testenv.MemCgroup
	procs []*readerProc
	unit  string // what a reader counts: "window" (reader.py) or "record" (lmdb_reader.py)
	tot   totals // what they did, once run
	cgNote
}

// cgNote is what the readers' memory cgroup held and allowed.
type cgNote struct {
	Limit  int64 `json:"limit_bytes"`          // 0: unlimited
	Ready  int64 `json:"at_ready_bytes"`       // charged when every reader was ready (the interpreters, numpy)
	File   int64 `json:"page_cache_end_bytes"` // page cache charged at the end
	Peak   int64 `json:"peak_bytes,omitempty"`
	Limits int64 `json:"limit_hits"` // times usage hit the limit
}

type readerProc struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr bytes.Buffer
}

// readerResult is one reader's JSON line: reader.py's windows and
// batches, or lmdb_reader.py's records and their bytes.
type readerResult struct {
	Windows  int64           `json:"windows"`
	Batches  int64           `json:"batches"`
	Records  int64           `json:"records"`
	Bytes    int64           `json:"bytes"`
	Bad      int64           `json:"bad"`
	FirstBad json.RawMessage `json:"first_bad"`
	Elapsed  float64         `json:"elapsed"`
	// A declared reader's (reader.py --declare): seconds in get_batch,
	// seconds its declaration took, and the items declared.
	Wait     float64 `json:"wait"`
	DeclareS float64 `json:"declare_s"`
	Declared int64   `json:"declared"`
}

// startReaders starts the readers over path in a fresh memory cgroup and
// waits until every one has imported numpy. With bound > 0 the cgroup's
// limit is then set to what they hold plus bound (and cgroupSlack): their
// page cache, the file's pages they map included, can't grow past about
// bound. Pages already in the page cache, charged elsewhere, are not
// counted (a pass that wants the file read from disk drops the caches
// first).
func (e *env) startReaders(path string, bound int64) *readers {
	c := e.cfg
	return e.startProcs(bound, "window", func(r int) []string {
		return []string{python, e.script, "--path", path, "--seed", strconv.FormatUint(c.seed, 10),
			"--rng-seed", strconv.FormatInt(c.rngSeed*1000+int64(r), 10), "--batch", strconv.Itoa(c.batch), "--block", strconv.Itoa(c.block)}
	})
}

// startDeclared starts the readers as declared jobs (reader.py
// --declare), one job per reader, each sleeping workMS per window.
func (e *env) startDeclared(path string, bound int64, workMS float64) *readers {
	c := e.cfg
	steps := strconv.Itoa(c.declaredSteps)
	return e.startProcs(bound, "window", func(r int) []string {
		return []string{python, e.script, "--path", path, "--seed", strconv.FormatUint(c.seed, 10),
			"--rng-seed", strconv.FormatInt(c.rngSeed*1000+int64(r), 10), "--batch", strconv.Itoa(c.batch), "--block", strconv.Itoa(c.block),
			"--declare", fmt.Sprintf("bench-%d", r), "--steps", steps, "--work-ms", strconv.FormatFloat(workMS, 'f', 4, 64)}
	})
}

// startProcs starts --readers processes of the command line args(r) as
// startReaders does (bound likewise); unit is what they count.
func (e *env) startProcs(bound int64, unit string, args func(r int) []string) *readers {
	c := e.cfg
	e.runs++
	cg, err := testenv.NewMemCgroup(e.T, fmt.Sprintf("benchranges-%d-%d", os.Getpid(), e.runs), 0)
	if err != nil {
		e.T.Fatalf("%v", err)
	}
	rs := &readers{e: e, cg: cg, unit: unit}
	for r := 0; r < c.readers; r++ {
		argv := cg.Wrap(args(r)...)
		p := &readerProc{cmd: exec.Command(argv[0], argv[1:]...)}
		// Killed when this program exits; the signal survives the
		// wrapper's exec.
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		// The repository's python/ for reader.py --declare's dsmount.
		p.cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(e.repo, "python"), "PYTHONDONTWRITEBYTECODE=1", "OMP_NUM_THREADS=1")
		p.cmd.Stderr = &p.stderr
		out, err := p.cmd.StdoutPipe()
		if err == nil {
			p.in, err = p.cmd.StdinPipe()
		}
		if err == nil {
			err = p.cmd.Start()
		}
		if err != nil {
			e.T.Fatalf("starting reader %d: %v", r, err)
		}
		e.T.Cleanup(func() {
			if p.cmd.ProcessState == nil {
				p.cmd.Process.Kill()
			}
		})
		p.out = bufio.NewScanner(out)
		rs.procs = append(rs.procs, p)
	}
	for r, p := range rs.procs {
		if !p.out.Scan() || p.out.Text() != "ready" {
			p.cmd.Wait()
			e.T.Fatalf("reader %d did not get ready (%q): %v\nstderr: %s", r, p.out.Text(), p.out.Err(), lastLines(p.stderr.String(), 20))
		}
	}
	st, err := cg.Stats()
	if err != nil {
		e.T.Fatalf("readers' cgroup: %v", err)
	}
	rs.Ready = st.Usage
	if bound > 0 {
		rs.Limit = st.Usage + cgroupSlack + bound
		if err := cg.SetLimit(rs.Limit); err != nil {
			e.T.Fatalf("%v", err)
		}
	}
	return rs
}

// totals is what the readers did in one timed run: windows (or records)
// and batches, and the records' bytes (0 for windows).
type totals struct {
	windows, batches, bytes int64
	wall                    time.Duration // from "go" to the last reader's answer
	// Declared readers: their time in get_batch over their time, the
	// slowest declaration, and the items declared, all readers.
	waitShare, declareS float64
	declared            int64
}

// run lets the readers read for seconds and collects their counts; a
// wrong token, a reader that fails or one the OOM killer killed ends the
// program. The cgroup is removed after.
func (rs *readers) run(seconds float64) totals {
	t := rs.e.T
	start := time.Now()
	for r, p := range rs.procs {
		if _, err := fmt.Fprintf(p.in, "go %g\n", seconds); err != nil {
			t.Fatalf("reader %d: %v", r, err)
		}
	}
	var tot totals
	for r, p := range rs.procs {
		var res readerResult
		ok := p.out.Scan()
		if ok {
			ok = json.Unmarshal(p.out.Bytes(), &res) == nil
		}
		p.in.Close()
		err := p.cmd.Wait()
		if !ok || err != nil {
			st, _ := rs.cg.Stats()
			t.Fatalf("reader %d: %v, answer %q (cgroup: %+v)\nstderr: %s", r, err, p.out.Text(), st, lastLines(p.stderr.String(), 20))
		}
		if res.Bad > 0 {
			t.Fatalf("reader %d: %d of %d %ss were wrong; the first: %s", r, res.Bad, res.Windows+res.Records, rs.unit, res.FirstBad)
		}
		tot.windows += res.Windows + res.Records
		tot.batches += res.Batches
		tot.bytes += res.Bytes
		if res.Elapsed > 0 {
			tot.waitShare += res.Wait / res.Elapsed / float64(len(rs.procs))
		}
		tot.declareS = max(tot.declareS, res.DeclareS)
		tot.declared += res.Declared
	}
	tot.wall = time.Since(start)
	st, err := rs.cg.Stats()
	if err != nil {
		t.Fatalf("readers' cgroup: %v", err)
	}
	if st.OOMs > 0 {
		t.Fatalf("the OOM killer killed %d processes in the readers' cgroup (limit %d bytes)", st.OOMs, rs.Limit)
	}
	rs.File, rs.Peak, rs.Limits = st.File, st.Peak, st.Limits
	rs.cg.Remove()
	return tot
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
