package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// MinIOVersion is the module version test/run.sh installs.
const MinIOVersion = "github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c"

// MinIORegion is the region every client (ours and dsmount's) is given.
const MinIORegion = "us-east-1"

// MinIOBinary returns where the MinIO server binary is expected: $DSMOUNT_MINIO
// if set, else $HOME/.cache/dsmount-tools/bin/minio (where test/run.sh installs it).
func MinIOBinary() string {
	if p := os.Getenv("DSMOUNT_MINIO"); p != "" {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = "/root"
	}
	return filepath.Join(home, ".cache", "dsmount-tools", "bin", "minio")
}

// MinIO is a MinIO server started for one test, listening on 127.0.0.1.
type MinIO struct {
	t        T
	addr     string // host:port of the S3 API
	user     string
	password string
	dataDir  string

	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has been waited for
	output *capBuffer

	client *s3.Client
}

// StartMinIO starts a fresh MinIO server on free ports with its data in a
// t.TempDir(). It fails the test (never skips) when the binary is missing. The
// server is killed, and waited for, in t.Cleanup.
func StartMinIO(t T) *MinIO {
	t.Helper()
	bin := MinIOBinary()
	if st, err := os.Stat(bin); err != nil || st.IsDir() {
		t.Fatalf("MinIO server binary not found at %s (%v): run test/run.sh, or "+
			"`GOBIN=$HOME/.cache/dsmount-tools/bin go install %s`, or point DSMOUNT_MINIO at a minio binary",
			bin, err, MinIOVersion)
	}
	var lastErr error
	// The free-port probe can race with another process taking the port;
	// retry with new ports a few times.
	for attempt := 0; attempt < 3; attempt++ {
		m, err := startMinIO(t, bin)
		if err == nil {
			return m
		}
		lastErr = err
		t.Logf("starting MinIO (attempt %d): %v", attempt+1, err)
	}
	t.Fatalf("MinIO did not start: %v", lastErr)
	return nil
}

func startMinIO(t T, bin string) (*MinIO, error) {
	ports, err := FreePorts(2)
	if err != nil {
		return nil, err
	}
	m := &MinIO{
		t:        t,
		addr:     fmt.Sprintf("127.0.0.1:%d", ports[0]),
		user:     "dsmount-test",
		password: "dsmount-test-secret-key",
		dataDir:  t.TempDir(),
		done:     make(chan struct{}),
		output:   &capBuffer{max: 1 << 20},
	}
	cmd := exec.Command(bin, "server", m.dataDir,
		"--address", m.addr,
		"--console-address", fmt.Sprintf("127.0.0.1:%d", ports[1]))
	cmd.Env = append(filterEnv(os.Environ(), "MINIO_"),
		"MINIO_ROOT_USER="+m.user,
		"MINIO_ROOT_PASSWORD="+m.password,
		"MINIO_PROMETHEUS_AUTH_TYPE=public",
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
		"MINIO_CI_CD=on",
	)
	cmd.Stdout = m.output
	cmd.Stderr = m.output
	// Take MinIO down with us if the test binary dies without cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	m.cmd = cmd
	m.client = NewS3Client(m.Endpoint(), m.user, m.password)
	go func() { cmd.Wait(); close(m.done) }()

	stop := func() {
		cmd.Process.Kill()
		<-m.done
	}
	if err := m.waitHealthy(60 * time.Second); err != nil {
		stop()
		return nil, fmt.Errorf("%v\nMinIO output:\n%s", err, m.output.String())
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("MinIO output (last 1 MiB):\n%s", m.output.String())
		}
	})
	return m, nil
}

// waitHealthy polls /minio/health/live until it answers 200, the process
// exits, or the deadline passes.
func (m *MinIO) waitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := hc.Get("http://" + m.addr + "/minio/health/live")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("MinIO at %s not healthy after %v (last error: %v)", m.addr, timeout, err)
		}
		select {
		case <-m.done:
			return fmt.Errorf("MinIO exited before becoming healthy: %v", m.cmd.ProcessState)
		case <-tick.C:
		}
	}
}

// Endpoint is the S3 endpoint URL, e.g. "http://127.0.0.1:34567".
func (m *MinIO) Endpoint() string { return "http://" + m.addr }

// Addr is the host:port of the S3 endpoint.
func (m *MinIO) Addr() string { return m.addr }

// Creds returns the root access key and secret key.
func (m *MinIO) Creds() (user, password string) { return m.user, m.password }

// DataDir is the server's storage directory.
func (m *MinIO) DataDir() string { return m.dataDir }

// Env returns a complete environment for a dsmount process talking to this
// server: os.Environ() without any AWS_* variable except AWS_CA_BUNDLE, plus
// the credentials, region, and AWS_EC2_METADATA_DISABLED=true. extra entries
// ("K=V") are appended last and so win.
func (m *MinIO) Env(extra ...string) []string {
	env := filterEnv(os.Environ(), "AWS_", "AWS_CA_BUNDLE")
	env = append(env,
		"AWS_ACCESS_KEY_ID="+m.user,
		"AWS_SECRET_ACCESS_KEY="+m.password,
		"AWS_REGION="+MinIORegion,
		"AWS_EC2_METADATA_DISABLED=true",
	)
	return append(env, extra...)
}

