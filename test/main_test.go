// Package test holds dsmount's end-to-end tests: they build the real binary,
// mount for real (FUSE, as root), and read through the mount from a local
// directory or from a real S3 server (MinIO). Run them with test/run.sh.
package test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// dsmountBin is the binary built once per `go test` run in TestMain.
var dsmountBin string

// workDir holds the binary and the shared dataset; removed when the tests end.
var workDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	workDir, err = os.MkdirTemp("", "dsmount-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "TestMain:", err)
		return 1
	}
	defer os.RemoveAll(workDir)
	if bin := os.Getenv("DSMOUNT_BIN"); bin != "" {
		// Test a prebuilt binary (e.g. a release build) instead.
		if dsmountBin, err = filepath.Abs(bin); err != nil {
			fmt.Fprintln(os.Stderr, "TestMain: DSMOUNT_BIN:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "testing DSMOUNT_BIN=%s\n", dsmountBin)
	} else {
		start := time.Now()
		dsmountBin, err = testenv.BuildDsmount(workDir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "TestMain: building dsmount:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "built %s in %v\n", dsmountBin, time.Since(start).Round(time.Millisecond))
	}
	defer fixtures.close()
	return m.Run()
}

// mainSpec is the dataset most tests read: a few thousand small files in
// nested directories, two large files whose sizes are not chunk multiples,
// a 0-byte file and odd names (~750 MiB).
var mainSpec = testenv.DatasetSpec{
	Seed:        42,
	SmallFiles:  3000,
	FilesPerDir: 300,
	MaxDepth:    3,
	LargeFiles:  []int64{300<<20 + 12345, 150<<20 + 1},
	OddNames:    true,
}

// The shared MinIO server holds mainSpec at s3://dataBucket/dataPrefix.
const (
	dataBucket = "dsmount-data"
	dataPrefix = "datasets/main"
)

// fixtureSet holds what several tests share, made on first use.
type fixtureSet struct {
	pt *fixtureT

	datasetOnce sync.Once
	datasetDir  string
	datasetList []string
	datasetErr  error

	minioOnce sync.Once
	minio     *testenv.MinIO
	minioErr  error
	uploadBeg time.Time
	uploadEnd time.Time
}

var fixtures = &fixtureSet{pt: &fixtureT{testenv.NewProgramT("dsmount-e2e-fixtures")}}

func (f *fixtureSet) close() { f.pt.Close() }

// fixtureT is the testenv.T for shared fixtures: a failure panics (recovered
// in the sync.Once that makes the fixture, then reported to each test that
// asks for it); cleanups run when TestMain ends.
type fixtureT struct{ *testenv.ProgramT }

type fixtureFailure struct{ msg string }

func (f *fixtureT) Fatalf(format string, args ...any) {
	panic(fixtureFailure{fmt.Sprintf(format, args...)})
}

func catchFixture(err *error) {
	if r := recover(); r != nil {
		ff, ok := r.(fixtureFailure)
		if !ok {
			panic(r)
		}
		*err = fmt.Errorf("%s", ff.msg)
	}
}

// sharedDataset returns the directory holding mainSpec and its paths.
func sharedDataset(t *testing.T) (string, []string) {
	t.Helper()
	f := fixtures
	f.datasetOnce.Do(func() {
		dir := filepath.Join(workDir, "dataset")
		if err := os.Mkdir(dir, 0o755); err != nil {
			f.datasetErr = err
			return
		}
		start := time.Now()
		f.datasetList, f.datasetErr = testenv.GenerateDatasetErr(dir, mainSpec)
		f.datasetDir = dir
		t.Logf("generated the shared dataset: %d files, %.0f MiB in %v", len(f.datasetList),
			float64(testenv.DatasetSize(mainSpec))/(1<<20), time.Since(start).Round(time.Millisecond))
	})
	if f.datasetErr != nil {
		t.Fatalf("generating the shared dataset: %v", f.datasetErr)
	}
	return f.datasetDir, f.datasetList
}

// sharedMinIO returns the shared server (bound to t for failures) with
// mainSpec uploaded to s3://dataBucket/dataPrefix/.
func sharedMinIO(t *testing.T) *testenv.MinIO {
	t.Helper()
	dir, _ := sharedDataset(t)
	f := fixtures
	f.minioOnce.Do(func() {
		defer catchFixture(&f.minioErr)
		m := testenv.StartMinIO(f.pt)
		m.CreateBucket(dataBucket)
		f.uploadBeg = time.Now()
		m.UploadDir(dataBucket, dataPrefix, dir)
		f.uploadEnd = time.Now()
		t.Logf("uploaded the shared dataset to %s in %v", m.Endpoint(), f.uploadEnd.Sub(f.uploadBeg).Round(time.Millisecond))
		f.minio = m
	})
	if f.minioErr != nil {
		t.Fatalf("shared MinIO: %v", f.minioErr)
	}
	return f.minio.WithT(t)
}

// s3Env is the environment for a dsmount reading from m. It sets
// AWS_CA_BUNDLE when the machine has a CA file and the variable is unset, so
// the daemon's HTTP client is always tested against that SDK pitfall (the
// SDK refuses AWS_CA_BUNDLE with a custom transport; docs/configuration.md).
func s3Env(m *testenv.MinIO, extra ...string) []string {
	var more []string
	if os.Getenv("AWS_CA_BUNDLE") == "" {
		if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err == nil {
			more = append(more, "AWS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt")
		}
	}
	return m.Env(append(more, extra...)...)
}

// mountS3 mounts s3://bucket/prefix from m at a new mountpoint (or at mp if
// non-empty) with the given cache dir and extra flags.
func mountS3(t *testing.T, m *testenv.MinIO, bucket, prefix, mp, cacheDir string, extra ...string) *testenv.Mount {
	t.Helper()
	if mp == "" {
		mp = t.TempDir()
	}
	src := "s3://" + bucket
	if prefix != "" {
		src += "/" + prefix
	}
	args := append(append([]string{"--cache-dir", cacheDir}, m.MountArgs()...), extra...)
	return testenv.StartMount(t, testenv.MountConfig{
		Bin: dsmountBin, Source: src, Mountpoint: mp, Args: args, Env: s3Env(m),
	})
}
