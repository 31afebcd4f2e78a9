package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// ReadAllShuffled reads every file root/<path> (paths are '/'-separated and
// relative) with `readers` goroutines, in an order shuffled by seed, and calls
// fn with each file's whole contents. fn may be called concurrently. It stops
// handing out files after the first error (a read error, or an error fn
// returns) and returns that error; reads already in flight finish first.
func ReadAllShuffled(root string, paths []string, readers int, seed int64, fn func(path string, data []byte) error) error {
	if readers <= 0 {
		readers = 1
	}
	return ReadAllInOrder(root, Shuffled(paths, seed), readers, fn)
}

// Shuffled returns a copy of paths in a random order fixed by seed.
func Shuffled(paths []string, seed int64) []string {
	order := append([]string(nil), paths...)
	r := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	return order
}

// ReadAllInOrder reads every path under root with `readers` parallel
// readers taking the next path of order in turn, like a loader's workers,
// and calls fn with each file's bytes.
func ReadAllInOrder(root string, order []string, readers int, fn func(path string, data []byte) error) error {
	return Parallel(len(order), readers, func() func(int) error {
		return func(i int) error {
			p := order[i]
			data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
			if err != nil {
				return fmt.Errorf("read %s: %w", p, err)
			}
			return fn(p, data)
		}
	})
}

// MismatchError says a file read through a mount differs from its source.
type MismatchError struct {
	Path    string
	Offset  int64 // first differing byte, or the shorter length
	GotLen  int64
	WantLen int64
}

func (e *MismatchError) Error() string {
	if e.GotLen != e.WantLen && e.Offset == min(e.GotLen, e.WantLen) {
		return fmt.Sprintf("%s: read %d bytes, source has %d (contents equal up to %d)", e.Path, e.GotLen, e.WantLen, e.Offset)
	}
	return fmt.Sprintf("%s: bytes differ from the source at offset %d (read %d bytes, source has %d)",
		e.Path, e.Offset, e.GotLen, e.WantLen)
}

// Diff compares got with want and returns nil or a *MismatchError naming the
// first differing offset.
func Diff(path string, got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	n := min(len(got), len(want))
	off := n
	for i := 0; i < n; i++ {
		if got[i] != want[i] {
			off = i
			break
		}
	}
	return &MismatchError{Path: path, Offset: int64(off), GotLen: int64(len(got)), WantLen: int64(len(want))}
}

// CompareFile checks data (read through a mount) against srcRoot/<rel>.
func CompareFile(srcRoot, rel string, data []byte) error {
	want, err := os.ReadFile(filepath.Join(srcRoot, filepath.FromSlash(rel)))
	if err != nil {
		return fmt.Errorf("reading source of %s: %w", rel, err)
	}
	return Diff(rel, data, want)
}

// TreeResult summarises a CompareTree pass.
type TreeResult struct {
	Files    int
	Bytes    int64
	Duration time.Duration
}

// CompareTreeErr reads every path through mountRoot with `readers` parallel
// readers in a shuffled order and compares each file's bytes with
// srcRoot/<path>. It returns the first read error or mismatch.
func CompareTreeErr(srcRoot, mountRoot string, paths []string, readers int, seed int64) (TreeResult, error) {
	var files, nbytes atomic.Int64
	start := time.Now()
	err := ReadAllShuffled(mountRoot, paths, readers, seed, func(p string, data []byte) error {
		if err := CompareFile(srcRoot, p, data); err != nil {
			return err
		}
		files.Add(1)
		nbytes.Add(int64(len(data)))
		return nil
	})
	return TreeResult{Files: int(files.Load()), Bytes: nbytes.Load(), Duration: time.Since(start)}, err
}

