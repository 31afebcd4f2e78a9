package test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// The warm, multi-mount and stats tests share a MinIO server of their own
// (so its GET counter sees only them) holding two datasets in warmBucket:
//
//   - warmPrefix: warmSpec, ~2,000 small files (1..128 KiB) in nested
//     directories plus one 64 MiB file (64 chunks of warmChunk);
//   - capPrefix: capDirA and capDirB, capFiles files of capFileSize each, for
//     the cache-capacity test.
//
// Every mount of them uses --chunk-size 1M, so a small file is one chunk and
// the dataset is warmFix.chunks chunks.
var warmSpec = testenv.DatasetSpec{
	Seed:        2024,
	SmallFiles:  2000,
	SmallMin:    1 << 10,
	SmallMax:    128 << 10,
	FilesPerDir: 250,
	MaxDepth:    2,
	LargeFiles:  []int64{64 << 20},
}

const (
	warmBucket  = "dsmount-warm"
	warmPrefix  = "ds"
	capPrefix   = "cap"
	warmChunk   = 1 << 20
	capFiles    = 150
	capFileSize = 200 << 10 // 150 x 200 KiB = 29.3 MiB per directory
	warmLarge   = "large/large-0.bin"
)

var (
	capDirA = testenv.DatasetSpec{Seed: 11, SmallFiles: capFiles, SmallMin: capFileSize, SmallMax: capFileSize, FilesPerDir: 50, MaxDepth: 1}
	capDirB = testenv.DatasetSpec{Seed: 12, SmallFiles: capFiles, SmallMin: capFileSize, SmallMax: capFileSize, FilesPerDir: 50, MaxDepth: 1}
)

type warmFixture struct {
	once sync.Once
	err  error

	minio  *testenv.MinIO
	src    string   // local copy of s3://warmBucket/warmPrefix/
	paths  []string // its files, relative, sorted
	sizes  map[string]int64
	total  int64 // bytes
	chunks int64 // chunks of warmChunk (a 0-byte file has none)

	capSrc string // local copy of s3://warmBucket/capPrefix/ (dirA/..., dirB/...)
}

var warmFix warmFixture

// warmData returns the shared warm fixture, making it on first use.
func warmData(t *testing.T) *warmFixture {
	t.Helper()
	f := &warmFix
	f.once.Do(func() {
		defer catchFixture(&f.err)
		start := time.Now()
		pt := fixtures.pt
		base := filepath.Join(workDir, "warm")
		f.src = filepath.Join(base, "ds")
		f.capSrc = filepath.Join(base, "cap")
		for _, d := range []string{f.src, filepath.Join(f.capSrc, "dirA"), filepath.Join(f.capSrc, "dirB")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				pt.Fatalf("%v", err)
			}
		}
		f.paths = testenv.GenerateDataset(pt, f.src, warmSpec)
		testenv.GenerateDataset(pt, filepath.Join(f.capSrc, "dirA"), capDirA)
		testenv.GenerateDataset(pt, filepath.Join(f.capSrc, "dirB"), capDirB)
		f.sizes = map[string]int64{}
		for _, p := range f.paths {
			st, err := os.Stat(filepath.Join(f.src, filepath.FromSlash(p)))
			if err != nil {
				pt.Fatalf("%v", err)
			}
			f.sizes[p] = st.Size()
			f.total += st.Size()
			f.chunks += chunksOf(st.Size())
		}
		m := testenv.StartMinIO(pt)
		m.CreateBucket(warmBucket)
		m.UploadDir(warmBucket, warmPrefix, f.src)
		m.UploadDir(warmBucket, capPrefix, f.capSrc)
		f.minio = m
		t.Logf("warm fixture: %d files, %.1f MiB, %d chunks of 1 MiB, at %s (made in %v)",
			len(f.paths), float64(f.total)/(1<<20), f.chunks, m.Endpoint(), time.Since(start).Round(time.Millisecond))
	})
	if f.err != nil {
		t.Fatalf("warm fixture: %v", f.err)
	}
	return f
}

func chunksOf(size int64) int64 { return (size + warmChunk - 1) / warmChunk }

// m is the fixture's MinIO bound to t.
func (f *warmFixture) m(t *testing.T) *testenv.MinIO { return f.minio.WithT(t) }

// gets is MinIO's GetObject count (exact: see testenv.GetObjectCount).
func (f *warmFixture) gets(t *testing.T) int64 {
	t.Helper()
	n, _ := f.m(t).GetObjectCount()
	return n
}

