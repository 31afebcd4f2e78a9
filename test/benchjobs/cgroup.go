package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// cgroup is a memory cgroup (v1 where its memory controller is mounted,
// else v2) the readers run in, bounding their memory, page cache included.
type cgroup struct{ dir string }

func newCgroup(name string, limit int64) (*cgroup, error) {
	v1 := "/sys/fs/cgroup/memory"
	if st, err := os.Stat(v1); err == nil && st.IsDir() {
		dir := filepath.Join(v1, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("memory cgroup: %w", err)
		}
		cg := &cgroup{dir}
		if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
			cg.remove()
			return nil, fmt.Errorf("memory cgroup limit: %w", err)
		}
		return cg, nil
	}
	dir := filepath.Join("/sys/fs/cgroup", name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("memory cgroup (v2): %w", err)
	}
	cg := &cgroup{dir}
	if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		cg.remove()
		return nil, fmt.Errorf("memory cgroup limit (v2): %w", err)
	}
	return cg, nil
}

func (cg *cgroup) add(pid int) error {
	return os.WriteFile(filepath.Join(cg.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
}

// remove deletes the cgroup; it fails (silently) while a process is in
// it, so the readers are stopped first.
func (cg *cgroup) remove() {
	os.Remove(cg.dir)
}
