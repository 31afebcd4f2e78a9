package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
// It is built per shared/notes/s3-client.md: a BuildableClient transport (so
// AWS_CA_BUNDLE does not break it), no retry quota, checksums only when
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

// Metrics.
//
// What was verified about MinIO's metrics (this MinIO version; the source is
// cmd/metrics-v2.go, metrics-v3-api.go, handler-utils.go:collectAPIStats and
// http-stats.go; TestMinIOMetricsExact in this package re-checks it on every
// run):
//
//   - /minio/v2/metrics/cluster AND /minio/v2/metrics/node serve the S3 HTTP
//     group (minio_s3_requests_total{api="getobject"},
//     minio_s3_traffic_sent_bytes) from a cache refreshed at most every 10 s
//     (getHTTPMetrics/getNetworkMetrics: cacheInterval 10s). Measured: a GET
//     showed up in both only 10.1 s later. Useless for "no GETs happened".
//   - /minio/metrics/v3/api/requests is read live on every scrape (no cache):
//     minio_api_requests_total{name="GetObject",type="s3"} (v3 names APIs in
//     CamelCase) and minio_api_requests_traffic_sent_bytes{type="s3"}. But
//     MinIO bumps the node-wide total only after the handler returns, and it
//     drops the node-wide in-flight gauge just before that, so for a large
//     body (whose tail net/http writes straight to the socket) there is a
//     short window in which a client has its bytes and the GET is in neither
//     series. Measured: scraping right after each of 400 GETs (8 MiB and
//     100 B alternately), the node-wide total was one short 44 times.
//   - /minio/metrics/v3/bucket/api/<bucket> has per-bucket series
//     minio_bucket_api_inflight_total and minio_bucket_api_total; MinIO
//     bumps the bucket's in-flight gauge BEFORE serving and moves the request
//     from in-flight to total under one lock afterwards, so in-flight + total
//     counts every GET that has reached a handler, with no window.
//     GetObjectCount sums that over all buckets: a GET is counted before the
//     client can see a byte of its answer, which makes "zero GETs during a
//     pass" exact. (Only requests on existing buckets are counted per bucket.)
//     Measured: the same 400 GETs, 0 misses.
//   - Bytes: the per-bucket traffic series have sent/received swapped in this
//     MinIO version (cmd/metrics-v3-api.go, loadBucketAPIHTTPMetrics, sets
//     traffic_sent_bytes from the bucket's input bytes), so GetObjectCount
//     reports the node-wide
//     minio_api_requests_traffic_sent_bytes (every S3 response's bytes, all
//     APIs: GET bodies plus LIST/HEAD/error XML), which is updated when a
//     request completes (so, unlike the count, it can trail a GET that a
//     client has just finished reading by a moment).
//   - A series that is still zero is not emitted at all (a fresh server
//     serves an empty page), so a missing series reads as 0: a renamed metric
//     would read as "0 GETs" for ever. TestMinIOMetricsExact checks that GETs
//     move the count, and the integration tests check that a cold pass does.
//   - Scraping metrics and /minio/health/* are not S3 API calls and move none
//     of these counters; ListBuckets (which GetObjectCount uses to find the
//     buckets) is counted only node-wide, as "listbuckets".

// GetObjectCount returns the number of GetObject requests MinIO has started
// serving on any bucket (in flight + finished), and the bytes it has sent in
// completed S3 responses of any kind. It fails the test if the metrics cannot
// be read.
func (m *MinIO) GetObjectCount() (requests int64, bytesSent int64) {
	m.t.Helper()
	requests, bytesSent, err := m.GetObjectCountErr(context.Background())
	if err != nil {
		m.t.Fatalf("reading MinIO metrics: %v", err)
	}
	return requests, bytesSent
}

// GetObjectCountErr is GetObjectCount with an error result.
func (m *MinIO) GetObjectCountErr(ctx context.Context) (requests int64, bytesSent int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := m.Client().ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		return 0, 0, fmt.Errorf("ListBuckets: %w", err)
	}
	for _, b := range out.Buckets {
		st, err := m.BucketAPIStats(aws.ToString(b.Name))
		if err != nil {
			return 0, 0, err
		}
		requests += st.Requests["getobject"] + st.InFlight["getobject"]
	}
	st, err := m.APIStats()
	if err != nil {
		return 0, 0, err
	}
	return requests, st.SentBytes, nil
}