// chunksUnder counts the chunks of the dataset files under dir (relative,
// '/'-separated; "" for all), and the files.
func (f *warmFixture) chunksUnder(dir string) (files int, chunks int64) {
	for _, p := range f.paths {
		if dir == "" || strings.HasPrefix(p, dir+"/") || p == dir {
			files++
			chunks += chunksOf(f.sizes[p])
		}
	}
	return
}

// smallPaths is every path but the large file.
func (f *warmFixture) smallPaths() []string {
	var out []string
	for _, p := range f.paths {
		if p != warmLarge {
			out = append(out, p)
		}
	}
	return out
}

// topDirs lists the dataset's top-level directories, sorted.
func (f *warmFixture) topDirs() []string {
	seen := map[string]bool{}
	for _, p := range f.paths {
		if i := strings.IndexByte(p, '/'); i > 0 {
			seen[p[:i]] = true
		}
	}
	var out []string
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// capPaths lists the files of the capacity dataset under dir ("dirA" or
// "dirB"), relative to the capacity mount's root.
func (f *warmFixture) capPaths(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	root := filepath.Join(f.capSrc, dir)
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(f.capSrc, p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// mountWarm mounts s3://warmBucket/<prefix> through endpoint (MinIO's, or a
// proxy in front of it) with --chunk-size 1M and the given cache dir, as a
// new dsmount process (the daemon of that cache dir).
func mountWarm(t *testing.T, f *warmFixture, endpoint, prefix, mp, cacheDir string, extra ...string) *testenv.Mount {
	t.Helper()
	return testenv.StartMount(t, testenv.MountConfig{
		Bin: dsmountBin, Source: "s3://" + warmBucket + "/" + prefix, Mountpoint: mp,
		Args: warmMountArgs(endpoint, cacheDir, extra...), Env: s3Env(f.m(t)),
	})
}

func warmMountArgs(endpoint, cacheDir string, extra ...string) []string {
	return append([]string{"--cache-dir", cacheDir, "--chunk-size", "1M",
		"--s3-endpoint", endpoint, "--s3-path-style"}, extra...)
}

// slowEndpoint puts a toxiproxy with +20 ms (±5) on every answer in front of
// the fixture's MinIO and returns the proxy's endpoint URL.
func slowEndpoint(t *testing.T, f *warmFixture) string {
	t.Helper()
	tp := testenv.StartToxiproxy(t)
	addr := tp.AddProxy("minio", f.minio.Addr())
	tp.AddLatency("minio", 20, 5)
	return "http://" + addr
}

// mpPath joins a mountpoint and a dataset-relative path.
func mpPath(mp, rel string) string { return filepath.Join(mp, filepath.FromSlash(rel)) }

// checkFullyCached wants `warm --check` on paths to report everything
// cached, with wantFiles files and wantBytes bytes in all (-1: don't check).
func checkFullyCached(t *testing.T, what string, wantFiles, wantBytes int64, paths ...string) testenv.WarmCheck {
	t.Helper()
	c := testenv.WarmCheckT(t, dsmountBin, paths...)
	if (wantFiles >= 0 && c.FilesTotal != wantFiles) || (wantBytes >= 0 && c.BytesTotal != wantBytes) {
		t.Errorf("%s: warm --check counts %d files, %d bytes; want %d files, %d bytes", what, c.FilesTotal, c.BytesTotal, wantFiles, wantBytes)
	}
	if c.FilesCached != c.FilesTotal || c.BytesCached != c.BytesTotal {
		t.Errorf("%s: warm --check reports %d/%d files, %d/%d bytes cached; want all", what, c.FilesCached, c.FilesTotal, c.BytesCached, c.BytesTotal)
	}
	return c
}

// getsWithin reports whether got GETs is want, give or take what the
// daemon serving mp sent on purpose beyond one GET per fetch: its
// backends' hedges (a second GET for a slow answer) and retries, since
// each mount started. A fetch made twice still shows, unless it hides in
// that margin.
func getsWithin(t *testing.T, mp string, got, want int64) bool {
	t.Helper()
	st := testenv.Stats(t, dsmountBin, mp)
	var extra int64
	for _, m := range st.Mounts {
		extra += m.Backend.Hedges + m.Backend.Retries
	}
	if got != want {
		t.Logf("%d GETs, %d expected, %d hedges and retries", got, want, extra)
	}
	return got >= want && got <= want+extra
}

// mountSlowWarm mounts the warm dataset behind a proxy that adds 20 ms to
// every answer, on a fresh cache of 1 GiB, and returns the mountpoint.
func mountSlowWarm(t *testing.T, f *warmFixture) (string, *testenv.Mount) {
	t.Helper()
	mp := t.TempDir()
	return mp, mountWarm(t, f, slowEndpoint(t, f), warmPrefix, mp, t.TempDir(), "--cache-size", "1G")
}
