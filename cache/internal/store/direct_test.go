package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// alignedBuf returns n bytes starting at a Align boundary. Room for
// a whole block past every candidate start: with only n+Align, a
// small n and an allocation that happened to start late in a block, the
// probe ran off the end (a panic seen once in CI).
func alignedBuf(n int) []byte {
	b := make([]byte, max(n, Align)+Align)
	for i := 0; i < Align; i++ {
		if directLen(b[i:i+Align], 0) == Align {
			return b[i : i+n]
		}
	}
	panic("no aligned offset")
}

func TestWriteChunkBytes(t *testing.T) {
	cases := []struct {
		name       string
		n          int
		off        int64
		unaligned  bool // buffer starts off a block boundary
		existing   bool // file exists before (a later chunk of an object)
		wantDirect int  // bytes that must bypass the page cache when O_DIRECT works
	}{
		{name: "tail only", n: 1000},
		{name: "exact blocks", n: 8 * Align, wantDirect: 8 * Align},
		{name: "blocks and tail", n: 110000, wantDirect: 26 * Align},
		{name: "unaligned buffer", n: 110000, unaligned: true},
		{name: "unaligned offset", n: 3 * Align, off: 100},
		{name: "later chunk", n: 5*Align + 7, off: 4 << 20, existing: true, wantDirect: 5 * Align},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "obj")
			if tc.existing {
				if err := os.WriteFile(path, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			p := alignedBuf(tc.n + 1)
			if tc.unaligned {
				p = p[1:]
			}
			p = p[:tc.n]
			for i := range p {
				p[i] = byte(i*7 + 3)
			}
			f, direct, err := OpenDirect(path, os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if err := writeChunk(f, direct, p, tc.off); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if direct {
				resident, err := residentPages(path)
				if err != nil {
					t.Fatal(err)
				}
				for pg := tc.off / Align; pg < (tc.off+int64(tc.wantDirect))/Align; pg++ {
					if resident[pg] {
						t.Fatalf("page %d of the aligned part is in the page cache: it was not written O_DIRECT", pg)
					}
				}
			} else {
				t.Logf("%s has no O_DIRECT: only the bytes are checked", filepath.Dir(path))
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(got)) != tc.off+int64(tc.n) || !bytes.Equal(got[tc.off:], p) {
				t.Fatalf("file holds %d bytes, want %d with the chunk at %d", len(got), tc.off+int64(tc.n), tc.off)
			}
		})
	}
}

// residentPages reports, per page of path, whether it is in the page cache.
func residentPages(path string) ([]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	defer unix.Munmap(m)
	if os.Getpagesize() != Align {
		return nil, fmt.Errorf("page size %d: the test assumes %d", os.Getpagesize(), Align)
	}
	vec := make([]byte, (len(m)+Align-1)/Align)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return nil, errno
	}
	resident := make([]bool, len(vec))
	for i, v := range vec {
		resident[i] = v&1 != 0
	}
	return resident, nil
}