const metricsV3Requests = "/minio/metrics/v3/api/requests"

// APIStats is a snapshot of MinIO's S3 API counters.
type APIStats struct {
	Requests  map[string]int64 // by API name: "getobject", "headobject", "listobjectsv2", ...
	Errors    map[string]int64 // requests answered with 4xx/5xx, by API name
	InFlight  map[string]int64 // requests being served now, by API name
	SentBytes int64            // bytes of all S3 responses
	RecvBytes int64            // bytes of all S3 requests
}

// APIStats scrapes the node-wide /minio/metrics/v3/api/requests. Its
// Requests are bumped when a request completes (see the notes above).
func (m *MinIO) APIStats() (APIStats, error) {
	return m.scrapeAPIStats(metricsV3Requests)
}

// BucketAPIStats scrapes /minio/metrics/v3/bucket/api/<bucket>. Its
// InFlight+Requests count a request from before its handler runs. Its
// SentBytes and RecvBytes are left zero (MinIO swaps them in this series).
func (m *MinIO) BucketAPIStats(bucket string) (APIStats, error) {
	s, err := m.scrapeAPIStats("/minio/metrics/v3/bucket/api/" + bucket)
	s.SentBytes, s.RecvBytes = 0, 0
	return s, err
}

func (m *MinIO) scrapeAPIStats(path string) (APIStats, error) {
	s := APIStats{Requests: map[string]int64{}, Errors: map[string]int64{}, InFlight: map[string]int64{}}
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(m.Endpoint() + path)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return s, err
	}
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, err := parsePromLine(line)
		if err != nil {
			return s, fmt.Errorf("metrics line %q: %w", line, err)
		}
		if labels["type"] != "s3" {
			continue
		}
		v := int64(value)
		api := strings.ToLower(labels["name"]) // v3 says "GetObject", v2 "getobject"
		// Node-wide series are minio_api_requests_<x>, per-bucket ones
		// minio_bucket_api_<x>.
		x, ok := strings.CutPrefix(name, "minio_api_requests_")
		if !ok {
			if x, ok = strings.CutPrefix(name, "minio_bucket_api_"); !ok {
				continue
			}
		}
		switch x {
		case "total":
			s.Requests[api] += v
		case "errors_total":
			s.Errors[api] += v
		case "inflight_total":
			s.InFlight[api] += v
		case "traffic_sent_bytes":
			s.SentBytes += v
		case "traffic_received_bytes":
			s.RecvBytes += v
		}
	}
	return s, sc.Err()
}

// parsePromLine parses `name{k="v",...} value [timestamp]`.
func parsePromLine(line string) (name string, labels map[string]string, value float64, err error) {
	labels = map[string]string{}
	rest := line
	if i := strings.IndexByte(line, '{'); i >= 0 {
		name = line[:i]
		j := strings.LastIndexByte(line, '}')
		if j < i {
			return "", nil, 0, errors.New("unbalanced braces")
		}
		ls := line[i+1 : j]
		for len(ls) > 0 {
			eq := strings.IndexByte(ls, '=')
			if eq < 0 || eq+1 >= len(ls) || ls[eq+1] != '"' {
				return "", nil, 0, errors.New("bad label")
			}
			k := strings.TrimSpace(ls[:eq])
			var val strings.Builder
			p := eq + 2
			for ; p < len(ls) && ls[p] != '"'; p++ {
				if ls[p] == '\\' && p+1 < len(ls) {
					p++
					switch ls[p] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(ls[p])
					}
					continue
				}
				val.WriteByte(ls[p])
			}
			labels[k] = val.String()
			ls = strings.TrimLeft(ls[min(p+1, len(ls)):], ", ")
		}
		rest = strings.TrimSpace(line[j+1:])
	} else {
		f := strings.Fields(line)
		if len(f) < 2 {
			return "", nil, 0, errors.New("no value")
		}
		name, rest = f[0], f[1]
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return "", nil, 0, errors.New("no value")
	}
	value, err = strconv.ParseFloat(f[0], 64)
	return name, labels, value, err
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
