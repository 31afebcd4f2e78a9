package hot

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dsmount/dsmount/bench/internal/measure"
	"github.com/dsmount/dsmount/test/testenv"
)

// cacheDiskPass is pass 1c: the epoch of pass 1 with the page cache
// dropped before each side (drop_caches 1: pages only; dentries and
// inodes stay, as on a node that keeps reading one tree), so the local
// side reads the source from disk and the mount's daemon serves every
// file from its cache files on the same disk. The mount's side also
// counts the FUSE requests the kernel sent (by opcode, from its
// tracepoint), and the daemon's context switches and CPU, per file.
//
// With bin set, the mount's side declares each round's order first
// (`bin order MNT --job bench-1d --epoch R`), and ends the job after.
func cacheDiskPass(t testenv.T, readers int, c config, pid int, src, mnt string, small []string, smallBytes int64, bin, work string, log func(string, ...any)) *pass {
	p := &pass{name: fmt.Sprintf("1c. cache-disk epoch (page cache dropped), %d x %d B, %d readers", len(small), c.FileSize, readers),
		unit: "files/s", target: 0.9, refName: "direct, page cache dropped"}
	if bin != "" {
		p.name = fmt.Sprintf("1d. cache-disk epoch, order declared, %d x %d B, %d readers", len(small), c.FileSize, readers)
		p.target = 1.0
	}
	declare := func(order []string, epoch int) {
		if bin == "" {
			return
		}
		list := filepath.Join(work, fmt.Sprintf("order-1d-%d.txt", epoch))
		if err := writeList(list, order); err != nil {
			t.Fatalf("%v", err)
		}
		if r := testenv.RunCLI(bin, nil, time.Minute, "order", mnt, "--job", "bench-1d", "--epoch", fmt.Sprint(epoch), list); r.ExitCode != 0 {
			t.Fatalf("dsmount order: exit %d: %s", r.ExitCode, r.Stderr)
		}
	}
	var cpuUS, switches, cacheRef, cacheMnt []float64
	var ops []string
	// epoch reads order under root from a dropped page cache, noting in
	// grew how much the page cache grew by; ready runs between the drop
	// and the reads (a declaration after the drop, so that what the
	// daemon pushes for it is not dropped).
	epoch := func(root string, order []string, grew *[]float64, ready func()) float64 {
		if err := testenv.DropPages(); err != nil {
			t.Fatalf("%v", err)
		}
		c0 := pageCacheMiB()
		ready()
		defer func() { *grew = append(*grew, pageCacheMiB()-c0) }()
		return epochRate(t, "cache-disk epoch", root, order, readers, smallBytes)
	}
	for r := 0; r < c.rounds; r++ {
		order := testenv.Shuffled(small, c.seed+100+int64(r))
		sides(r, func() { p.ref = append(p.ref, epoch(src, order, &cacheRef, func() {})) }, func() {
			tr, err := testenv.StartFuseTrace(mnt)
			if err != nil {
				t.Fatalf("%v", err)
			}
			var c0 float64
			var s0 int64
			p.mnt = append(p.mnt, epoch(mnt, order, &cacheMnt, func() {
				c0, s0 = testenv.ProcCPU(pid), testenv.ProcSwitches(pid)
				declare(order, r)
			}))
			c1, s1 := testenv.ProcCPU(pid), testenv.ProcSwitches(pid)
			got, err := tr.Stop()
			if err != nil {
				t.Fatalf("%v", err)
			}
			n := float64(len(order))
			cpuUS = append(cpuUS, (c1-c0)/n*1e6)
			switches = append(switches, float64(s1-s0)/n)
			ops = append(ops, got.PerFile(len(order)))
		})
		log("pass %s (%d readers) round %d: direct %.0f files/s, mount %.0f files/s; per file: daemon %.1f µs CPU, %.2f switches, FUSE %s",
			p.name[:2], readers, r+1, p.ref[r], p.mnt[r], cpuUS[r], switches[r], ops[r])
	}
	if bin != "" {
		if r := testenv.RunCLI(bin, nil, time.Minute, "order", mnt, "--job", "bench-1d", "--end"); r.ExitCode != 0 {
			t.Fatalf("dsmount order --end: exit %d: %s", r.ExitCode, r.Stderr)
		}
		p.notes = append(p.notes, "each round's order declared (dsmount order) just before the mount's epoch")
	}
	p.notes = append(p.notes,
		"sync and drop_caches 1 (page cache only) before each side; the source and the cache dir are on the same disk",
		fmt.Sprintf("per file, each round: daemon CPU µs %s; daemon context switches %s", measure.Join(cpuUS, "%.1f", " "), measure.Join(switches, "%.2f", " ")),
		fmt.Sprintf("FUSE requests per file (kernel tracepoint), each round: %s", strings.Join(ops, "; ")),
		fmt.Sprintf("page cache grown by the epoch (MiB, /proc/meminfo Cached; the files hold %.0f MiB): direct %s, mount %s", float64(smallBytes)/(1<<20), measure.Join(cacheRef, "%.0f", " "), measure.Join(cacheMnt, "%.0f", " ")))
	return p
}

