package s3

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/backend"
)

// TestMinIOTLSRegion talks https to a MinIO whose certificate only
// AWS_CA_BUNDLE vouches for, in a region the client is not told about: the
// bundle must reach the transport New builds, and New must follow the
// store's region hint.
func TestMinIOTLSRegion(t *testing.T) {
	cert := newTestCert(t)
	m := startMinio(t, minioConfig{cert: cert, region: "eu-west-3"})
	m.mkbucket(t, "tls")
	m.put(t, "tls", "f", []byte("over tls"))
	isolateEnv(t)

	_, err := New(context.Background(), "s3://tls", Options{Endpoint: m.endpoint, PathStyle: true})
	mustKind(t, err, backend.ErrUnavailable)
	var cve *tls.CertificateVerificationError
	if !errors.As(err, &cve) {
		t.Fatalf("without the bundle: want a certificate verification error, got %v", err)
	}

	t.Setenv("AWS_CA_BUNDLE", cert.bundle(t))
	b, err := New(context.Background(), "s3://tls", Options{Endpoint: m.endpoint, PathStyle: true})
	if err != nil {
		t.Fatalf("with the bundle: %v", err)
	}
	defer b.Close()
	if b.raw == nil {
		t.Fatal("ReadAt goes through the SDK; want its GETs made directly")
	}
	obj, err := b.Stat(context.Background(), "f")
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 8)
	if n, err := b.ReadAt(context.Background(), obj, p, 0); n != 8 || err != nil || string(p) != "over tls" {
		t.Fatalf("ReadAt = %d, %v, %q", n, err, p)
	}

	// An explicit region is obeyed, and the error says where the bucket is.
	_, err = New(context.Background(), "s3://tls", Options{Endpoint: m.endpoint, PathStyle: true, Region: "us-west-2"})
	mustKind(t, err, backend.ErrInvalid)
	if !strings.Contains(err.Error(), "eu-west-3") {
		t.Errorf("error %q should name the bucket's region", err)
	}
	t.Log(err)
}

func testCancel(t *testing.T, m *minio, bucket string) {
	b, proxy, obj := behindFaultProxy(t, m, bucket, bytes.Repeat([]byte("x"), 1<<20))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := b.ReadAt(ctx, obj, make([]byte, 100), 0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadAt with a cancelled context: %v", err)
	}
	mustKind(t, err, backend.ErrUnavailable)

	// Cancelled while the body is stalled half way: returns promptly.
	proxy.stall.Store(true)
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err = b.ReadAt(ctx, obj, make([]byte, 1<<20), 0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadAt cancelled mid-body: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancelled ReadAt took %v", d)
	}
	t.Log(err)
}

func testBodyRetry(t *testing.T, m *minio, bucket string) {
	data := make([]byte, 256<<10)
	for i := range data {
		data[i] = byte(i % 251)
	}
	b, proxy, obj := behindFaultProxy(t, m, bucket, data)
	ctx := context.Background()

	proxy.cuts.Store(2)
	p := make([]byte, 100000)
	// Progress counts what arrived, cut bodies included: at least the
	// range, so a caller must clamp (stream.Detector does).
	var reported atomic.Int64
	n, err := b.ReadAt(backend.WithProgress(ctx, func(n int) { reported.Add(int64(n)) }), obj, p, 1000)
	if r := reported.Load(); r < int64(len(p)) {
		t.Errorf("%d bytes reported for a %d-byte range read after cut bodies", r, len(p))
	}
	if err != nil || n != len(p) || !bytes.Equal(p, data[1000:1000+len(p)]) {
		t.Fatalf("ReadAt after 2 cut bodies = %d, %v (bytes equal: %v)", n, err, bytes.Equal(p, data[1000:1000+len(p)]))
	}
	if g := proxy.gets.Load(); g != 3 {
		t.Errorf("%d GETs, want 3", g)
	}

	proxy.cuts.Store(100)
	_, err = b.ReadAt(ctx, obj, p, 0)
	mustKind(t, err, backend.ErrUnavailable)
	t.Log(err)
}

func testAnonymous(t *testing.T, m *minio, bucket string) {
	m.put(t, bucket, "pub/f", []byte("public"))
	policy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["*"]},`+
		`"Action":["s3:GetObject","s3:ListBucket"],"Resource":["arn:aws:s3:::%[1]s","arn:aws:s3:::%[1]s/*"]}]}`, bucket)
	_, err := m.client.PutBucketPolicy(context.Background(), &s3.PutBucketPolicyInput{Bucket: aws.String(bucket), Policy: aws.String(policy)})
	if err != nil {
		t.Fatal(err)
	}

	// With no credentials and instance metadata enabled but pointing at a
	// server that never answers, anonymous access must not wait on it.
	blackhole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer blackhole.Close()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "false")
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://"+blackhole.Addr().String())
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")

	start := time.Now()
	b, err := New(context.Background(), "s3://"+bucket+"/pub", Options{Endpoint: m.endpoint, PathStyle: true, Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	obj, err := b.Stat(context.Background(), "f")
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 6)
	if n, err := b.ReadAt(context.Background(), obj, p, 0); n != 6 || err != nil || string(p) != "public" {
		t.Fatalf("anonymous ReadAt = %d, %v, %q", n, err, p)
	}
	if got := listObjects(t, b); len(got) != 1 || got["f"].Size != 6 {
		t.Fatalf("anonymous List: %v", got)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("anonymous access took %v", d)
	}

	m.mkbucket(t, bucket+"-private")
	_, err = New(context.Background(), "s3://"+bucket+"-private", Options{Endpoint: m.endpoint, PathStyle: true, Anonymous: true})
	mustKind(t, err, backend.ErrPermission)
}

// behindFaultProxy stores data as "f" and returns a backend that reaches
// MinIO through a fault proxy (closed when the test ends), the proxy, and
// the object.
func behindFaultProxy(t *testing.T, m *minio, bucket string, data []byte) (*Backend, *faultProxy, backend.Object) {
	t.Helper()
	m.put(t, bucket, "f", data)
	proxy := newFaultProxy(t, m.endpoint)
	b, err := New(context.Background(), "s3://"+bucket, Options{Endpoint: proxy.url, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	obj, err := b.Stat(context.Background(), "f")
	if err != nil {
		t.Fatal(err)
	}
	return b, proxy, obj
}
