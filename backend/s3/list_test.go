package s3

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

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