// pageCacheMiB is the page cache's size (Cached in /proc/meminfo), MiB.
func pageCacheMiB() float64 {
	data, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Cached:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// mixedLarge is where the large file also lies in the small files'
// dataset: a mount of mostly small files (no-open) with one large file.
const mixedLarge = "mixed/large.bin"

// cacheDiskDD is pass 2c: dd of the large file with the page cache
// dropped (synced, drop_caches 1) before each read, from the local file,
// from the large file's own mount (passthrough: the kernel reads the
// cache file) and from the mixed mount (the daemon serves it), each
// against the local dd of the same round.
func cacheDiskDD(t testenv.T, c config, local, largeMnt, mixedMnt string, size int64, largeFP, mixedFP string, pidL, pid int, log func(string, ...any)) []*pass {
	dd := func(file string) float64 {
		if err := testenv.DropPages(); err != nil {
			t.Fatalf("%v", err)
		}
		n, sec, _, err := testenv.DD(file)
		if err != nil {
			t.Fatalf("%v", err)
		}
		if n != size {
			t.Fatalf("dd %s copied %d bytes; the file has %d", file, n, size)
		}
		return float64(n) / 1e6 / sec
	}
	pl := &pass{name: fmt.Sprintf("2c. dd bs=1M from the cache disk (page cache dropped), %d MiB, large-file mount (%s)", size>>20, largeFP),
		unit: "MB/s", target: 0.9, refName: "direct, page cache dropped"}
	pm := &pass{name: fmt.Sprintf("2c. same, mixed mount (%s)", mixedFP), unit: "MB/s", target: 0.9, refName: "direct, page cache dropped"}
	var cpuL, cpuM []float64
	for r := 0; r < c.rounds; r++ {
		sides(r, func() {
			ref := dd(local)
			pl.ref = append(pl.ref, ref)
			pm.ref = append(pm.ref, ref)
		}, func() {
			c0 := testenv.ProcCPU(pidL)
			pl.mnt = append(pl.mnt, dd(largeMnt))
			cpuL = append(cpuL, testenv.ProcCPU(pidL)-c0)
			c0 = testenv.ProcCPU(pid)
			pm.mnt = append(pm.mnt, dd(mixedMnt))
			cpuM = append(cpuM, testenv.ProcCPU(pid)-c0)
		})
		log("pass 2c round %d: direct %.0f MB/s, large-file mount %.0f MB/s, mixed mount %.0f MB/s", r+1, pl.ref[r], pl.mnt[r], pm.mnt[r])
	}
	pl.notes = append(pl.notes, "sync and drop_caches 1 before every dd; dd's own MB/s; the direct figure is each round's one local dd",
		fmt.Sprintf("daemon CPU-s per dd: %s", measure.Join(cpuL, "%.3f", " ")))
	pm.notes = append(pm.notes, fmt.Sprintf("the same file hard-linked into the small files' dataset; daemon CPU-s per dd: %s", measure.Join(cpuM, "%.3f", " ")))
	return []*pass{pl, pm}
}
