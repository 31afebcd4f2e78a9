package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A reader process (this program run as `soak reader`) is one training
// job: it reads its files through the mount, --epochs times in a new
// shuffled order each, with --workers goroutines taking the next path in
// turn, and checks each file's size and CRC-32C against --sums. With
// --declare it declares each epoch's order and the next with its pid
// (`dsmount order MP --job J --epoch E LIST --next NEXT --pid PID`), and
// with --end ends the job when done. Each file's page cache is dropped
// before it is read, so every read reaches the daemon.
//
// It reports on stdout, one JSON event a line (see event): every read
// that failed, returned wrong bytes or took over a second, its progress,
// and each epoch's summary.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// slowRead is how long a read takes to be reported as slow.
const slowRead = time.Second

// event is one line of a reader's stdout.
type event struct {
	E     string `json:"e"` // read-error, wrong, slow, declare-error, progress, epoch
	Job   string `json:"job"`
	Path  string `json:"path,omitempty"`
	Start int64  `json:"start,omitempty"` // unix ns
	End   int64  `json:"end,omitempty"`
	Err   string `json:"err,omitempty"`
	// progress and epoch: files and bytes verified so far by this
	// process; epoch: the epoch done.
	Files int64 `json:"files,omitempty"`
	Bytes int64 `json:"bytes,omitempty"`
	Epoch int   `json:"epoch,omitempty"`
}

type sum struct {
	size int64
	crc  uint32
}

type readerFlags struct {
	mp, bin, sums, job, tmp string
	epochs, epoch0, workers int
	seed                    uint64
	frac                    float64
	declare, end            bool
}

func readerArgs(f readerFlags) []string {
	return []string{"reader", "--mp", f.mp, "--bin", f.bin, "--sums", f.sums, "--job", f.job, "--tmp", f.tmp,
		"--epochs", strconv.Itoa(f.epochs), "--epoch0", strconv.Itoa(f.epoch0), "--workers", strconv.Itoa(f.workers),
		"--seed", strconv.FormatUint(f.seed, 10), "--fraction", strconv.FormatFloat(f.frac, 'g', -1, 64),
		"--declare=" + strconv.FormatBool(f.declare), "--end=" + strconv.FormatBool(f.end)}
}

func readerMain(args []string) int {
	var f readerFlags
	fs := flag.NewFlagSet("soak reader", flag.ContinueOnError)
	fs.StringVar(&f.mp, "mp", "", "the mount")
	fs.StringVar(&f.bin, "bin", "", "the dsmount binary")
	fs.StringVar(&f.sums, "sums", "", `"SIZE CRC32C PATH" lines`)
	fs.StringVar(&f.job, "job", "", "the job's name")
	fs.StringVar(&f.tmp, "tmp", "", "a directory for the order files")
	fs.IntVar(&f.epochs, "epochs", 1, "epochs to read")
	fs.IntVar(&f.epoch0, "epoch0", 0, "the first epoch's number")
	fs.IntVar(&f.workers, "workers", 4, "reading goroutines")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the subset and the orders")
	fs.Float64Var(&f.frac, "fraction", 1, "the share of the dataset the job reads")
	fs.BoolVar(&f.declare, "declare", true, "declare each epoch's order with this process's pid")
	fs.BoolVar(&f.end, "end", false, "end the job (dsmount order --end) when done")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	sums, paths, err := loadSums(f.sums)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak reader:", err)
		return 2
	}
	out := &eventWriter{w: os.Stdout, job: f.job}
	rng := rand.New(rand.NewPCG(f.seed, 0x50a6))
	if f.frac < 1 {
		rng.Shuffle(len(paths), func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })
		paths = paths[:max(1, int(float64(len(paths))*f.frac))]
	}
	orders := make([][]string, f.epochs+1)
	for e := range orders {
		orders[e] = append([]string(nil), paths...)
		rng.Shuffle(len(paths), func(i, j int) { orders[e][i], orders[e][j] = orders[e][j], orders[e][i] })
	}
	var files, nbytes atomic.Int64
	for e := 0; e < f.epochs; e++ {
		epoch := f.epoch0 + e
		if f.declare {
			f.declareOrder(out, epoch, orders[e], orders[e+1])
		}
		readOrder(out, f.mp, orders[e], sums, f.workers, &files, &nbytes)
		out.emit(event{E: "epoch", Epoch: epoch, Files: files.Load(), Bytes: nbytes.Load()})
	}
	if f.end {
		start := time.Now()
		if r, err := exec.Command(f.bin, "order", f.mp, "--job", f.job, "--end").CombinedOutput(); err != nil {
			out.emit(event{E: "declare-error", Start: start.UnixNano(), End: time.Now().UnixNano(),
				Err: fmt.Sprintf("order --end: %v: %s", err, strings.TrimSpace(string(r)))})
		}
	}
	return 0
}

