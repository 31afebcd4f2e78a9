package measure

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/test/testenv"
)

// Pass is what one timed pass read: how many files, how many bytes, in
// how long.
type Pass struct {
	Files   int64
	Bytes   int64
	Elapsed time.Duration
}

// FilesPerSec is the pass's rate in files.
func (p Pass) FilesPerSec() float64 { return float64(p.Files) / p.Elapsed.Seconds() }

// MBPerSec is the pass's rate in MB (10^6 bytes).
func (p Pass) MBPerSec() float64 { return float64(p.Bytes) / 1e6 / p.Elapsed.Seconds() }

// RawGets fetches every name under prefix in bucket with plain GetObject
// calls, par in flight, no filesystem (testenv.ParallelGets; sizes as
// there): the store's own rate, the reference the read benchmarks measure
// dsmount against.
func RawGets(client *s3.Client, bucket, prefix string, names []string, sizes []int64, par int) (Pass, error) {
	n, el, err := testenv.ParallelGets(context.Background(), client, bucket, prefix, names, sizes, par)
	return Pass{Files: int64(len(names)), Bytes: n, Elapsed: el}, err
}

// Usage is what a pass cost. On these 2-core machines MinIO, toxiproxy,
// the daemon and the readers share the cores, so a ratio means little
// without knowing who spent the CPU.
type Usage struct {
	GETs    int64   // the store's GetObject requests during the pass
	CPU     float64 // cores busy on the whole machine during the pass
	ProcCPU float64 // CPU seconds of the process doing the work (this program, or the daemon); -1: none
	// StoreCPU is the CPU seconds MinIO and toxiproxy spent during the
	// pass: what the same GETs cost the store, pass by pass.
	StoreCPU float64
}

// Store is the store side a Meter reads: its GETs so far and the CPU
// seconds its processes have used so far.
type Store interface {
	Gets() int64
	CPU() float64
}

// Meter measures a Usage from its start to Stop.
type Meter struct {
	store         Store
	proc          func() float64
	gets          int64
	machine       testenv.CPUSnapshot
	proc0, store0 float64
}

// Start starts measuring: the store's GETs and CPU, the machine's CPU,
// and proc's CPU seconds (nil: no process; ProcCPU is then -1).
func Start(store Store, proc func() float64) *Meter {
	m := &Meter{store: store, proc: proc, gets: store.Gets(), machine: testenv.MachineCPU(), store0: store.CPU()}
	if proc != nil {
		m.proc0 = proc()
	}
	return m
}

// Stop is the usage since Start.
func (m *Meter) Stop() Usage {
	u := Usage{CPU: testenv.MachineCPU().BusySince(m.machine), ProcCPU: -1, StoreCPU: m.store.CPU() - m.store0}
	if m.proc != nil {
		u.ProcCPU = m.proc() - m.proc0
	}
	u.GETs = m.store.Gets() - m.gets
	return u
}

// Self is this program's CPU seconds so far, for Start.
func Self() float64 { return testenv.SelfCPU() }

// Proc is a function giving process pid's CPU seconds so far, for Start.
func Proc(pid int) func() float64 { return func() float64 { return testenv.ProcCPU(pid) } }

// Join formats every value of v with format, separated by sep.
func Join(v []float64, format, sep string) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(s, sep)
}

// List formats every value of v with format, comma-separated: the
// per-round figures after a median.
func List(v []float64, format string) string { return Join(v, format, ", ") }

// Ls runs `ls ARGS` (LC_ALL=C, so that its output does not depend on the
// locale) with its output to out, and returns its wall time: the listing
// benchmarks of hot and scale.
func Ls(out io.Writer, args ...string) (time.Duration, error) {
	cmd := exec.Command("ls", args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Stdout = out
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	el := time.Since(start)
	if err != nil {
		return el, fmt.Errorf("ls %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return el, nil
}
