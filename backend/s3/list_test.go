package s3

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/backend"
)

// testListWalk lists a tree whose prefix has more subdirectories than the
// listing's parallelism (split into flat ranges) and fewer (one delimited
// listing each), with the prefix's own files, markers and deep keys
// between the subdirectories' ranges: every key must come exactly once,
// as a plain sequential listing gives them.
func testListWalk(t *testing.T, m *minio, bucket string) {
	var keys []string
	for d := range 40 {
		for f := range 3 {
			keys = append(keys, fmt.Sprintf("w/d%02d/f%d", d, f))
		}
	}
	keys = append(keys, "w/top", "w/d05.txt", "w/d10-x", "w/d20/", "w/d30/x/y/z", "w/d39/deep/er/file", "w/zz", "w/", "wx/not-mine")
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, k := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			m.put(t, bucket, k, []byte(k))
		}()
	}
	wg.Wait()

	var want []string
	pages := s3.NewListObjectsV2Paginator(m.client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("w/")})
	for pages.HasMorePages() {
		page, err := pages.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			if k := strings.TrimPrefix(aws.ToString(o.Key), "w/"); k != "" {
				want = append(want, k)
			}
		}
	}
	if len(want) < 120 {
		t.Fatalf("the store lists %d keys under w/, want >= 120", len(want))
	}
	for _, parallel := range []int{1, 2, 7, 64} {
		b, err := New(context.Background(), "s3://"+bucket+"/w", Options{Endpoint: m.endpoint, PathStyle: true, ListParallel: parallel})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		if err := b.List(context.Background(), func(o backend.Object) error {
			got = append(got, o.Key)
			return nil
		}); err != nil {
			t.Fatalf("parallel %d: %v", parallel, err)
		}
		b.Close()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("parallel %d: listed %d keys, want %d\n got %q\nwant %q", parallel, len(got), len(want), got, want)
		}
	}
}

func TestSplitSubdirs(t *testing.T) {
	subdirs := []string{"p/a/", "p/b/", "p/c/", "p/d/", "p/e/"}
	if got := splitSubdirs("p/", subdirs, 8); len(got) != 5 || got[0].flat || got[4].prefix != "p/e/" {
		t.Errorf("few subdirs: %+v, want one delimited listing each", got)
	}
	got := splitSubdirs("p/", subdirs, 1)
	if len(got) != 4 {
		t.Fatalf("many subdirs, parallel 1: %d tasks, want 4", len(got))
	}
	for i, task := range got {
		if !task.flat || task.prefix != "p/" {
			t.Errorf("task %d: %+v, want a flat range of p/", i, task)
		}
		if i > 0 && task.from != got[i-1].to {
			t.Errorf("task %d starts at %q, the last ended at %q: ranges must tile", i, task.from, got[i-1].to)
		}
	}
	if got[0].from != "p/a/" || got[len(got)-1].to != "" {
		t.Errorf("ranges %+v must start at the first subdirectory and run to the end", got)
	}
}

// listObjects lists b into a map, failing the test on an error.
func listObjects(t *testing.T, b *Backend) map[string]backend.Object {
	t.Helper()
	got := map[string]backend.Object{}
	if err := b.List(context.Background(), func(o backend.Object) error {
		if _, dup := got[o.Key]; dup {
			t.Errorf("%q listed twice", o.Key)
		}
		got[o.Key] = o
		return nil
	}); err != nil {
		t.Fatalf("List: %v", err)
	}
	return got
}