// declareOrder declares epoch's order and the next one's, owned by this
// process.
func (f readerFlags) declareOrder(out *eventWriter, epoch int, cur, next []string) {
	start := time.Now()
	fail := func(err error) {
		out.emit(event{E: "declare-error", Start: start.UnixNano(), End: time.Now().UnixNano(), Err: err.Error()})
	}
	lists := [2]string{}
	for i, order := range [][]string{cur, next} {
		lists[i] = filepath.Join(f.tmp, fmt.Sprintf("%s-%d-%d-%d", f.job, os.Getpid(), epoch, i))
		if err := os.WriteFile(lists[i], []byte(strings.Join(order, "\n")+"\n"), 0o644); err != nil {
			fail(err)
			return
		}
		defer os.Remove(lists[i])
	}
	cmd := exec.Command(f.bin, "order", f.mp, "--job", f.job, "--epoch", strconv.Itoa(epoch), lists[0],
		"--next", lists[1], "--pid", strconv.Itoa(os.Getpid()))
	if r, err := cmd.CombinedOutput(); err != nil {
		fail(fmt.Errorf("dsmount order: %v: %s", err, strings.TrimSpace(string(r))))
	}
}

// readOrder reads every path of order with workers goroutines, checking
// each against sums; files and nbytes count what was verified.
func readOrder(out *eventWriter, mp string, order []string, sums map[string]sum, workers int, files, nbytes *atomic.Int64) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 1<<20)
			for {
				i := int(next.Add(1) - 1)
				if i >= len(order) {
					return
				}
				p := order[i]
				want := sums[p]
				start := time.Now()
				data, err := readDropped(filepath.Join(mp, filepath.FromSlash(p)), want.size, buf)
				end := time.Now()
				ev := event{Path: p, Start: start.UnixNano(), End: end.UnixNano()}
				switch {
				case err != nil:
					ev.E, ev.Err = "read-error", err.Error()
				case int64(len(data)) != want.size || crc32.Checksum(data, castagnoli) != want.crc:
					ev.E, ev.Err = "wrong", fmt.Sprintf("read %d bytes, CRC-32C %08x; want %d bytes, %08x",
						len(data), crc32.Checksum(data, castagnoli), want.size, want.crc)
				default:
					n := files.Add(1)
					nbytes.Add(int64(len(data)))
					if n%50 == 0 {
						out.emit(event{E: "progress", Files: n, Bytes: nbytes.Load()})
					}
					if end.Sub(start) >= slowRead {
						ev.E = "slow"
					}
				}
				if ev.E != "" {
					out.emit(ev)
				}
				buf = data[:0]
			}
		}()
	}
	wg.Wait()
}

// readDropped opens path, drops its pages from the page cache and reads
// it whole into buf (grown to size+1, so a file longer than it should be
// shows).
func readDropped(path string, size int64, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return nil, fmt.Errorf("fadvise: %w", err)
	}
	if int64(cap(buf)) < size+1 {
		buf = make([]byte, 0, size+1)
	}
	buf = buf[:size+1]
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return buf[:n], nil
}

func loadSums(path string) (map[string]sum, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	sums := map[string]sum{}
	var paths []string
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 {
			return nil, nil, fmt.Errorf("%s: bad line %q", path, line)
		}
		size, err1 := strconv.ParseInt(f[0], 10, 64)
		crc, err2 := strconv.ParseUint(f[1], 16, 32)
		if err1 != nil || err2 != nil {
			return nil, nil, fmt.Errorf("%s: bad line %q", path, line)
		}
		sums[f[2]] = sum{size: size, crc: uint32(crc)}
		paths = append(paths, f[2])
	}
	return sums, paths, nil
}

// eventWriter writes events as JSON lines, one write each.
type eventWriter struct {
	mu  sync.Mutex
	w   io.Writer
	job string
}

func (o *eventWriter) emit(ev event) {
	ev.Job = o.job
	b, _ := json.Marshal(ev)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.w.Write(append(b, '\n'))
}

// readerProc is a reader process as the soak sees it.
type readerProc struct {
	job    string
	cmd    *exec.Cmd
	done   chan struct{} // closed when the process has exited and its output is read
	files  atomic.Int64  // verified so far (its last progress)
	stderr strings.Builder
}

// startReader starts a reader process; its events go to led.
func startReader(self string, f readerFlags, led *ledger) (*readerProc, error) {
	cmd := exec.Command(self, readerArgs(f)...)
	// Killed if this program dies; it is a child the soak must not leave.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &readerProc{job: f.job, cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &p.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	led.started(p)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var ev event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				led.record(event{E: "read-error", Job: f.job, Err: fmt.Sprintf("reader wrote %q", sc.Text()),
					Start: time.Now().UnixNano(), End: time.Now().UnixNano()})
				continue
			}
			if ev.E == "progress" || ev.E == "epoch" {
				led.progress(p, ev.Files, ev.Bytes)
				p.files.Store(ev.Files)
				continue
			}
			led.record(ev)
		}
		cmd.Wait()
		led.exited(p)
		close(p.done)
	}()
	return p, nil
}

// kill SIGKILLs the process and waits for it.
func (p *readerProc) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// wait waits up to timeout for the process to exit; it reports whether
// it exited 0. A process still running then is killed.
func (p *readerProc) wait(timeout time.Duration) (ok bool, err error) {
	tm := time.NewTimer(timeout)
	defer tm.Stop()
	select {
	case <-p.done:
	case <-tm.C:
		p.kill()
		return false, fmt.Errorf("reader %s still running after %v (killed)", p.job, timeout)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		return false, fmt.Errorf("reader %s exited with %v: %s", p.job, p.cmd.ProcessState, strings.TrimSpace(p.stderr.String()))
	}
	return true, nil
}
