package testenv

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"
)

// DatasetSpec describes a generated dataset. Everything about it (names,
// layout, sizes, bytes) is a function of the spec alone.
type DatasetSpec struct {
	Seed uint64

	// SmallFiles is how many small files to make, spread over nested
	// directories. Their sizes are uniform in [SmallMin, SmallMax]
	// (defaults 1 KiB and 200 KiB); set both equal for a fixed size
	// (e.g. 110_000 for benchmarks).
	SmallFiles int
	SmallMin   int
	SmallMax   int

	// FilesPerDir is how many small files share a directory (default 300).
	FilesPerDir int
	// MaxDepth is the deepest a small file's directory goes below the root
	// (default 3; 1 means one level of directories).
	MaxDepth int

	// LargeFiles are the sizes of the large files, written as
	// large/large-<i>.bin.
	LargeFiles []int64

	// OddNames adds a 0-byte file and files whose names have spaces and
	// non-ASCII characters (see OddNames).
	OddNames bool
}

// OddNames are the extra files a spec with OddNames=true creates, with their
// sizes.
var OddNames = []struct {
	Path string
	Size int
}{
	{"empty.bin", 0},
	{"with space.txt", 1234},
	{"ünïcødé 文件.bin", 54321},
	{"dir with space/ñandú – ☃.dat", 4097},
	{"dir with space/nested dir/#hash%percent&amp.txt", 10},
	{"日本語/データ.bin", 70000},
	{"-leading-dash.txt", 33},
	{".hidden", 100},
}

type genFile struct {
	rel  string
	size int64
	id   uint64 // stream id for the content generator
}

func (s *DatasetSpec) defaults() DatasetSpec {
	d := *s
	if d.SmallMin == 0 && d.SmallMax == 0 {
		d.SmallMin, d.SmallMax = 1<<10, 200<<10
	}
	if d.SmallMax < d.SmallMin {
		d.SmallMax = d.SmallMin
	}
	if d.FilesPerDir <= 0 {
		d.FilesPerDir = 300
	}
	if d.MaxDepth <= 0 {
		d.MaxDepth = 3
	}
	return d
}

// plan lays the dataset out without touching the disk.
func (s *DatasetSpec) plan() []genFile {
	d := s.defaults()
	rng := rand.New(rand.NewPCG(d.Seed, 0x6473_6d6f_756e_74)) // "dsmount"
	var files []genFile
	id := uint64(0)
	next := func() uint64 { id++; return id }

	nDirs := (d.SmallFiles + d.FilesPerDir - 1) / d.FilesPerDir
	dirs := make([]string, nDirs)
	for i := range dirs {
		// Directories share ancestors: top level from 3 names, then 2 per
		// level, so the tree has directories holding both files (leaves) and
		// subdirectories, at depths 1..MaxDepth.
		depth := 1 + rng.IntN(d.MaxDepth)
		p := ""
		for l := 0; l < depth-1; l++ {
			p = path.Join(p, fmt.Sprintf("d%d-%d", l, rng.IntN(2+boolInt(l == 0))))
		}
		dirs[i] = path.Join(p, fmt.Sprintf("leaf%03d", i))
	}
	for i := 0; i < d.SmallFiles; i++ {
		size := d.SmallMin
		if d.SmallMax > d.SmallMin {
			size += rng.IntN(d.SmallMax - d.SmallMin + 1)
		}
		files = append(files, genFile{
			rel:  path.Join(dirs[i/d.FilesPerDir], fmt.Sprintf("f%06d.bin", i)),
			size: int64(size),
			id:   next(),
		})
	}
	for i, sz := range d.LargeFiles {
		files = append(files, genFile{rel: fmt.Sprintf("large/large-%d.bin", i), size: sz, id: next()})
	}
	if d.OddNames {
		for _, o := range OddNames {
			files = append(files, genFile{rel: o.Path, size: int64(o.Size), id: next()})
		}
	}
	return files
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// DatasetPaths returns the relative paths GenerateDataset would create for
// spec, sorted, without creating anything.
func DatasetPaths(spec DatasetSpec) []string {
	var out []string
	for _, f := range spec.plan() {
		out = append(out, f.rel)
	}
	sort.Strings(out)
	return out
}

// DatasetSize is the total bytes of the files spec describes.
func DatasetSize(spec DatasetSpec) int64 {
	var n int64
	for _, f := range spec.plan() {
		n += f.size
	}
	return n
}

// GenerateDataset writes the dataset spec describes under dir (which must
// exist) and returns the files' '/'-separated relative paths, sorted. The same
// spec always gives the same names, sizes and bytes. Fails the test on error.
func GenerateDataset(t T, dir string, spec DatasetSpec) []string {
	t.Helper()
	paths, err := GenerateDatasetErr(dir, spec)
	if err != nil {
		t.Fatalf("GenerateDataset: %v", err)
	}
	return paths
}

// GenerateDatasetErr is GenerateDataset with an error result.
func GenerateDatasetErr(dir string, spec DatasetSpec) ([]string, error) {
	files := spec.plan()
	madeDirs := map[string]bool{}
	for _, f := range files {
		d := path.Dir(f.rel)
		if !madeDirs[d] {
			if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o755); err != nil {
				return nil, err
			}
			madeDirs[d] = true
		}
	}
	// Large files first so they overlap with the small ones.
	order := make([]genFile, len(files))
	copy(order, files)
	sort.SliceStable(order, func(i, j int) bool { return order[i].size > order[j].size })

	work := make(chan genFile)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for f := range work {
				if err := writeGenFile(filepath.Join(dir, filepath.FromSlash(f.rel)), spec.Seed, f, buf); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, f := range order {
		work <- f
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.rel
	}
	sort.Strings(out)
	return out, nil
}

func writeGenFile(name string, seed uint64, f genFile, buf []byte) error {
	out, err := os.Create(name)
	if err != nil {
		return err
	}
	g := NewContentGen(seed, f.id)
	for left := f.size; left > 0; {
		n := int64(len(buf))
		if n > left {
			n = left
		}
		g.Fill(buf[:n])
		if _, err := out.Write(buf[:n]); err != nil {
			out.Close()
			return err
		}
		left -= n
	}
	return out.Close()
}

// ContentGen is a fast deterministic byte stream (PCG, 8 bytes per step,
// several GB/s), for file contents.
type ContentGen struct {
	pcg  *rand.PCG
	tail [8]byte
	nt   int // unread bytes at the end of tail
}

// NewContentGen returns the stream for (seed, stream).
func NewContentGen(seed, stream uint64) *ContentGen {
	return &ContentGen{pcg: rand.NewPCG(seed, stream^0x9e3779b97f4a7c15)}
}

// Fill fills p with the next len(p) bytes of the stream.
func (g *ContentGen) Fill(p []byte) {
	for len(p) > 0 && g.nt > 0 {
		p[0] = g.tail[8-g.nt]
		p = p[1:]
		g.nt--
	}
	for len(p) >= 8 {
		binary.LittleEndian.PutUint64(p, g.pcg.Uint64())
		p = p[8:]
	}
	if len(p) > 0 {
		binary.LittleEndian.PutUint64(g.tail[:], g.pcg.Uint64())
		n := copy(p, g.tail[:])
		g.nt = 8 - n
	}
}

// Bytes returns n bytes from a fresh stream for (seed, stream).
func Bytes(seed, stream uint64, n int) []byte {
	p := make([]byte, n)
	NewContentGen(seed, stream).Fill(p)
	return p
}