// CompareTree is CompareTreeErr that fails the test on any error and logs the
// pass's throughput.
func CompareTree(t T, srcRoot, mountRoot string, paths []string, readers int, seed int64) TreeResult {
	t.Helper()
	res, err := CompareTreeErr(srcRoot, mountRoot, paths, readers, seed)
	if err != nil {
		t.Fatalf("verified pass over %s: %v (after %d files)", mountRoot, err, res.Files)
	}
	if res.Files != len(paths) {
		t.Fatalf("verified pass over %s read %d files, want %d", mountRoot, res.Files, len(paths))
	}
	t.Logf("verified %d files, %.1f MiB in %v (%.0f files/s, %.1f MiB/s)", res.Files,
		float64(res.Bytes)/(1<<20), res.Duration.Round(time.Millisecond),
		float64(res.Files)/res.Duration.Seconds(), float64(res.Bytes)/(1<<20)/res.Duration.Seconds())
	return res
}

// CompareListings checks that every directory under srcRoot lists the same
// names, with the same file/directory kinds, under mountRoot (and that
// mountRoot has nothing extra at those levels).
func CompareListings(srcRoot, mountRoot string) error {
	var errs []string
	err := filepath.WalkDir(srcRoot, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(srcRoot, p)
		want, err := listDir(p)
		if err != nil {
			return err
		}
		got, err := listDir(filepath.Join(mountRoot, rel))
		if err != nil {
			errs = append(errs, fmt.Sprintf("readdir %q through the mount: %v", rel, err))
			return nil
		}
		if g, w := strings.Join(got, "\n"), strings.Join(want, "\n"); g != w {
			errs = append(errs, fmt.Sprintf("directory %q lists differently through the mount:\n got: %q\nwant: %q", rel, got, want))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		if len(errs) > 5 {
			errs = append(errs[:5], fmt.Sprintf("... and %d more directories", len(errs)-5))
		}
		return errors.New(strings.Join(errs, "\n"))
	}
	return nil
}

// listDir returns "name/" for directories and "name" for anything else, sorted.
func listDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() {
			n += "/"
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// CompareStats checks, for every path, that os.Stat through mountRoot gives a
// regular file of the source's size, and, when mtime is non-nil, that
// mtime(srcInfo, mountInfo) returns nil.
func CompareStats(srcRoot, mountRoot string, paths []string, mtime func(rel string, src, got os.FileInfo) error) error {
	var errs []string
	for _, p := range paths {
		want, err := os.Stat(filepath.Join(srcRoot, filepath.FromSlash(p)))
		if err != nil {
			return err
		}
		got, err := os.Stat(filepath.Join(mountRoot, filepath.FromSlash(p)))
		switch {
		case err != nil:
			errs = append(errs, fmt.Sprintf("stat %s through the mount: %v", p, err))
		case !got.Mode().IsRegular():
			errs = append(errs, fmt.Sprintf("%s: mode %v through the mount, want a regular file", p, got.Mode()))
		case got.Size() != want.Size():
			errs = append(errs, fmt.Sprintf("%s: size %d through the mount, source has %d", p, got.Size(), want.Size()))
		case mtime != nil:
			if err := mtime(p, want, got); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if len(errs) >= 10 {
			errs = append(errs, "... (stopped after 10)")
			break
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n"))
	}
	return nil
}

// RandomReads opens mountRoot/rel and makes n preads at random offsets and
// lengths (biased to cross boundaries of chunkSize, to start and end at the
// file's end, and to run past it), comparing each with the source bytes.
// It returns the first difference or error.
func RandomReads(srcRoot, mountRoot, rel string, n int, chunkSize int64, seed uint64) error {
	want, err := os.ReadFile(filepath.Join(srcRoot, filepath.FromSlash(rel)))
	if err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(mountRoot, filepath.FromSlash(rel)))
	if err != nil {
		return err
	}
	defer f.Close()
	size := int64(len(want))
	r := rand.New(rand.NewPCG(seed, 0x7ead))
	buf := make([]byte, 3*chunkSize+1)
	for i := 0; i < n; i++ {
		var off int64
		var ln int
		switch i % 5 {
		case 0: // anywhere
			off = r.Int64N(size + 1)
			ln = 1 + r.IntN(len(buf))
		case 1: // straddling a chunk boundary
			b := r.Int64N(size/chunkSize+1) * chunkSize
			off = max(0, b-int64(r.IntN(4096)+1))
			ln = 1 + r.IntN(8192)
		case 2: // tiny read
			off = r.Int64N(size + 1)
			ln = 1 + r.IntN(16)
		case 3: // up to and past the end
			off = max(0, size-int64(r.IntN(10000)))
			ln = 1 + r.IntN(20000)
		default: // whole chunks, aligned
			off = r.Int64N(size/chunkSize+1) * chunkSize
			ln = int(chunkSize)
		}
		p := buf[:ln]
		got, err := f.ReadAt(p, off)
		wantN := int(max(0, min(int64(ln), size-off)))
		if err != nil && !(errors.Is(err, io.EOF) && got == wantN && int64(ln) > size-off) {
			return fmt.Errorf("%s: pread(%d bytes at %d): %d bytes, %w", rel, ln, off, got, err)
		}
		if got != wantN {
			return fmt.Errorf("%s: pread(%d bytes at %d) returned %d bytes, want %d (size %d)", rel, ln, off, got, wantN, size)
		}
		if d := Diff(rel, p[:got], want[off:off+int64(got)]); d != nil {
			me := d.(*MismatchError)
			return fmt.Errorf("%s: pread(%d bytes at %d): bytes differ at file offset %d", rel, ln, off, off+me.Offset)
		}
	}
	return nil
}

// ReadSameFileParallel reads mountRoot/rel whole from `readers` goroutines at
// once, each from its own descriptor and starting at a different offset
// (wrapping around), and compares every byte with the source.
func ReadSameFileParallel(srcRoot, mountRoot, rel string, readers int, blockSize int) error {
	want, err := os.ReadFile(filepath.Join(srcRoot, filepath.FromSlash(rel)))
	if err != nil {
		return err
	}
	size := int64(len(want))
	errc := make(chan error, readers)
	for g := 0; g < readers; g++ {
		go func() {
			errc <- func() error {
				f, err := os.Open(filepath.Join(mountRoot, filepath.FromSlash(rel)))
				if err != nil {
					return err
				}
				defer f.Close()
				buf := make([]byte, blockSize)
				nblocks := (size + int64(blockSize) - 1) / int64(blockSize)
				first := int64(g) * nblocks / int64(readers)
				for i := int64(0); i < nblocks; i++ {
					off := ((first + i) % nblocks) * int64(blockSize)
					n, err := f.ReadAt(buf, off)
					if err != nil && !errors.Is(err, io.EOF) {
						return fmt.Errorf("reader %d: pread at %d: %w", g, off, err)
					}
					wn := min(int64(blockSize), size-off)
					if int64(n) != wn {
						return fmt.Errorf("reader %d: pread at %d: %d bytes, want %d", g, off, n, wn)
					}
					if d := Diff(rel, buf[:n], want[off:off+wn]); d != nil {
						return fmt.Errorf("reader %d: at file offset %d: %v", g, off+d.(*MismatchError).Offset, d)
					}
				}
				return nil
			}()
		}()
	}
	var first error
	for g := 0; g < readers; g++ {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// MmapCompare maps mountRoot/rel read-only and compares the mapping with the
// source (the page-fault read path training loaders use via numpy.memmap).
func MmapCompare(srcRoot, mountRoot, rel string) error {
	want, err := os.ReadFile(filepath.Join(srcRoot, filepath.FromSlash(rel)))
	if err != nil {
		return err
	}
	if len(want) == 0 {
		return nil
	}
	f, err := os.Open(filepath.Join(mountRoot, filepath.FromSlash(rel)))
	if err != nil {
		return err
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, len(want), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap %s: %w", rel, err)
	}
	defer syscall.Munmap(mem)
	return Diff(rel+" (mmap)", mem, want)
}
