package s3

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/test/testenv"
)

// TestCheckAnswer: an ETag version is checked against the answer's ETag; a
// Last-Modified version against the answer's Last-Modified header, which
// has whole seconds: the listed time rounded up to the second or earlier
// passes, a later one is a new object.
func TestCheckAnswer(t *testing.T) {
	lm := "lm:2025-11-25T12:00:00.7Z"
	cases := []struct {
		version, etag, lastModified string
		changed                     bool
	}{
		{"abc", `"abc"`, "", false},
		{"abc", `"def"`, "", true},
		{"abc", "", "", false},
		{"", `"def"`, "", false},
		{lm, "", "Tue, 25 Nov 2025 12:00:00 GMT", false},
		{lm, "", "Tue, 25 Nov 2025 11:59:59 GMT", false},
		{lm, "", "Tue, 25 Nov 2025 12:00:01 GMT", false}, // rounded up
		{lm, "", "Tue, 25 Nov 2025 12:00:02 GMT", true},
		{lm, `"abc"`, "Tue, 25 Nov 2025 12:00:00 GMT", false}, // an ETag on GET only can't be compared
		{lm, "", "", false},
		{lm, "", "yesterday", true},
	}
	for _, c := range cases {
		err := checkAnswer(backend.Object{Key: "k", Version: c.version}, c.etag, c.lastModified)
		if changed := errors.Is(err, backend.ErrChanged); changed != c.changed {
			t.Errorf("version %q, answer ETag %q Last-Modified %q: %v; want changed=%v", c.version, c.etag, c.lastModified, err, c.changed)
		}
	}
	if got := ifMatch(lm); got != "" {
		t.Errorf("ifMatch(%q) = %q, want none", lm, got)
	}
	if got := ifMatch("abc"); got != "abc" {
		t.Errorf("ifMatch(abc) = %q", got)
	}
}

// TestNoETags reads from MinIO behind a proxy that hides every ETag: List
// and Stat bind versions to Last-Modified, List warns once, reads work, and
// after an overwrite in a later second a read of the listed version fails
// with ErrChanged rather than return the new bytes.
func TestNoETags(t *testing.T) {
	m := startMinio(t, minioConfig{})
	isolateEnv(t)
	const bucket = "noetag"
	m.mkbucket(t, bucket)
	oldData, newData := bytes.Repeat([]byte("old!"), 1000), bytes.Repeat([]byte("new!"), 1000)
	m.put(t, bucket, "obj", oldData)
	m.put(t, bucket, "other", []byte("x"))
	proxy := testenv.StartETagProxy(t, m.endpoint)

	var logs syncBuffer
	b, err := New(context.Background(), "s3://"+bucket, Options{Endpoint: proxy.Endpoint(), PathStyle: true,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	listAll(t, b)
	objs := listAll(t, b)
	obj := objs["obj"]
	if !strings.HasPrefix(obj.Version, lmPrefix) || obj.Version != lmPrefix+obj.ModTime.UTC().Format(time.RFC3339Nano) {
		t.Fatalf("List without ETags: version %q, want %q + Last-Modified (%v)", obj.Version, lmPrefix, obj.ModTime)
	}
	if n := strings.Count(logs.String(), "the store gives no ETags"); n != 1 {
		t.Errorf("two listings warned %d times about missing ETags, want once:\n%s", n, logs.String())
	}
	if st, err := b.Stat(context.Background(), "obj"); err != nil || !strings.HasPrefix(st.Version, lmPrefix) {
		t.Errorf("Stat without ETags: %+v, %v; want an %q version", st, err, lmPrefix)
	}
	p := make([]byte, len(oldData))
	if n, err := b.ReadAt(context.Background(), obj, p, 0); n != len(p) || err != nil || !bytes.Equal(p, oldData) {
		t.Fatalf("ReadAt of the listed version: %d, %v", n, err)
	}

	err = testenv.WaitFor(5*time.Second, 10*time.Millisecond, "a later second", func() (bool, error) {
		return time.Now().Truncate(time.Second).After(obj.ModTime.Truncate(time.Second).Add(time.Second)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	m.put(t, bucket, "obj", newData)
	n, err := b.ReadAt(context.Background(), obj, p, 0)
	mustKind(t, err, backend.ErrChanged)
	if n != 0 || !strings.Contains(err.Error(), "Last-Modified") {
		t.Errorf("ReadAt after the overwrite: %d bytes, %v; want 0 and a Last-Modified mismatch", n, err)
	}
	if now := listAll(t, b)["obj"]; now.Version == obj.Version {
		t.Errorf("the overwritten object kept version %q", now.Version)
	} else if n, err := b.ReadAt(context.Background(), now, p, 0); (err != nil && err != io.EOF) || !bytes.Equal(p[:n], newData) {
		t.Errorf("ReadAt of the new version: %d, %v", n, err)
	}
}