// testListRaw: the listing made without the SDK (listraw.go) gives every
// key the SDK's gives, byte for byte, with the same sizes, times and
// versions; and keys the SDK can't list at all (characters XML 1.0 can't
// carry, which the store sends URL-encoded), as they were stored.
func testListRaw(t *testing.T, m *minio, bucket string) {
	printable := []string{
		"sp ace/ünï 文件.bin", "a+b=c&d,e;f:g@h$i!j'k(l)m*n", "pct%20lit%2F", "plus+", "tilde~und_er-dot.",
		"hash#q?uestion", "brackets[x]{y}^`|<>\"", "amp&amp;lit", "deep/er/and/deeper/key", "dir/", "tab\tkey",
		"trailing space ", "😀/emoji", "d0/a", "d1/b", "d2/c", "d3/x/y",
	}
	control := []string{"ctl/bell\x07", "ctl/cr\rlf\n", "ctl/crlf\r\n.", "ctl/esc\x1b[0m"}
	for i, k := range append(slices.Clone(printable), control...) {
		m.put(t, bucket, "odd/"+k, bytes.Repeat([]byte{'x'}, i))
	}
	for _, parallel := range []int{1, 32} {
		b, err := New(context.Background(), "s3://"+bucket+"/odd", Options{Endpoint: m.endpoint, PathStyle: true, ListParallel: parallel})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if b.raw == nil {
			t.Fatal("List goes through the SDK; want its pages fetched directly")
		}
		got := listObjects(t, b)
		for i, k := range append(slices.Clone(printable), control...) {
			if o, ok := got[k]; !ok || o.Size != int64(i) || o.Version == "" || o.ModTime.IsZero() {
				t.Errorf("parallel %d: key %q listed as %+v (%v), want %d bytes with a version", parallel, k, o, ok, i)
			}
		}
		if len(got) != len(printable)+len(control) {
			t.Errorf("parallel %d: %d keys listed, want %d: %q", parallel, len(got), len(printable)+len(control), sortedKeys(got))
		}

		// The SDK on the printable keys alone: the same objects.
		sdk, err := New(context.Background(), "s3://"+bucket+"/odd", Options{Endpoint: m.endpoint, PathStyle: true, ListParallel: parallel})
		if err != nil {
			t.Fatal(err)
		}
		defer sdk.Close()
		sdk.raw = nil
		var viaSDK []backend.Object
		err = sdk.List(context.Background(), func(o backend.Object) error {
			viaSDK = append(viaSDK, o)
			return nil
		})
		if err != nil {
			// The store writes the control characters into the
			// XML as they are, which the SDK can't parse.
			t.Logf("parallel %d: the SDK can't list the keys with control characters: %v", parallel, err)
		}
		n := 0
		for _, o := range viaSDK {
			if strings.HasPrefix(o.Key, "ctl/") {
				continue
			}
			n++
			if r := got[o.Key]; r != o {
				t.Errorf("parallel %d: %q listed as %+v, the SDK lists %+v", parallel, o.Key, r, o)
			}
		}
		if err == nil && n != len(printable) {
			t.Errorf("parallel %d: the SDK lists %d printable keys, want %d", parallel, n, len(printable))
		}
	}

	// A node clock an hour off: the listing is signed again at the
	// store's time, as the GETs are (clock.go).
	b := open(t, m, "s3://"+bucket+"/odd")
	b.raw.clock.now = func() time.Time { return time.Now().Add(time.Hour) }
	if got := listObjects(t, b); len(got) != len(printable)+len(control) {
		t.Errorf("clock off: %d keys listed, want %d", len(got), len(printable)+len(control))
	}
}

// testListRetry: a listing the store refuses for a moment (503 SlowDown)
// is asked again; one it refuses outright (403, 404) is not, and fails as
// the SDK's listing does; failures that outlast the attempts are reported.
func testListRetry(t *testing.T, m *minio, bucket string) {
	b, proxy, _ := behindFaultProxy(t, m, bucket, []byte("x"))
	if b.raw == nil {
		t.Fatal("List goes through the SDK; want its pages fetched directly")
	}
	fail := func(status int, code string, times int32) {
		proxy.listFailStatus, proxy.listFailCode = status, code
		proxy.listFailed.Store(0)
		proxy.listFails.Store(times)
	}
	list := func(b *Backend) error {
		return b.List(context.Background(), func(backend.Object) error { return nil })
	}

	fail(503, "SlowDown", 2)
	if err := list(b); err != nil {
		t.Fatalf("List after two SlowDown answers: %v", err)
	}
	if f := proxy.listFailed.Load(); f != 2 {
		t.Fatalf("%d listings refused, want 2", f)
	}

	fail(500, "InternalError", 100)
	err := list(b)
	mustKind(t, err, backend.ErrUnavailable)
	if f := proxy.listFailed.Load(); f != sdkAttempts {
		t.Fatalf("a failing store was asked %d times, want %d", f, sdkAttempts)
	}
	t.Log(err)
	proxy.listFails.Store(0)

	sdk, err := New(context.Background(), "s3://"+bucket, Options{Endpoint: proxy.url, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sdk.Close()
	sdk.raw = nil
	for _, c := range []struct {
		status int
		code   string
		kind   error
	}{
		{403, "AccessDenied", backend.ErrPermission},
		{404, "NoSuchBucket", backend.ErrNotFound},
	} {
		fail(c.status, c.code, 1)
		err := list(b)
		mustKind(t, err, c.kind)
		if f := proxy.listFailed.Load(); f != 1 {
			t.Fatalf("%s: asked %d times, want once", c.code, f)
		}
		fail(c.status, c.code, 1)
		sdkErr := list(sdk)
		mustKind(t, sdkErr, c.kind)
		if err.Error() != sdkErr.Error() {
			t.Errorf("%s: error %q, the SDK's %q", c.code, err, sdkErr)
		}
	}
	proxy.listFails.Store(0)

	// A store that refuses encoding-type=url is listed without it.
	proxy.refuseURLKeys.Store(true)
	if got := listObjects(t, b); len(got) != 1 || got["f"].Size != 1 {
		t.Fatalf("listing a store that refuses URL-encoded keys: %v", got)
	}
	if !b.raw.plainList.Load() {
		t.Fatal("the backend did not note that the store refuses URL-encoded keys")
	}
}
