package test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/test/testenv"
)

// tokenFile writes a file of size bytes of seeded random bytes to dir and
// returns its path and contents.
func tokenFile(t *testing.T, dir string, size int) (string, []byte) {
	t.Helper()
	data := make([]byte, size)
	r := rand.New(rand.NewPCG(46, 1))
	for i := 0; i+8 <= size; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			data[i+j] = byte(v >> (8 * j))
		}
	}
	path := filepath.Join(dir, "train.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// mmapBatches has readers goroutines read windows of path as nanoGPT's
// get_batch does: a new mapping per batch, each window checked against
// data. batch(r) is reader r's next batch of offsets (nil: done; called
// from reader r alone), and drop(fd, offsets) lets the batch's pages go
// after it.
func mmapBatches(t *testing.T, path string, data []byte, window, readers int, batch func(r int) []int, drop func(fd int, offs []int)) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan string, readers)
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for offs := batch(r); offs != nil; offs = batch(r) {
				f, err := os.Open(path)
				if err != nil {
					errs <- err.Error()
					return
				}
				m, err := syscall.Mmap(int(f.Fd()), 0, len(data), syscall.PROT_READ, syscall.MAP_SHARED)
				if err != nil {
					f.Close()
					errs <- err.Error()
					return
				}
				for _, off := range offs {
					if !bytes.Equal(m[off:off+window], data[off:off+window]) {
						errs <- "wrong bytes in a window"
						break
					}
				}
				syscall.Munmap(m)
				drop(int(f.Fd()), offs)
				f.Close()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// TestRandomWindowsOfABigFile: readers copying random 2,050-byte windows
// out of an mmap of a token file four times the cache's size, as nanoGPT's
// get_batch does (a new mapping per batch), read every byte right, and the
// daemon fetches from the store no more than 128 times the bytes they
// read: what each window's fault asks, not a chunk per window.
func TestRandomWindowsOfABigFile(t *testing.T) {
	const (
		fileSize = 64 << 20
		window   = 2050
		readers  = 4
		batches  = 25
		perBatch = 12
	)
	src := t.TempDir()
	_, data := tokenFile(t, src, fileSize)
	mp := t.TempDir()
	testenv.StartMount(t, testenv.MountConfig{Bin: dsmountBin, Source: src, Mountpoint: mp,
		Args: []string{"--cache-dir", t.TempDir(), "--cache-size", "16M"}})
	before := testenv.Stats(t, dsmountBin, mp).Cache

	rngs := make([]*rand.Rand, readers)
	left := make([]int, readers)
	for r := range readers {
		rngs[r], left[r] = rand.New(rand.NewPCG(uint64(r), 7)), batches
	}
	mmapBatches(t, filepath.Join(mp, "train.bin"), data, window, readers, func(r int) []int {
		if left[r] == 0 {
			return nil
		}
		left[r]--
		offs := make([]int, perBatch)
		for i := range offs {
			offs[i] = rngs[r].IntN(fileSize - window)
		}
		return offs
	}, func(fd int, _ []int) {
		// The page cache of a real job's node holds a sliver of its
		// token files: drop what this batch brought in.
		unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
	})
	after := testenv.Stats(t, dsmountBin, mp).Cache
	read := int64(readers * batches * perBatch * window)
	fetched := after.BytesFetched - before.BytesFetched
	ratio := float64(fetched) / float64(read)
	t.Logf("%d windows (%d bytes): the store served %d bytes (%.1fx), %d ranged GETs, %d chunks",
		readers*batches*perBatch, read, fetched, ratio, after.RangesFetched-before.RangesFetched, after.ChunksFetched-before.ChunksFetched)
	if ratio > 128 {
		t.Errorf("store bytes %.1fx the bytes read; want at most 128x", ratio)
	}
}

// TestDeclaredWindowsOfABigFile: a job declares its random 2,050-byte
// windows of a token file four times the cache's size, in the order its
// readers then read them through mmaps (a new mapping per batch, its
// pages dropped after). Every byte read is right, the declared windows
// were fetched ahead (prefetched items, pushed pages), and the store
// served at most 4 times the bytes read: the windows' pages, not the
// kernel's readahead around them nor chunks.
func TestDeclaredWindowsOfABigFile(t *testing.T) {
	const (
		fileSize = 64 << 20
		window   = 2050
		readers  = 4
		batches  = 40
		perBatch = 12
	)
	src := t.TempDir()
	_, data := tokenFile(t, src, fileSize)
	mp := t.TempDir()
	testenv.StartMount(t, testenv.MountConfig{Bin: dsmountBin, Source: src, Mountpoint: mp,
		Args: []string{"--cache-dir", t.TempDir(), "--cache-size", "16M"}})
	// The order: batch b is read by reader b%readers, its windows in turn.
	rng := rand.New(rand.NewPCG(46, 2))
	offs := make([]int, batches*perBatch)
	ranges := make([]control.Range, len(offs))
	for i := range offs {
		offs[i] = rng.IntN(fileSize - window)
		ranges[i] = control.Range{Offset: int64(offs[i]), Length: window}
	}
	// The job has its file open (the kernel holds its inode) as it
	// declares, as a training script that sized its windows by it has.
	held, err := os.Open(filepath.Join(mp, "train.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	var res *control.OrderResult
	err = control.Call(t.Context(), mp, control.Request{Op: control.OpOrder, Job: "tokens", Anonymous: true,
		Paths: []string{"train.bin"}, Ranges: ranges}, func(e control.Event) error {
		res = e.Order
		return nil
	})
	if err != nil || res == nil || res.Declared != len(ranges)-res.Duplicates {
		t.Fatalf("declare: %+v, %v", res, err)
	}
	before := testenv.Stats(t, dsmountBin, mp)

	next := make([]int, readers) // reader r reads batches r, r+readers, ...
	for r := range next {
		next[r] = r
	}
	mmapBatches(t, filepath.Join(mp, "train.bin"), data, window, readers, func(r int) []int {
		b := next[r]
		if b >= batches {
			return nil
		}
		next[r] += readers
		return offs[b*perBatch : (b+1)*perBatch]
	}, func(fd int, batch []int) {
		// Only this batch's pages: the next batches' are pushed.
		for _, off := range batch {
			unix.Fadvise(fd, int64(off), window, unix.FADV_DONTNEED)
		}
	})
	after := testenv.Stats(t, dsmountBin, mp)
	read := int64(len(offs) * window)
	fetched := after.Cache.BytesFetched - before.Cache.BytesFetched
	ratio := float64(fetched) / float64(read)
	var job control.JobStats
	for _, j := range after.Mount.Jobs {
		if j.Name == "tokens" {
			job = j
		}
	}
	t.Logf("%d windows (%d bytes): the store served %d bytes (%.2fx), %d ranged GETs, %d chunks; job: %d read, %d prefetched, %d prefetch hits, %d pushed, %d stalls",
		len(offs), read, fetched, ratio, after.Cache.RangesFetched-before.Cache.RangesFetched, after.Cache.ChunksFetched-before.Cache.ChunksFetched,
		job.TotalReads, job.Prefetched, job.PrefetchHits, job.Pushed, job.Stalls)
	if ratio > 4 {
		t.Errorf("store bytes %.2fx the bytes read; want at most 4x", ratio)
	}
	if job.Prefetched == 0 {
		t.Errorf("no declared window was prefetched: %+v", job)
	}
}

// TestPythonDeclaredRanges: a job declares its nanoGPT windows of a token
// file four times the cache's size with dsmount.ranges.NanoGPTWindows and
// reads them with its get_batch (the Python client, a real mount): every
// token is right, the store served at most 4 times the bytes read, and
// each bad declaration (a range past the end, of length 0, of a file
// outside the mount, a file index past the files) is refused whole,
// leaving the job as it was.
func TestPythonDeclaredRanges(t *testing.T) {
	const (
		fileSize = 64 << 20
		steps    = 40
		window   = 2050
	)
	env := pythonEnv(t)
	src := t.TempDir()
	srcFile, _ := tokenFile(t, src, fileSize)
	mp := t.TempDir()
	testenv.StartMount(t, testenv.MountConfig{Bin: dsmountBin, Source: src, Mountpoint: mp,
		Args: []string{"--cache-dir", t.TempDir(), "--cache-size", "16M"}})
	before := testenv.Stats(t, dsmountBin, mp).Cache
	r := runPython(t, env, 2*time.Minute, filepath.Join(pythonDir(t), "tests", "integration_ranges.py"),
		filepath.Join(mp, "train.bin"), srcFile, strconv.Itoa(steps))
	var out struct {
		Declared, Windows, Bad int
		Refused                []string
		Before                 *int `json:"declared_before"`
		After                  *int `json:"declared_after"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &out); err != nil {
		t.Fatalf("integration_ranges.py: %v\n%s", err, r.Stdout)
	}
	after := testenv.Stats(t, dsmountBin, mp).Cache
	read := int64(out.Windows * window)
	ratio := float64(after.BytesFetched-before.BytesFetched) / float64(read)
	t.Logf("%+v; store %.2fx the bytes read", out, ratio)
	if out.Windows != steps*12 || out.Bad != 0 || out.Declared == 0 {
		t.Errorf("read %d windows (want %d), %d wrong, %d declared", out.Windows, steps*12, out.Bad, out.Declared)
	}
	if ratio > 4 {
		t.Errorf("store bytes %.2fx the bytes read; want at most 4x", ratio)
	}
	wantRefused := []string{"past the end", "length 0", "not inside a dsmount mount", "file index 1"}
	for i, w := range wantRefused {
		if i >= len(out.Refused) || !strings.Contains(out.Refused[i], w) {
			t.Errorf("bad declaration %d: %q; want a refusal saying %q", i, out.Refused, w)
		}
	}
	if out.Before == nil || out.After == nil || *out.Before != *out.After {
		t.Errorf("the job's declared count went from %v to %v across refused declarations", out.Before, out.After)
	}
}
