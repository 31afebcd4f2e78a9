package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// SmallFS mounts a tmpfs of size ("256m") on a temporary directory and
// unmounts it at cleanup: a filesystem a test may fill without touching
// anyone else's. It needs root, as the whole suite does.
func SmallFS(t T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Fatalf("mount a tmpfs of %s (the suite runs as root): %v", size, err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// FillFS writes zeros to a new file in dir until its filesystem refuses,
// wants that refusal to be ENOSPC, and returns the file's path (removing
// it gives the space back).
func FillFS(t T, dir string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "filler")
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for err == nil {
		_, err = f.Write(buf)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling %s: %v, want ENOSPC", dir, err)
	}
	return filepath.Join(dir, filepath.Base(f.Name()))
}
