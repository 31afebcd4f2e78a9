package testenv

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestTamperReplaceKeepsHoles: replace writes junk where the file had data
// and leaves its holes, so a sparse pack does not grow on disk.
func TestTamperReplaceKeepsHoles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pack")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("d"), 1<<20)
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 64<<20); err != nil { // 63 MiB hole between
		t.Fatal(err)
	}
	f.Close()
	blocks := func() int64 {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks * 512
	}
	before := blocks()
	if err := TamperFile(path, "replace", rand.New(rand.NewPCG(1, 2))); err != nil {
		t.Fatal(err)
	}
	after := blocks()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 65<<20 || bytes.Equal(got[:1<<20], data) || bytes.Equal(got[64<<20:], data) {
		t.Fatalf("after replace: %d bytes, data regions unchanged: %v %v", len(got), bytes.Equal(got[:1<<20], data), bytes.Equal(got[64<<20:], data))
	}
	if after > before+(1<<20) {
		t.Errorf("replace took %d bytes on disk, the sparse file %d: the holes were filled", after, before)
	}
}
