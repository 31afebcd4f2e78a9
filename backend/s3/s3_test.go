package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/backend/backendtest"
)

// TestMinIO runs every integration case against one MinIO server, once with
// AWS_CA_BUNDLE unset and once with it pointing at a valid PEM file (the SDK
// refuses custom HTTP clients in that case unless they are built its way).
func TestMinIO(t *testing.T) {
	m := startMinio(t, minioConfig{})
	cert := newTestCert(t)
	cases := []minioCase{
		{"MissingBucket", testMissingBucket},
		{"WrongSecret", testWrongSecret},
		{"ClosedPort", testClosedPort},
		{"InvalidSource", testInvalidSource},
		{"List", testList},
		{"ListPages", testListPages},
		{"ListWalk", testListWalk},
		{"ReadAt", testReadAt},
		{"Changed", testChanged},
		{"Cancel", testCancel},
		{"BodyRetry", testBodyRetry},
		{"Anonymous", testAnonymous},
		{"OddKeys", testOddKeys},
		{"ListRaw", testListRaw},
		{"ListRetry", testListRetry},
		{"RequestRetry", testRequestRetry},
		{"ClockSkew", testClockSkew},
	}
	for i, bundle := range []bool{false, true} {
		t.Run(fmt.Sprintf("ca-bundle=%v", bundle), func(t *testing.T) {
			isolateEnv(t)
			if bundle {
				t.Setenv("AWS_CA_BUNDLE", cert.bundle(t))
			}
			runMinioCases(t, m, fmt.Sprintf("b%d-", i), cases)
		})
	}
}

// minioCase is one integration case: fn runs against m in a bucket of its
// own.
type minioCase struct {
	name string
	fn   func(t *testing.T, m *minio, bucket string)
}

// runMinioCases runs each case as a subtest of t, in a new bucket named
// prefix and the case's name in lower case.
func runMinioCases(t *testing.T, m *minio, prefix string, cases []minioCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bucket := prefix + strings.ToLower(c.name)
			m.mkbucket(t, bucket)
			c.fn(t, m, bucket)
		})
	}
}

// isolateEnv makes the AWS config chain see only the test's settings.
func isolateEnv(t testing.TB) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_CONFIG_FILE":             dir + "/config",
		"AWS_SHARED_CREDENTIALS_FILE": dir + "/credentials",
		"AWS_PROFILE":                 "",
		"AWS_DEFAULT_PROFILE":         "",
		"AWS_ENDPOINT_URL":            "",
		"AWS_ENDPOINT_URL_S3":         "",
		"AWS_SESSION_TOKEN":           "",
		"AWS_REGION":                  "",
		"AWS_DEFAULT_REGION":          "",
		"AWS_CA_BUNDLE":               "",
		"AWS_ACCESS_KEY_ID":           minioUser,
		"AWS_SECRET_ACCESS_KEY":       minioSecret,
	} {
		t.Setenv(k, v)
	}
}

