package benchenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/test/testenv"
)

// Store is MinIO with one bucket, and toxiproxy to put in front of it.
type Store struct {
	MinIO     *testenv.MinIO
	Toxiproxy *testenv.Toxiproxy
	// CPUNote says how the CPUs are shared, for the report.
	CPUNote string
}

// StartStore starts MinIO with bucket, and toxiproxy. With isolate MinIO
// and toxiproxy run on CPU 0 and this program (and the daemons and
// commands it starts later) on the others (testenv.IsolateBackend): a
// remote store's CPU is not the node's.
func StartStore(t testenv.T, bucket string, isolate bool) *Store {
	s := &Store{MinIO: testenv.StartMinIO(t), CPUNote: "all processes share all CPUs"}
	s.MinIO.CreateBucket(bucket)
	s.Toxiproxy = testenv.StartToxiproxy(t)
	if isolate {
		var err error
		if s.CPUNote, err = testenv.IsolateBackend(s.MinIO.Pid(), s.Toxiproxy.Pid()); err != nil {
			t.Fatalf("--isolate-backend: %v", err)
		}
	}
	return s
}

// AddProxy puts a toxiproxy listener called name in front of MinIO,
// adding p's latency to every answer, and returns its address
// (host:port).
func (s *Store) AddProxy(name string, p Proxy) string {
	addr := s.Toxiproxy.AddProxy(name, s.MinIO.Addr())
	s.Toxiproxy.AddLatency(name, p.Latency, p.Jitter)
	return addr
}

// Upload copies the tree src into bucket under prefix, inFlight PUTs at a
// time.
func (s *Store) Upload(t testenv.T, bucket, prefix, src string, inFlight int) {
	if err := s.MinIO.UploadDirErr(context.Background(), bucket, prefix, src, inFlight); err != nil {
		t.Fatalf("upload: %v", err)
	}
}

// Client is an S3 client of MinIO's credentials talking to endpoint.
func (s *Store) Client(endpoint string) *s3.Client {
	user, pass := s.MinIO.Creds()
	return testenv.NewS3Client(endpoint, user, pass)
}

// Gets is MinIO's GetObject count so far.
func (s *Store) Gets() int64 { n, _ := s.MinIO.GetObjectCount(); return n }

// CPU is the CPU seconds MinIO and toxiproxy have used so far.
func (s *Store) CPU() float64 {
	return testenv.ProcCPU(s.MinIO.Pid()) + testenv.ProcCPU(s.Toxiproxy.Pid())
}

// Generate makes the dataset spec in the directory dir (created) and
// returns its files' paths relative to dir.
func Generate(t testenv.T, dir string, spec testenv.DatasetSpec) []string {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("%v", err)
	}
	return testenv.GenerateDataset(t, dir, spec)
}

// Dsmount is the dsmount binary to measure: $DSMOUNT_BIN if set, else
// this checkout's, built into dir.
func Dsmount(dir string) (string, error) {
	if bin := os.Getenv("DSMOUNT_BIN"); bin != "" {
		return bin, nil
	}
	bin, err := testenv.BuildDsmount(filepath.Join(dir, "bin"))
	if err != nil {
		return "", fmt.Errorf("build: %w", err)
	}
	return bin, nil
}

// ProcMem is process pid's VmRSS and VmHWM (peak RSS) in bytes, -1 where
// unknown.
func ProcMem(pid int) (rss, hwm int64) {
	rss, hwm = -1, -1
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return rss, hwm
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	return rss, hwm
}

// Run is what a benchmark's passes share: the program's T, its work
// directory (removed when the program ends), the store and the dsmount
// binary.
type Run struct {
	T     *testenv.ProgramT
	Work  string
	Store *Store
	Bin   string
}

// StartRun makes the work directory and starts the store (StartStore).
func StartRun(t *testenv.ProgramT, bucket string, isolate bool) *Run {
	return &Run{T: t, Work: t.TempDir(), Store: StartStore(t, bucket, isolate)}
}

// Build builds this checkout's dsmount into the work directory.
func (r *Run) Build() {
	bin, err := testenv.BuildDsmount(filepath.Join(r.Work, "bin"))
	if err != nil {
		r.T.Fatalf("build: %v", err)
	}
	r.Bin = bin
}

// Sizes is the size of every file of paths under dir, and their total.
func Sizes(t testenv.T, dir string, paths []string) (sizes []int64, total int64) {
	sizes = make([]int64, len(paths))
	for i, p := range paths {
		st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			t.Fatalf("%v", err)
		}
		sizes[i] = st.Size()
		total += st.Size()
	}
	return sizes, total
}
