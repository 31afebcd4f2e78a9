package hot

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dsmount/dsmount/bench/internal/benchenv"
	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/bench/internal/measure"
	"github.com/dsmount/dsmount/test/testenv"
)

// Summary is the subcommand's line in bench's --help.
const Summary = "hot reads of a warmed mount of a local directory against the directory"

type config struct {
	benchenv.Dataset
	readers               int
	largeMiB              int64
	fastPath              string
	rounds                int
	skipLoader, skipLS    bool
	unbuffered, readBytes bool
	skipLarge             bool
	seed                  int64
	cacheSize             string
	bin                   string
	python                string
	workers, batch        int
	diskReaders           []int
	clientCPU             int
}

// Main runs the benchmark with the command line args (after "hot").
func Main(args []string) error {
	var c config
	fs := cli.NewFlagSet("hot", Summary)
	c.Dataset.AddFlags(fs)
	fs.IntVar(&c.readers, "readers", 8, "parallel readers in the hot epoch (pass 1)")
	fs.Int64Var(&c.largeMiB, "large-mib", 256, "size of the large file in MiB (pass 2)")
	fs.BoolVar(&c.unbuffered, "loader-unbuffered", false, "the DataLoader's dataset opens files with buffering=0 (no isatty() ioctl per open)")
	fs.BoolVar(&c.readBytes, "loader-read-bytes", false, "the DataLoader's dataset reads files with dsmount.read_bytes (no ioctl, no fstat)")
	fs.StringVar(&c.fastPath, "fast-path", "auto", "dsmount mount --fast-path=MODE (auto, no-open, passthrough, off); '' leaves the flag off")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds of every pass; each side's best is kept")
	fs.BoolVar(&c.skipLoader, "skip-loader", false, "skip pass 3 (torch DataLoader)")
	fs.BoolVar(&c.skipLS, "skip-ls", false, "skip pass 4 (ls -lR)")
	fs.BoolVar(&c.skipLarge, "skip-large", false, "skip pass 2 (dd of the large file)")
	fs.Int64Var(&c.seed, "seed", 1, "shuffle seed")
	fs.StringVar(&c.cacheSize, "cache-size", "20G", "dsmount mount --cache-size")
	fs.StringVar(&c.bin, "bin", "", "a dsmount binary to use (default: go build ./cmd/dsmount of this checkout)")
	fs.StringVar(&c.python, "python", "/usr/bin/python3", "Python with torch, for pass 3")
	fs.IntVar(&c.workers, "loader-workers", 4, "DataLoader num_workers (pass 3)")
	fs.IntVar(&c.batch, "loader-batch", 32, "DataLoader batch_size (pass 3)")
	diskReaders := fs.String("disk-readers", "8,32", "reader counts of the cache-disk epoch (pass 1c), comma-separated; '' skips it")
	fs.IntVar(&c.clientCPU, "client-cpu", -1, "pin this program (its readers) and the daemon to this CPU, as a node's client side; -1: no pinning")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	var err error
	if *diskReaders != "" {
		if c.diskReaders, err = cli.ParseList(*diskReaders, strconv.Atoi); err != nil {
			return cli.Usagef("--disk-readers: %v", err)
		}
	}
	if c.rounds < 1 {
		c.rounds = 1
	}
	if c.largeMiB <= 0 {
		c.skipLarge = true
	}
	// Progress lines go to stderr, each after the time.
	logger := log.New(os.Stderr, "benchhot: ", log.Ltime)

	t := testenv.NewProgramT("dsmount-benchhot")
	defer t.Close()
	if c.clientCPU >= 0 {
		// The daemon, started later, inherits the mask.
		if err := testenv.Pin(0, []int{c.clientCPU}); err != nil {
			t.Fatalf("--client-cpu: %v", err)
		}
	}
	work := t.TempDir()
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatalf("%v", err)
	}

	// The dataset.
	src := filepath.Join(work, "src")
	t0 := time.Now()
	paths := benchenv.Generate(t, src, c.Spec(11))
	small := append([]string(nil), paths...)
	// The large file is a dataset of its own, on its own mount: the fast
	// path is chosen per mount from its files' sizes (a dataset of large
	// files gets passthrough, one of small files no-open).
	srcL := filepath.Join(work, "src-large")
	var large string
	if !c.skipLarge {
		lp := benchenv.Generate(t, srcL, testenv.DatasetSpec{Seed: 12, LargeFiles: []int64{c.largeMiB << 20}})
		large = lp[0]
		// The same file in the small files' dataset too (a hard link: the
		// same bytes), for pass 2c's mixed mount.
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(mixedLarge)), 0o755); err != nil {
			t.Fatalf("%v", err)
		}
		if err := os.Link(filepath.Join(srcL, large), filepath.Join(src, mixedLarge)); err != nil {
			t.Fatalf("%v", err)
		}
	}
	sort.Strings(small)
	logger.Printf("dataset: %d files of %d B%s in %s, generated in %v", len(small), c.FileSize,
		map[bool]string{true: "", false: fmt.Sprintf(" + %d MiB file", c.largeMiB)}[c.skipLarge], src, time.Since(t0).Round(time.Millisecond))

	// The binary, and whether it knows --fast-path.
	bin := c.bin
	if bin == "" {
		if bin, err = testenv.BuildDsmount(filepath.Join(work, "bin")); err != nil {
			t.Fatalf("build: %v", err)
		}
	}
	help := testenv.RunCLI(bin, nil, 30*time.Second, "mount", "--help")
	hasFastPath := strings.Contains(help.Stdout+help.Stderr, "--fast-path")
	if c.fastPath != "" && !hasFastPath {
		t.Fatalf("%s mount --help shows no --fast-path flag; pass --fast-path '' to measure this binary without it", bin)
	}

	// Reference sizes and checksums (untimed); this also leaves the source
	// in the page cache.
	t0 = time.Now()
	sizes, crcs, err := testenv.Checksums(src, small, c.readers)
	if err != nil {
		t.Fatalf("checksumming the source: %v", err)
	}
	var smallBytes int64
	for _, n := range sizes {
		smallBytes += n
	}
	var largeSize int64
	var largeCRC uint32
	if large != "" {
		if largeSize, largeCRC, err = testenv.CRCFile(filepath.Join(srcL, large)); err != nil {
			t.Fatalf("%v", err)
		}
	}
	logger.Printf("source checksummed (CRC-32C) in %v", time.Since(t0).Round(time.Millisecond))

	// The mount.
	mnt := filepath.Join(work, "mnt")
	os.MkdirAll(mnt, 0o755)
	mountArgs := []string{"--cache-dir", filepath.Join(work, "cache"), "--cache-size", c.cacheSize}
	if c.fastPath != "" {
		mountArgs = append(mountArgs, "--fast-path="+c.fastPath)
	}
	m := testenv.StartMount(t, testenv.MountConfig{Bin: bin, Source: src, Mountpoint: mnt, Args: mountArgs})
	pid := m.Pid()
	fastPath := "(not reported)"
	if st, err := statsJSON(bin, mnt); err != nil {
		t.Fatalf("%v", err)
	} else if fp := fastPathOf(st, mnt); fp != "" {
		fastPath = fp
	}
	logger.Printf("mounted (pid %d): dsmount mount %s %s %s; stats fast_path: %s", pid, src, mnt, strings.Join(mountArgs, " "), fastPath)

	// Fill the chunk cache, then one untimed checked pass through the mount
	// (fills the mount's page cache too).
	wr := testenv.RunCLI(bin, nil, 30*time.Minute, "warm", mnt, "--json")
	if wr.ExitCode != 0 {
		t.Fatalf("dsmount warm %s: exit %d\n%s%s", mnt, wr.ExitCode, wr.Stdout, wr.Stderr)
	}
	logger.Printf("dsmount warm: %v: %s", wr.Duration.Round(time.Millisecond), strings.TrimSpace(wr.Stdout))
	el, err := verifyTree(mnt, small, c.readers, c.seed+1000, sizes, crcs)
	if err != nil {
		t.Fatalf("checking the files through the mount: %v", err)
	}
	logger.Printf("checked %d files through the mount (size and CRC-32C) in %v", len(small), el.Round(time.Millisecond))
	var mntL, largeFastPath string
	pidL := 0
	if large != "" {
		mntL = filepath.Join(work, "mnt-large")
		os.MkdirAll(mntL, 0o755)
		argsL := []string{"--cache-dir", filepath.Join(work, "cache-large"), "--cache-size", c.cacheSize}
		if c.fastPath != "" {
			argsL = append(argsL, "--fast-path="+c.fastPath)
		}
		mL := testenv.StartMount(t, testenv.MountConfig{Bin: bin, Source: srcL, Mountpoint: mntL, Args: argsL})
		pidL = mL.Pid()
		fpL := "(not reported)"
		if st, err := statsJSON(bin, mntL); err == nil && fastPathOf(st, mntL) != "" {
			fpL = fastPathOf(st, mntL)
		}
		largeFastPath = fpL
		logger.Printf("mounted the large file (pid %d): dsmount mount %s %s %s; stats fast_path: %s", pidL, srcL, mntL, strings.Join(argsL, " "), fpL)
		t0 := time.Now()
		n, crc, err := testenv.CRCFile(filepath.Join(mntL, large))
		if err != nil || n != largeSize || crc != largeCRC {
			t.Fatalf("%s through the mount: %d bytes CRC-32C %08x (err %v); the source: %d bytes %08x", large, n, crc, err, largeSize, largeCRC)
		}
		logger.Printf("checked %s through the mount (CRC-32C) in %v", large, time.Since(t0).Round(time.Millisecond))
		// That read filled the cache through the daemon; the next open is the
		// first passthrough one, and reads the cache file from disk (written
		// with O_DIRECT). One untimed re-read, checked, warms the page cache
		// the way the checksumming above warmed the source's.
		t0 = time.Now()
		if n, crc, err := testenv.CRCFile(filepath.Join(mntL, large)); err != nil || n != largeSize || crc != largeCRC {
			t.Fatalf("%s re-read through the mount: %d bytes CRC-32C %08x (err %v); the source: %d bytes %08x", large, n, crc, err, largeSize, largeCRC)
		}
		logger.Printf("re-read %s through the mount (CRC-32C, untimed warm-up) in %v", large, time.Since(t0).Round(time.Millisecond))
	}
	stats0, _ := statsJSON(bin, mnt)

	var passes []*pass
	var cpuPerK []float64 // daemon CPU s per 1,000 files, per timed mount epoch of pass 1

	// Pass 1: hot epoch.
	p1 := &pass{name: fmt.Sprintf("1. hot epoch, %d x %d B, %d readers", len(small), c.FileSize, c.readers),
		unit: "files/s", target: 0.9, refName: "direct"}
	epoch := func(root string, order []string) float64 {
		return epochRate(t, "hot epoch", root, order, c.readers, smallBytes)
	}
	for r := 0; r < c.rounds; r++ {
		order := testenv.Shuffled(small, c.seed+int64(r))
		cpu := p1.round(r, pid, func() float64 { return epoch(src, order) }, func() float64 { return epoch(mnt, order) })
		cpuPerK = append(cpuPerK, cpu/float64(len(order))*1000)
		logger.Printf("pass 1 round %d: direct %.0f files/s, mount %.0f files/s (daemon %.3f CPU-s/1000 files)", r+1, p1.ref[r], p1.mnt[r], cpuPerK[r])
	}
	passes = append(passes, p1)

	// Pass 1c: the same epoch from the cache disk.
	for _, n := range c.diskReaders {
		passes = append(passes, cacheDiskPass(t, n, c, pid, src, mnt, small, smallBytes, "", work, logger.Printf))
	}
	// Pass 1d: the same, the order declared.
	for _, n := range c.diskReaders {
		passes = append(passes, cacheDiskPass(t, n, c, pid, src, mnt, small, smallBytes, bin, work, logger.Printf))
	}

	// Pass 2: dd of the large file.
	if large != "" {
		srcLarge, mntLarge := filepath.Join(srcL, large), filepath.Join(mntL, large)
		pid := pidL
		p2 := &pass{name: fmt.Sprintf("2. dd bs=1M, %d MiB file, page cache warm", c.largeMiB), unit: "MB/s", target: 0.95, refName: "direct"}
		p2.notes = append(p2.notes, fmt.Sprintf("the large file is its own dataset on its own mount (%s), fast path %s", mntL, largeFastPath))
		p2d := &pass{name: "2b. same, mount's page cache dropped", unit: "MB/s", refName: "direct warm"}
		ddRate := func(file string) float64 {
			n, sec, _, err := testenv.DD(file)
			if err != nil {
				t.Fatalf("%v", err)
			}
			if n != largeSize {
				t.Fatalf("dd %s copied %d bytes; the file has %d", file, n, largeSize)
			}
			return float64(n) / 1e6 / sec
		}
		var resWarm, resDropped, resSrc []float64
		dcpu := []float64{}
		for r := 0; r < c.rounds; r++ {
			sides(r, func() {
				f, _ := testenv.Residency(srcLarge)
				resSrc = append(resSrc, f)
				p2.ref = append(p2.ref, ddRate(srcLarge))
			}, func() {
				f, err := testenv.Residency(mntLarge)
				if err != nil {
					logger.Printf("residency of %s: %v", mntLarge, err)
				}
				resWarm = append(resWarm, f)
				c0 := testenv.ProcCPU(pid)
				p2.mnt = append(p2.mnt, ddRate(mntLarge))
				dcpu = append(dcpu, testenv.ProcCPU(pid)-c0)
			})
			if err := testenv.DropPageCache(mntLarge); err != nil {
				t.Fatalf("fadvise DONTNEED through the mount: %v", err)
			}
			f, _ := testenv.Residency(mntLarge)
			resDropped = append(resDropped, f)
			c0 := testenv.ProcCPU(pid)
			p2d.mnt = append(p2d.mnt, ddRate(mntLarge))
			dcpu = append(dcpu, testenv.ProcCPU(pid)-c0)
			p2d.ref = append(p2d.ref, p2.ref[r])
			logger.Printf("pass 2 round %d: direct %.0f MB/s, mount warm %.0f MB/s, mount dropped %.0f MB/s (resident before: src %.0f%%, mount %.0f%%, after DONTNEED %.0f%%)",
				r+1, p2.ref[r], p2.mnt[r], p2d.mnt[r], 100*resSrc[r], 100*resWarm[r], 100*resDropped[r])
		}
		p2.notes = append(p2.notes, fmt.Sprintf("dd's own MB/s; pages resident before dd (open+mmap+mincore): source %s, mount %s",
			pctList(resSrc), pctList(resWarm)))
		p2d.notes = append(p2d.notes, fmt.Sprintf("posix_fadvise(DONTNEED) on a fd of the file through the mount before each dd (drops the mount file's pages only, not the source's nor the daemon's cache file's); resident after it: %s",
			pctList(resDropped)))
		if mean(resDropped) > 0.5 {
			p2d.notes = append(p2d.notes, "DONTNEED through the mount left the pages resident (passthrough: the kernel reads the cache file, whose page cache a fadvise on the FUSE fd does not touch), so this row is another warm figure")
		}
		p2d.notes = append(p2d.notes, fmt.Sprintf("daemon CPU-s per dd (warm, dropped alternating): %s", measure.Join(dcpu, "%.3f", " ")))
		passes = append(passes, p2, p2d)
	}

	// Pass 2c: dd from the cache disk, on the large file's mount and on
	// the small files' (mixed) mount.
	if large != "" {
		passes = append(passes, cacheDiskDD(t, c, filepath.Join(srcL, large), filepath.Join(mntL, large), filepath.Join(mnt, mixedLarge), largeSize, largeFastPath, fastPath, pidL, pid, logger.Printf)...)
	}

	// Pass 3: a torch DataLoader.
	if !c.skipLoader {
		list := filepath.Join(work, "files.txt")
		if err := writeList(list, small); err != nil {
			t.Fatalf("%v", err)
		}
		script := filepath.Join(repo, "python", "tests", "bench_loader.py")
		how := ""
		if c.unbuffered {
			how = ", open(buffering=0)"
		}
		if c.readBytes {
			how = ", dsmount.read_bytes"
		}
		p3 := &pass{name: fmt.Sprintf("3. torch DataLoader, %d workers, batch %d, shuffle%s", c.workers, c.batch, how),
			unit: "samples/s", target: 0.8, refName: "direct"}
		var dcpu []float64
		loader := func(root string, r int) float64 {
			cmd := exec.Command(c.python, script, "--root", root, "--list", list, "--epochs", "1", "--warmup", "1",
				"--workers", fmt.Sprint(c.workers), "--batch-size", fmt.Sprint(c.batch), "--seed", fmt.Sprint(c.seed+int64(r)))
			if c.unbuffered {
				cmd.Args = append(cmd.Args, "--unbuffered")
			}
			if c.readBytes {
				cmd.Args = append(cmd.Args, "--read-bytes")
			}
			cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(repo, "python"))
			return scriptRate(t, cmd, root, int64(len(small)), smallBytes)
		}
		for r := 0; r < c.rounds; r++ {
			dcpu = append(dcpu, p3.round(r, pid, func() float64 { return loader(src, r) }, func() float64 { return loader(mnt, r) }))
			logger.Printf("pass 3 round %d: direct %.0f samples/s, mount %.0f samples/s", r+1, p3.ref[r], p3.mnt[r])
		}
		p3.notes = append(p3.notes, "each: one invocation of python/tests/bench_loader.py, a warm-up epoch then the timed one; item = torch.frombuffer(file bytes), default collate",
			fmt.Sprintf("daemon CPU-s per invocation (2 epochs): %s", measure.Join(dcpu, "%.3f", " ")))
		passes = append(passes, p3)
	}

	// Pass 3b: what the loader's gap is made of, without torch: one Python
	// process reading every file whole, default buffering, buffering=0 and
	// the Python package's read_bytes.
	if !c.skipLoader {
		list := filepath.Join(work, "files.txt")
		script := filepath.Join(repo, "python", "tests", "bench_open.py")
		for _, way := range []struct{ name, reader, buffering string }{
			{"open(buffering=-1).read()", "open", "-1"},
			{"open(buffering=0).read()", "open", "0"},
			{"dsmount.read_bytes()", "read_bytes", "0"},
		} {
			p := &pass{name: fmt.Sprintf("3b. one Python process, %s per file", way.name),
				unit: "files/s", refName: "direct"}
			var dcpu []float64
			openRead := func(root string) float64 {
				cmd := exec.Command(c.python, script, "--root", root, "--list", list, "--buffering", way.buffering, "--reader", way.reader)
				return scriptRate(t, cmd, root, int64(len(small)), smallBytes)
			}
			for r := 0; r < c.rounds; r++ {
				cpu := p.round(r, pid, func() float64 { return openRead(src) }, func() float64 { return openRead(mnt) })
				dcpu = append(dcpu, cpu/float64(2*len(small))*1e6)
			}
			p.notes = append(p.notes, "each: one invocation of python/tests/bench_open.py (an untimed pass, then a timed one; no torch)",
				fmt.Sprintf("daemon CPU per file (µs, both passes): %s", measure.Join(dcpu, "%.1f", " ")))
			passes = append(passes, p)
		}
	}

	// Pass 4: ls -lR.
	if !c.skipLS {
		p4 := &pass{name: fmt.Sprintf("4. ls -lR of the tree (%d files)", len(paths)), unit: "s", lowerIsBetter: true, target: 2, refName: "direct"}
		var srcOut, mntOut bytes.Buffer
		if _, err := lsLR(src, &srcOut); err != nil {
			t.Fatalf("%v", err)
		}
		if _, err := lsLR(mnt, &mntOut); err != nil {
			t.Fatalf("%v", err)
		}
		a, b := lsShape(srcOut.String(), src), lsShape(mntOut.String(), mnt)
		if d := firstDiff(a, b); d != "" {
			t.Fatalf("ls -lR through the mount differs from the source's: %s", d)
		}
		p4.notes = append(p4.notes, fmt.Sprintf("after one untimed warm-up each, whose listings match (%d lines: names, types, file sizes); output to /dev/null, LC_ALL=C", len(a)))
		devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			t.Fatalf("%v", err)
		}
		ls := func(root string) float64 {
			el, err := lsLR(root, devnull)
			if err != nil {
				t.Fatalf("%v", err)
			}
			return el.Seconds()
		}
		var dcpu []float64
		for r := 0; r < c.rounds; r++ {
			dcpu = append(dcpu, p4.round(r, pid, func() float64 { return ls(src) }, func() float64 { return ls(mnt) }))
			logger.Printf("pass 4 round %d: direct %.3f s, mount %.3f s", r+1, p4.ref[r], p4.mnt[r])
		}
		devnull.Close()
		p4.notes = append(p4.notes, fmt.Sprintf("daemon CPU-s per ls: %s", measure.Join(dcpu, "%.3f", " ")))
		passes = append(passes, p4)
	}

	// After the passes: memory, stats, a last check of every byte, logs.
	rss, hwm := benchenv.ProcMem(pid)
	stats1, err := statsJSON(bin, mnt)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if fp := fastPathOf(stats1, mnt); fp != "" {
		fastPath = fp
	}
	el, err = verifyTree(mnt, small, c.readers, c.seed+2000, sizes, crcs)
	if err != nil {
		t.Fatalf("final check through the mount: %v", err)
	}
	logger.Printf("checked %d files through the mount again after the passes in %v", len(small), el.Round(time.Millisecond))
	logs := m.ProblemLogs()
	m.Stop()

	report(c, passes, cpuPerK, rss, hwm, fastPath, hasFastPath, stats0, stats1, mnt, logs, bin)
	return nil
}