func open(t *testing.T, m *minio, source string) *Backend {
	t.Helper()
	b, err := New(context.Background(), source, Options{Endpoint: m.endpoint, PathStyle: true})
	if err != nil {
		t.Fatalf("New(%s): %v", source, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// The shared checks of backend/backendtest, by the names these tests use.
var (
	mustKind   = backendtest.MustKind
	listAll    = backendtest.ListAll
	sortedKeys = backendtest.SortedKeys
)

func testMissingBucket(t *testing.T, m *minio, _ string) {
	_, err := New(context.Background(), "s3://nosuch-bucket/x", Options{Endpoint: m.endpoint, PathStyle: true})
	mustKind(t, err, backend.ErrNotFound)
	if want := `open s3://nosuch-bucket/x: not found: bucket "nosuch-bucket" does not exist`; err.Error() != want {
		t.Errorf("message\n got %q\nwant %q", err, want)
	}
}

func testWrongSecret(t *testing.T, m *minio, bucket string) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
	_, err := New(context.Background(), "s3://"+bucket, Options{Endpoint: m.endpoint, PathStyle: true})
	mustKind(t, err, backend.ErrPermission)
	t.Log(err)

	t.Setenv("AWS_ACCESS_KEY_ID", "nobody")
	_, err = New(context.Background(), "s3://"+bucket, Options{Endpoint: m.endpoint, PathStyle: true})
	mustKind(t, err, backend.ErrPermission)

	// No credentials anywhere (and no IMDS): a permission problem, not an
	// unreachable store.
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	_, err = New(context.Background(), "s3://"+bucket, Options{Endpoint: m.endpoint, PathStyle: true})
	mustKind(t, err, backend.ErrPermission)
	t.Log(err)
}

func testClosedPort(t *testing.T, _ *minio, bucket string) {
	start := time.Now()
	_, err := New(context.Background(), "s3://"+bucket, Options{Endpoint: "http://" + freeAddr(t), PathStyle: true})
	mustKind(t, err, backend.ErrUnavailable)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("New on a closed port took %v", d)
	}
	t.Log(err)

	// An unresolvable host is unavailable too.
	_, err = New(context.Background(), "s3://"+bucket, Options{Endpoint: "http://no-such-host.invalid:9000", PathStyle: true})
	mustKind(t, err, backend.ErrUnavailable)
}

func testInvalidSource(t *testing.T, m *minio, bucket string) {
	for _, src := range []string{"", "s3:/" + bucket, "gs://" + bucket, "s3://", "s3:///x", "s3://host:9000/x", "s3://b?x=1"} {
		_, err := New(context.Background(), src, Options{Endpoint: m.endpoint, PathStyle: true})
		mustKind(t, err, backend.ErrInvalid)
	}
	_, err := New(context.Background(), "s3://"+bucket, Options{Endpoint: "127.0.0.1:9000"})
	mustKind(t, err, backend.ErrInvalid)
}

func testList(t *testing.T, m *minio, bucket string) {
	// No object named plain "data": MinIO stores objects as files, so it
	// would replace the "data/" tree.
	for _, k := range []string{"data/a.bin", "data/sub/b c ü.bin", "data/dir/", "data/empty", "dat", "datax/no", "other/x"} {
		m.put(t, bucket, k, []byte("content of "+k))
	}
	m.put(t, bucket, "data/empty", nil)

	for _, src := range []string{"s3://" + bucket + "/data", "s3://" + bucket + "/data/"} {
		b := open(t, m, src)
		if want := "s3://" + bucket + "/data/@" + m.endpoint; b.ID() != want {
			t.Errorf("ID() = %q, want %q", b.ID(), want)
		}
		got := listAll(t, b)
		want := []string{"a.bin", "dir/", "empty", "sub/b c ü.bin"}
		if keys := sortedKeys(got); strings.Join(keys, "|") != strings.Join(want, "|") {
			t.Fatalf("List keys %q, want %q", keys, want)
		}
		for k, o := range got {
			s, err := b.Stat(context.Background(), k)
			if err != nil {
				t.Fatalf("Stat(%q): %v", k, err)
			}
			if s.Version != o.Version || s.Size != o.Size || s.Version == "" || strings.Contains(s.Version, `"`) ||
				s.ModTime.Sub(o.ModTime).Abs() > time.Second {
				t.Errorf("Stat(%q) = %+v, List gave %+v", k, s, o)
			}
		}
		if got["empty"].Size != 0 || got["a.bin"].Size != int64(len("content of data/a.bin")) {
			t.Errorf("sizes: %+v", got)
		}
	}
	whole := open(t, m, "s3://"+bucket)
	if want := "s3://" + bucket + "/@" + m.endpoint; whole.ID() != want {
		t.Errorf("ID() = %q, want %q", whole.ID(), want)
	}
	if n := len(listAll(t, whole)); n != 7 {
		t.Errorf("listing the whole bucket gave %d objects, want 7", n)
	}
	_, err := whole.Stat(context.Background(), "missing")
	mustKind(t, err, backend.ErrNotFound)

	stop := errors.New("stop")
	if err := whole.List(context.Background(), func(backend.Object) error { return stop }); err != stop {
		t.Errorf("List returned %v, want the callback's error", err)
	}
}

func testListPages(t *testing.T, m *minio, bucket string) {
	const n = 1005 // more than one 1000-key page
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := m.client.PutObject(context.Background(), &s3.PutObjectInput{
				Bucket: aws.String(bucket), Key: aws.String(fmt.Sprintf("p/%04d", i)), Body: bytes.NewReader([]byte{byte(i)}),
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := listAll(t, open(t, m, "s3://"+bucket+"/p")); len(got) != n {
		t.Fatalf("listed %d objects, want %d", len(got), n)
	}
}

func testReadAt(t *testing.T, m *minio, bucket string) {
	data := make([]byte, 10000)
	for i := range data {
		data[i] = byte(mrand.IntN(256))
	}
	m.put(t, bucket, "ds/obj", data)
	m.put(t, bucket, "ds/zero", nil)
	b := open(t, m, "s3://"+bucket+"/ds")
	ctx := context.Background()
	obj, err := b.Stat(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	backendtest.CheckReadAt(t, b, obj, data)
	// Under WithProgress the body's bytes are reported as they arrive:
	// every one of them, before ReadAt returns.
	var reported atomic.Int64
	p := make([]byte, 9000)
	n, err := b.ReadAt(backend.WithProgress(ctx, func(n int) { reported.Add(int64(n)) }), obj, p, 1000)
	if err != nil || n != len(p) || reported.Load() != int64(len(p)) {
		t.Fatalf("ReadAt under WithProgress = %d, %v, %d bytes reported; want %d, nil, %d", n, err, reported.Load(), len(p), len(p))
	}
	zero, err := b.Stat(ctx, "zero")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.ReadAt(ctx, zero, make([]byte, 10), 0); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt on empty object = %d, %v", n, err)
	}

	// A Size larger than the object (stale caller) ends in EOF, not garbage.
	defer func() {
		b.Close()
		_, err := b.ReadAt(ctx, obj, make([]byte, 10), 0)
		mustKind(t, err, backend.ErrUnavailable)
	}()
	big := obj
	big.Size = 20000
	if n, err := b.ReadAt(ctx, big, make([]byte, 10), 15000); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt past the real end = %d, %v", n, err)
	}
}

func testChanged(t *testing.T, m *minio, bucket string) {
	m.put(t, bucket, "f", []byte("version one"))
	b := open(t, m, "s3://"+bucket)
	ctx := context.Background()
	old, err := b.Stat(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	m.put(t, bucket, "f", []byte("version two"))
	_, err = b.ReadAt(ctx, old, make([]byte, 4), 0)
	mustKind(t, err, backend.ErrChanged)

	cur, err := b.Stat(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 11)
	if n, err := b.ReadAt(ctx, cur, p, 0); n != 11 || err != nil || string(p) != "version two" {
		t.Fatalf("ReadAt(current) = %d, %v, %q", n, err, p)
	}

	if _, err := m.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("f")}); err != nil {
		t.Fatal(err)
	}
	_, err = b.ReadAt(ctx, cur, p, 0)
	mustKind(t, err, backend.ErrNotFound)
}
