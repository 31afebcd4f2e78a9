package testenv

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestProcStat checks the process and directory figures on this process
// and a sparse file.
func TestProcStat(t *testing.T) {
	rss, err := ProcRSS(os.Getpid())
	if err != nil || rss < 1<<20 {
		t.Fatalf("ProcRSS(self) = %d, %v; want over 1 MiB", rss, err)
	}
	n0, err := ProcFDCount(os.Getpid())
	if err != nil || n0 < 3 {
		t.Fatalf("ProcFDCount(self) = %d, %v", n0, err)
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	n1, _ := ProcFDCount(os.Getpid())
	f.Close()
	if n1 != n0+1 {
		t.Errorf("ProcFDCount went from %d to %d with one more file open", n0, n1)
	}

	dir := t.TempDir()
	sparse, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sparse.WriteAt(make([]byte, 64<<10), 100<<20); err != nil {
		t.Fatal(err)
	}
	sparse.Close()
	if err := os.WriteFile(filepath.Join(dir, "dense"), make([]byte, 256<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if u, err := DirUsage(dir); err != nil || u < 320<<10 || u > 4<<20 {
		t.Errorf("DirUsage = %d, %v; want about 320 KiB (a 100 MiB sparse file holding 64 KiB, and 256 KiB)", u, err)
	}
	if u, err := DirUsage(filepath.Join(dir, "missing")); err != nil || u != 0 {
		t.Errorf("DirUsage(missing) = %d, %v; want 0, nil", u, err)
	}

	self, err := FindProcs(func(p Proc) bool { return p.PID == os.Getpid() })
	if err != nil || len(self) != 1 || self[0].PPID != os.Getppid() || !strings.Contains(self[0].Cmdline, filepath.Base(os.Args[0])) {
		t.Errorf("FindProcs(self) = %+v, %v; want this process, parent %d, cmdline naming %s", self, err, os.Getppid(), os.Args[0])
	}
	if mps, err := MountPointsUnder(dir); err != nil || len(mps) != 0 {
		t.Errorf("MountPointsUnder(a fresh temp dir) = %v, %v", mps, err)
	}
	if mps, err := MountPointsUnder("/"); err != nil || !slices.Contains(mps, "/") {
		t.Errorf("MountPointsUnder(/) = %v, %v; want / among them", mps, err)
	}
}
