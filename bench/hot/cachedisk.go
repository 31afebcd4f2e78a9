package hot

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

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
func cacheDiskPass(t testenv.T, readers int, c config, pid int, src, mnt string, small []string, smallBytes int64, log func(string, ...any)) *pass {
	p := &pass{name: fmt.Sprintf("1c. cache-disk epoch (page cache dropped), %d x %d B, %d readers", len(small), c.FileSize, readers),
		unit: "files/s", target: 0.9, refName: "direct, page cache dropped"}
	var cpuUS, switches, cacheRef, cacheMnt []float64
	var ops []string
	// epoch reads order under root from a dropped page cache, noting in
	// grew how much the page cache grew by.
	epoch := func(root string, order []string, grew *[]float64) float64 {
		if err := dropPageCache(); err != nil {
			t.Fatalf("%v", err)
		}
		c0 := pageCacheMiB()
		defer func() { *grew = append(*grew, pageCacheMiB()-c0) }()
		var n atomic.Int64
		start := time.Now()
		err := testenv.ReadAllInOrder(root, order, readers, func(_ string, data []byte) error {
			n.Add(int64(len(data)))
			return nil
		})
		el := time.Since(start)
		if err != nil {
			t.Fatalf("cache-disk epoch over %s: %v", root, err)
		}
		if n.Load() != smallBytes {
			t.Fatalf("cache-disk epoch over %s read %d bytes; the files hold %d", root, n.Load(), smallBytes)
		}
		return float64(len(order)) / el.Seconds()
	}
	for r := 0; r < c.rounds; r++ {
		order := testenv.Shuffled(small, c.seed+100+int64(r))
		sides(r, func() { p.ref = append(p.ref, epoch(src, order, &cacheRef)) }, func() {
			tr, err := testenv.StartFuseTrace(mnt)
			if err != nil {
				t.Fatalf("%v", err)
			}
			c0, s0 := testenv.ProcCPU(pid), testenv.ProcSwitches(pid)
			p.mnt = append(p.mnt, epoch(mnt, order, &cacheMnt))
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
		log("pass 1c (%d readers) round %d: direct %.0f files/s, mount %.0f files/s; per file: daemon %.1f µs CPU, %.2f switches, FUSE %s",
			readers, r+1, p.ref[r], p.mnt[r], cpuUS[r], switches[r], ops[r])
	}
	p.notes = append(p.notes,
		"drop_caches 1 (page cache only) before each side; the source and the cache dir are on the same disk",
		fmt.Sprintf("per file, each round: daemon CPU µs %s; daemon context switches %s", measure.Join(cpuUS, "%.1f", " "), measure.Join(switches, "%.2f", " ")),
		fmt.Sprintf("FUSE requests per file (kernel tracepoint), each round: %s", joinStrings(ops, "; ")),
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

// dropPageCache writes back and drops the whole page cache (not dentries
// and inodes): without the sync, the pages of a freshly written source
// stay dirty, drop_caches leaves them, and the local side reads memory.
func dropPageCache() error {
	unix.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0o200); err != nil {
		return fmt.Errorf("drop the page cache (needs root): %w", err)
	}
	return nil
}

func joinStrings(v []string, sep string) string {
	out := ""
	for i, s := range v {
		if i > 0 {
			out += sep
		}
		out += s
	}
	return out
}
