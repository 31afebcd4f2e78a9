package testenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MemCgroup is a memory cgroup for the processes a benchmark starts (a
// reader and its children), bounding their memory, page cache included: a
// process's page cache is charged to the cgroup of the process that first
// reads the page, so a reader in a MemCgroup can't keep a whole dataset in
// the kernel's cache. It uses cgroup v1 where the memory controller is
// mounted at /sys/fs/cgroup/memory, else cgroup v2 (the memory controller
// must then be enabled in /sys/fs/cgroup/cgroup.subtree_control). Needs
// root.
type MemCgroup struct {
	dir string
	v1  bool
}

// NewMemCgroup creates the cgroup name (a new directory) with memory.max
// (v2) or memory.limit_in_bytes (v1) set to limit bytes; limit <= 0 leaves
// it unlimited. t.Cleanup removes it (which fails, silently, while a
// process is still in it: stop the processes first).
func NewMemCgroup(t T, name string, limit int64) (*MemCgroup, error) {
	cg := &MemCgroup{}
	v1 := "/sys/fs/cgroup/memory"
	if st, err := os.Stat(v1); err == nil && st.IsDir() {
		cg.dir, cg.v1 = filepath.Join(v1, name), true
	} else {
		cg.dir = filepath.Join("/sys/fs/cgroup", name)
	}
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		return nil, fmt.Errorf("memory cgroup: %w", err)
	}
	t.Cleanup(cg.Remove)
	if limit > 0 {
		if err := cg.SetLimit(limit); err != nil {
			cg.Remove()
			return nil, err
		}
	}
	return cg, nil
}

// Dir is the cgroup's directory.
func (cg *MemCgroup) Dir() string { return cg.dir }

// SetLimit sets the cgroup's memory limit, page cache included.
func (cg *MemCgroup) SetLimit(limit int64) error {
	file := "memory.max"
	if cg.v1 {
		file = "memory.limit_in_bytes"
	}
	if err := os.WriteFile(filepath.Join(cg.dir, file), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		return fmt.Errorf("memory cgroup limit: %w", err)
	}
	return nil
}

// Add moves process pid into the cgroup (its later children are born in it).
func (cg *MemCgroup) Add(pid int) error {
	return os.WriteFile(filepath.Join(cg.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
}

// Wrap returns a command line that runs argv inside the cgroup from its
// first instruction: a shell moves itself into the cgroup and then execs
// argv, so nothing argv allocates is charged elsewhere (unlike Add after a
// Start).
func (cg *MemCgroup) Wrap(argv ...string) []string {
	return append([]string{"/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cg.dir}, argv...)
}

// DropPageCache reclaims what the cgroup can of its memory: with no
// process in it, all its page cache (the pages its processes read, not
// other cgroups' pages) — v1's memory.force_empty, v2's memory.reclaim
// (Linux 5.19 and later). Its processes' memory can't go without swap.
func (cg *MemCgroup) DropPageCache() error {
	if cg.v1 {
		return os.WriteFile(filepath.Join(cg.dir, "memory.force_empty"), []byte("0"), 0o200)
	}
	st, err := cg.Stats()
	if err != nil {
		return err
	}
	err = os.WriteFile(filepath.Join(cg.dir, "memory.reclaim"), []byte(strconv.FormatInt(st.File+1<<20, 10)), 0o200)
	if errors.Is(err, syscall.EAGAIN) { // reclaimed less than asked: what could go went
		err = nil
	}
	return err
}

// MemStats is a snapshot of a MemCgroup's memory.
type MemStats struct {
	Anon   int64 // anonymous memory and shmem (the anon LRU lists): what reclaim can't drop without swap
	File   int64 // page cache (the file LRU lists)
	Mapped int64 // page cache mapped into processes (their libraries' code and data, mmapped files)
	Usage  int64 // all memory charged now
	Peak   int64 // the highest Usage since the cgroup was made (v2: where memory.peak exists)
	OOMs   int64 // processes the OOM killer killed in the cgroup (v1: where the kernel reports it)
	Limits int64 // v1: times usage hit the limit (memory.failcnt); v2: memory.events "max"
}

// Stats reads the cgroup's memory counters.
func (cg *MemCgroup) Stats() (MemStats, error) {
	var s MemStats
	stat, err := readKeyed(filepath.Join(cg.dir, "memory.stat"))
	if err != nil {
		return s, err
	}
	if cg.v1 {
		// The total_ fields include descendants; this cgroup has none.
		s.Anon = stat["total_active_anon"] + stat["total_inactive_anon"]
		s.File = stat["total_active_file"] + stat["total_inactive_file"]
		s.Mapped = stat["total_mapped_file"]
		s.Usage = readInt(filepath.Join(cg.dir, "memory.usage_in_bytes"))
		s.Peak = readInt(filepath.Join(cg.dir, "memory.max_usage_in_bytes"))
		s.Limits = readInt(filepath.Join(cg.dir, "memory.failcnt"))
		if oc, err := readKeyed(filepath.Join(cg.dir, "memory.oom_control")); err == nil {
			s.OOMs = oc["oom_kill"]
		}
		return s, nil
	}
	s.Anon = stat["active_anon"] + stat["inactive_anon"]
	s.File = stat["active_file"] + stat["inactive_file"]
	s.Mapped = stat["file_mapped"]
	s.Usage = readInt(filepath.Join(cg.dir, "memory.current"))
	s.Peak = readInt(filepath.Join(cg.dir, "memory.peak"))
	if ev, err := readKeyed(filepath.Join(cg.dir, "memory.events")); err == nil {
		s.OOMs, s.Limits = ev["oom_kill"], ev["max"]
	}
	return s, nil
}

// Remove kills what is still in the cgroup and deletes it. Memory still
// charged to it (page cache) goes to the parent. A benchmark stopped by a
// signal runs its cleanups while its pipeline still runs in the cgroup
// (the children's parent-death signal comes only at its exit), so the
// members go first; it gives up (silently) after a few seconds.
func (cg *MemCgroup) Remove() {
	for i := 0; i < 60; i++ {
		if err := os.Remove(cg.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		cg.killMembers()
		time.Sleep(50 * time.Millisecond) // a killed process takes a moment to leave
	}
}

// killMembers sends SIGKILL to every process in the cgroup.
func (cg *MemCgroup) killMembers() {
	data, err := os.ReadFile(filepath.Join(cg.dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// SamplePeaks samples the cgroup's memory every interval until stop is
// called, which returns the highest MemStats.Anon and MemStats.Mapped seen
// (each its own highest, so their sum is at least the highest sum).
func (cg *MemCgroup) SamplePeaks(interval time.Duration) (stop func() (anon, mapped int64)) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var anon, mapped int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			if s, err := cg.Stats(); err == nil {
				anon, mapped = max(anon, s.Anon), max(mapped, s.Mapped)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() (int64, int64) {
		close(done)
		wg.Wait()
		return anon, mapped
	}
}

// readKeyed reads a "key value" per line file (memory.stat, memory.events).
func readKeyed(path string) (map[string]int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 {
			v, err := strconv.ParseInt(f[1], 10, 64)
			if err == nil {
				m[f[0]] = v
			}
		}
	}
	return m, sc.Err()
}

// readInt reads a file holding one integer; 0 if it can't.
func readInt(path string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return v
}