// MountArgs are the dsmount flags that point it at this server.
func (m *MinIO) MountArgs() []string {
	return []string{"--s3-endpoint", m.Endpoint(), "--s3-path-style"}
}

// Client returns an S3 client for this server (path-style, root credentials).
// It is built as backend/s3 builds the daemon's: a BuildableClient transport
// (so AWS_CA_BUNDLE does not break it), no retry quota, checksums only when
// required, and no environment lookups.
func (m *MinIO) Client() *s3.Client { return m.client }

// WithT returns a view of the same server whose helpers report failures to t
// (for a server shared between tests). The server's lifetime is unchanged.
func (m *MinIO) WithT(t T) *MinIO {
	c := *m
	c.t = t
	return &c
}

// NewS3Client builds a path-style S3 client for an S3-compatible endpoint.
func NewS3Client(endpoint, accessKey, secretKey string) *s3.Client {
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConns = 128
		tr.MaxIdleConnsPerHost = 64
	})
	cfg := aws.Config{
		Region:      MinIORegion,
		Credentials: credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
		HTTPClient:  httpClient,
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 5
				o.RateLimiter = ratelimit.None
			})
		},
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
		o.DisableLogOutputChecksumValidationSkipped = true
	})
}

// CreateBucket creates a bucket or fails the test.
func (m *MinIO) CreateBucket(bucket string) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := m.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		m.t.Fatalf("CreateBucket %q: %v", bucket, err)
	}
}

// PutObject writes one object or fails the test.
func (m *MinIO) PutObject(bucket, key string, data []byte) {
	m.t.Helper()
	if err := m.PutObjectErr(context.Background(), bucket, key, data); err != nil {
		m.t.Fatalf("%v", err)
	}
}

// PutObjectErr writes one object.
func (m *MinIO) PutObjectErr(ctx context.Context, bucket, key string, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	_, err := m.Client().PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		return fmt.Errorf("PutObject s3://%s/%s: %w", bucket, key, err)
	}
	return nil
}

// UploadDir uploads every regular file under localDir to
// s3://bucket/prefix/<relative path>, 16 uploads in flight, or fails the test.
// An empty prefix puts the files at the bucket root.
func (m *MinIO) UploadDir(bucket, prefix, localDir string) {
	m.t.Helper()
	if err := m.UploadDirErr(context.Background(), bucket, prefix, localDir, 16); err != nil {
		m.t.Fatalf("UploadDir %s -> s3://%s/%s: %v", localDir, bucket, prefix, err)
	}
}

// UploadDirErr is UploadDir with an error result and a choice of parallelism.
func (m *MinIO) UploadDirErr(ctx context.Context, bucket, prefix, localDir string, inFlight int) error {
	prefix = strings.Trim(prefix, "/")
	var rels []string
	err := filepath.WalkDir(localDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(localDir, p)
			if err != nil {
				return err
			}
			rels = append(rels, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan string)
	errc := make(chan error, inFlight)
	var wg sync.WaitGroup
	for i := 0; i < inFlight; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rel := range work {
				if err := m.uploadFile(ctx, bucket, joinKey(prefix, rel), filepath.Join(localDir, rel)); err != nil {
					select {
					case errc <- err:
					default:
					}
					cancel()
				}
			}
		}()
	}
feed:
	for _, rel := range rels {
		select {
		case work <- rel:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return ctx.Err()
	}
}

func joinKey(prefix, rel string) string {
	if prefix == "" {
		return rel
	}
	return prefix + "/" + rel
}

func (m *MinIO) uploadFile(ctx context.Context, bucket, key, file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	_, err = m.Client().PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(bucket),
		Key:           aws.String(key),
		Body:          f,
		ContentLength: aws.Int64(st.Size()),
	})
	if err != nil {
		return fmt.Errorf("PutObject s3://%s/%s: %w", bucket, key, err)
	}
	return nil
}

// FreePorts returns n distinct TCP ports on 127.0.0.1 that were free a moment ago.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// filterEnv drops the variables whose names start with prefix, except those
// named in keep.
func filterEnv(env []string, prefix string, keep ...string) []string {
	out := make([]string, 0, len(env))
outer:
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, prefix) {
			for _, want := range keep {
				if k == want {
					out = append(out, kv)
					continue outer
				}
			}
			continue
		}
		out = append(out, kv)
	}
	return out
}

// capBuffer is a goroutine-safe buffer that keeps the last max bytes.
type capBuffer struct {
	mu      sync.Mutex
	buf     []byte
	max     int
	dropped int64
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if b.max > 0 && len(b.buf) > b.max {
		cut := len(b.buf) - b.max
		b.dropped += int64(cut)
		b.buf = append(b.buf[:0], b.buf[cut:]...)
	}
	return len(p), nil
}

func (b *capBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped > 0 {
		return fmt.Sprintf("[... %d earlier bytes dropped ...]\n%s", b.dropped, b.buf)
	}
	return string(b.buf)
}

// Pid is the MinIO server's process ID.
func (m *MinIO) Pid() int { return m.cmd.Process.Pid }
