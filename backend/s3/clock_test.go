package s3

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/dsmount/dsmount/backend"
)

// statusLog is an HTTP client that records the status of every answer.
type statusLog struct {
	hc aws.HTTPClient
	mu sync.Mutex
	st []int
}

func (l *statusLog) Do(req *http.Request) (*http.Response, error) {
	resp, err := l.hc.Do(req)
	if err == nil {
		l.mu.Lock()
		l.st = append(l.st, resp.StatusCode)
		l.mu.Unlock()
	}
	return resp, err
}

func (l *statusLog) take() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.st
	l.st = nil
	return st
}

// testClockSkew runs the lean GET path with the node's clock an hour off
// either way: MinIO refuses a signature that far from its own clock, the
// getter learns the offset from the refusal's Date and signs again, once;
// later GETs are signed right the first time. A refusal the clocks don't
// explain (a wrong secret) is not retried.
func testClockSkew(t *testing.T, m *minio, bucket string) {
	data := bytes.Repeat([]byte("skew"), 3000)
	m.put(t, bucket, "ds/obj", data)
	b := open(t, m, "s3://"+bucket+"/ds")
	if b.raw == nil {
		t.Fatal("the backend makes its GETs through the SDK; this test is for the lean path")
	}
	log := &statusLog{hc: b.raw.hc}
	b.raw.hc = log
	ctx := context.Background()
	obj, err := b.Stat(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	read := func() error {
		p := make([]byte, len(data))
		n, err := b.ReadAt(ctx, obj, p, 0)
		if err == nil && !bytes.Equal(p[:n], data) {
			t.Fatalf("read %d bytes that differ from the object", n)
		}
		return err
	}

	for _, skew := range []time.Duration{time.Hour, -time.Hour} {
		b.raw.clock.now = func() time.Time { return time.Now().Add(skew) }
		b.raw.clock.offset.Store(0)
		if err := read(); err != nil {
			t.Fatalf("clock %v off: ReadAt: %v", skew, err)
		}
		if st := log.take(); len(st) != 2 || st[0] != http.StatusForbidden || st[1]/100 != 2 {
			t.Fatalf("clock %v off: answers %v, want a refusal then the data", skew, st)
		}
		if off := time.Duration(b.raw.clock.offset.Load()); (off + skew).Abs() > time.Minute {
			t.Fatalf("clock %v off: learned offset %v", skew, off)
		}
		if err := read(); err != nil {
			t.Fatalf("clock %v off, second read: %v", skew, err)
		}
		if st := log.take(); len(st) != 1 || st[0]/100 != 2 {
			t.Fatalf("clock %v off, second read: answers %v, want the data at once", skew, st)
		}
	}

	// Clocks that agree: a refused signature is the credentials' fault,
	// and signing it again would change nothing.
	b.raw.clock.now = time.Now
	b.raw.clock.offset.Store(0)
	b.raw.creds = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: minioUser, SecretAccessKey: "not-the-secret"}, nil
	})
	b.raw.signer = v4.NewSigner() // its cache of signing keys is by access key
	mustKind(t, read(), backend.ErrPermission)
	if st := log.take(); len(st) != 1 || st[0] != http.StatusForbidden {
		t.Fatalf("wrong secret: answers %v, want one refusal", st)
	}
	if off := b.raw.clock.offset.Load(); off != 0 {
		t.Fatalf("wrong secret: learned an offset of %v", time.Duration(off))
	}

	// Both wrong: one retry at the store's time, then the error.
	b.raw.clock.now = func() time.Time { return time.Now().Add(time.Hour) }
	mustKind(t, read(), backend.ErrPermission)
	if st := log.take(); len(st) != 2 {
		t.Fatalf("wrong secret and clock: answers %v, want two refusals", st)
	}
}
