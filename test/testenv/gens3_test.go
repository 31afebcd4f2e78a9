package testenv

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func TestGenS3Keys(t *testing.T) {
	k, err := NewGenS3Keys(1003, 10)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, key := range k.All() {
		if seen[key] {
			t.Fatalf("key %q twice", key)
		}
		seen[key] = true
		if i > 0 && k.Key(i-1) >= key {
			t.Fatalf("keys %d, %d out of order: %q, %q", i-1, i, k.Key(i-1), key)
		}
		if j, ok := k.Find(key); !ok || j != i {
			t.Fatalf("Find(%q) = %d, %v", key, j, ok)
		}
	}
	if len(seen) != 1003 || k.Len() != 1003 {
		t.Fatalf("%d keys, Len %d", len(seen), k.Len())
	}
	for c := 0; c < k.Dirs(); c++ {
		lo, hi := k.DirRange(c)
		if want := 100 + boolInt(c < 3); hi-lo != want {
			t.Errorf("dir %d: %d keys, want %d", c, hi-lo, want)
		}
		for i := lo; i < hi; i++ {
			if !strings.HasPrefix(k.Key(i), k.DirPrefix(c)) {
				t.Fatalf("key %q is not under %q", k.Key(i), k.DirPrefix(c))
			}
		}
	}
	if k.Key(0) != "train/n01440764/n01440764_0.JPEG" {
		t.Errorf("first key %q", k.Key(0))
	}
	if _, ok := k.Find("train/n01440764/n01440764_100.JPEG2"); ok {
		t.Error("Find of a non-key")
	}
	if _, err := NewGenS3Keys(10, 0); err == nil {
		t.Error("0 dirs accepted")
	}
}

func TestGenS3Bytes(t *testing.T) {
	whole := GenS3Bytes("a/b", 1000)
	for _, off := range []int64{0, 1, 7, 8, 9, 500, 999} {
		p := make([]byte, min(13, 1000-off))
		GenS3ReadAt("a/b", p, off)
		if !bytes.Equal(p, whole[off:off+int64(len(p))]) {
			t.Fatalf("ReadAt at %d differs from the whole", off)
		}
	}
	if bytes.Equal(whole, GenS3Bytes("a/c", 1000)) {
		t.Error("two keys, same bytes")
	}
	if e := GenS3ETag("a/b", 10); len(e) != 34 || e == GenS3ETag("a/b", 11) || e != GenS3ETag("a/b", 10) {
		t.Errorf("ETag %s", e)
	}
}

// listAll lists the bucket through the SDK: flat, or as a tree with
// delimiter "/" (each common prefix listed in turn); it returns the keys
// and how many times each common prefix came back.
func listAll(t *testing.T, c *s3.Client, bucket string, maxKeys int32, delim bool) ([]string, map[string]int) {
	t.Helper()
	var keys []string
	cps := map[string]int{}
	todo := []string{""}
	for len(todo) > 0 {
		prefix := todo[0]
		todo = todo[1:]
		in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)}
		if maxKeys > 0 {
			in.MaxKeys = aws.Int32(maxKeys)
		}
		if delim {
			in.Delimiter = aws.String("/")
		}
		pg := s3.NewListObjectsV2Paginator(c, in)
		for pg.HasMorePages() {
			page, err := pg.NextPage(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if n := len(page.Contents) + len(page.CommonPrefixes); maxKeys > 0 && n > int(maxKeys) {
				t.Fatalf("page of %d entries, max-keys %d", n, maxKeys)
			}
			for _, o := range page.Contents {
				keys = append(keys, aws.ToString(o.Key))
			}
			for _, p := range page.CommonPrefixes {
				cps[aws.ToString(p.Prefix)]++
				todo = append(todo, aws.ToString(p.Prefix))
			}
		}
	}
	return keys, cps
}

// TestGenS3List lists the whole bucket through the real SDK client, flat
// and as a tree, in pages of several sizes: every key exactly once.
func TestGenS3List(t *testing.T) {
	g := StartGenS3(t, "gen", 2503, 7, 100)
	c := NewS3Client(g.Endpoint(), "k", "s")
	want := slices.Collect(func(yield func(string) bool) {
		for _, k := range g.All() {
			if !yield(k) {
				return
			}
		}
	})
	for _, maxKeys := range []int32{0, 1000, 333, 2} {
		for _, delim := range []bool{false, true} {
			if maxKeys == 2 && !delim {
				continue // 1,250 requests, and nothing flat paging at 333 missed
			}
			keys, cps := listAll(t, c, "gen", maxKeys, delim)
			if !delim {
				if !slices.Equal(keys, want) {
					t.Fatalf("max-keys %d: flat listing: %d keys, want %d in order", maxKeys, len(keys), len(want))
				}
				continue
			}
			slices.Sort(keys)
			if !slices.Equal(keys, want) {
				t.Fatalf("max-keys %d: tree listing: %d keys, want %d", maxKeys, len(keys), len(want))
			}
			if len(cps) != 8 || cps["train/"] != 1 {
				t.Fatalf("max-keys %d: common prefixes %v", maxKeys, cps)
			}
			for p, n := range cps {
				if n != 1 {
					t.Fatalf("max-keys %d: common prefix %q listed %d times", maxKeys, p, n)
				}
			}
		}
	}
	out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("gen"),
		StartAfter: aws.String(g.Key(2500)), EncodingType: "url"})
	if err != nil || len(out.Contents) != 2 || aws.ToBool(out.IsTruncated) {
		t.Fatalf("start-after the third last key: %v, %v", out, err)
	}
	if g.ListCount() == 0 {
		t.Error("ListCount")
	}
}

func TestGenS3Get(t *testing.T) {
	g := StartGenS3(t, "gen", 50, 3, 5000)
	c := NewS3Client(g.Endpoint(), "k", "s")
	ctx := context.Background()
	key := g.Key(17)
	h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("gen"), Key: aws.String(key)})
	if err != nil || aws.ToInt64(h.ContentLength) != 5000 || aws.ToString(h.ETag) != GenS3ETag(key, 5000) {
		t.Fatalf("HEAD: %v, %v", h, err)
	}
	whole := GenS3Bytes(key, 5000)
	for _, rg := range []struct {
		spec   string
		lo, hi int
	}{{"bytes=100-4099", 100, 4100}, {"bytes=4990-", 4990, 5000}, {"bytes=-7", 4993, 5000}, {"bytes=0-999999", 0, 5000}} {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("gen"), Key: aws.String(key),
			Range: aws.String(rg.spec), IfMatch: h.ETag})
		if err != nil {
			t.Fatalf("GET %s: %v", rg.spec, err)
		}
		got, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if !bytes.Equal(got, whole[rg.lo:rg.hi]) {
			t.Fatalf("GET %s: %d bytes, not GenS3Bytes[%d:%d]", rg.spec, len(got), rg.lo, rg.hi)
		}
	}
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("gen"), Key: aws.String(key), IfMatch: aws.String(`"nope"`)})
	if err == nil || !strings.Contains(err.Error(), "412") {
		t.Fatalf("If-Match mismatch: %v", err)
	}
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("gen"), Key: aws.String(key), Range: aws.String("bytes=5000-5001")})
	if err == nil || !strings.Contains(err.Error(), "416") {
		t.Fatalf("range past the end: %v", err)
	}
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("gen"), Key: aws.String(key + "x")})
	if err == nil || !strings.Contains(err.Error(), "NoSuchKey") {
		t.Fatalf("missing key: %v", err)
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("gen"), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if !bytes.Equal(got, whole) {
		t.Fatal("whole GET differs")
	}
	if g.GetCount() != 8 || g.HeadCount() != 1 {
		t.Fatalf("counts: %+v", g.Counters())
	}
	resp, err := http.Get(g.Endpoint() + "/_gens3/counters")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != `{"lists":0,"gets":8,"heads":1}` {
		t.Fatalf("counters: %s", body)
	}
	empty := StartGenS3(t, "zero", 3, 1, 0)
	out, err = NewS3Client(empty.Endpoint(), "k", "s").GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("zero"), Key: aws.String(empty.Key(1))})
	if err != nil {
		t.Fatalf("GET of an empty object: %v", err)
	}
	if got, _ := io.ReadAll(out.Body); len(got) != 0 {
		t.Fatalf("empty object: %d bytes", len(got))
	}
	out.Body.Close()
}

// genListXML is the part of a ListObjectsV2 answer the fuzz test checks.
type genListXML struct {
	KeyCount              int
	MaxKeys               int
	IsTruncated           bool
	NextContinuationToken string
	Contents              []struct{ Key string }
	CommonPrefixes        []struct{ Prefix string }
}

var fuzzGen = sync.OnceValue(func() *GenS3 {
	g, err := NewGenS3("b", 300, 4, 10)
	if err != nil {
		panic(err)
	}
	return g
})

// FuzzGenS3List: any query string gets an error or a well-formed page:
// at most max-keys entries, in order, under the prefix, past start-after,
// and a continuation that resumes after the page's last entry (past every
// key under it when it was a common prefix).
func FuzzGenS3List(f *testing.F) {
	for _, q := range []string{"list-type=2", "list-type=2&max-keys=7", "list-type=2&delimiter=/&prefix=train/&max-keys=2",
		"list-type=2&prefix=train/n01440&delimiter=_&encoding-type=url", "list-type=2&start-after=train/n01440764/n01440764_5.JPEG",
		"list-type=2&continuation-token=UHRyYWlu", "list-type=2&continuation-token=%%%", "max-keys=-1", "list-type=2&delimiter=JPEG"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		g := fuzzGen()
		page := func(raw string) (int, genListXML) {
			r := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/b", RawQuery: raw}, Header: http.Header{}}
			rec := httptest.NewRecorder()
			g.ServeHTTP(rec, r)
			var res genListXML
			if rec.Code == 200 {
				if err := xml.Unmarshal(rec.Body.Bytes(), &res); err != nil {
					t.Fatalf("%q: malformed answer: %v\n%s", raw, err, rec.Body)
				}
			} else if rec.Code != 400 {
				t.Fatalf("%q: status %d", raw, rec.Code)
			}
			return rec.Code, res
		}
		code, res := page(raw)
		if code != 200 {
			return
		}
		q, _ := url.ParseQuery(raw)
		lq, err := parseGenListQuery(q)
		if err != nil {
			t.Fatalf("%q: answered 200, but the query does not parse: %v", raw, err)
		}
		n := len(res.Contents) + len(res.CommonPrefixes)
		if n != res.KeyCount || n > lq.maxKeys || res.MaxKeys != lq.maxKeys {
			t.Fatalf("%q: %d entries, KeyCount %d, max-keys %d", raw, n, res.KeyCount, res.MaxKeys)
		}
		if lq.urlEnc {
			return // the keys are escaped; the unescaped checks below are the same code
		}
		last, lastPrefix := "", false
		entries := func(res genListXML) []string {
			var e []string
			for _, c := range res.Contents {
				e = append(e, c.Key)
			}
			for _, p := range res.CommonPrefixes {
				e = append(e, p.Prefix)
			}
			slices.Sort(e)
			return e
		}
		for _, e := range entries(res) {
			if !strings.HasPrefix(e, lq.prefix) || e <= last || lq.token == "" && lq.startAfter != "" && e <= lq.startAfter && !strings.HasPrefix(lq.startAfter, e) {
				t.Fatalf("%q: entry %q out of place (prefix %q, after %q)", raw, e, lq.prefix, last)
			}
			last = e
			lastPrefix = slices.ContainsFunc(res.CommonPrefixes, func(p struct{ Prefix string }) bool { return p.Prefix == e })
		}
		if res.IsTruncated != (res.NextContinuationToken != "") && n > 0 {
			t.Fatalf("%q: truncated %v with token %q", raw, res.IsTruncated, res.NextContinuationToken)
		}
		if res.NextContinuationToken == "" {
			return
		}
		q.Set("continuation-token", res.NextContinuationToken)
		code, next := page(q.Encode())
		if code != 200 {
			t.Fatalf("%q: continuation refused", raw)
		}
		for _, e := range entries(next) {
			if e <= last || lastPrefix && strings.HasPrefix(e, last) {
				t.Fatalf("%q: continuation after %q gave %q", raw, last, e)
			}
		}
	})
}

// FuzzParseRange: a Range header parses to a range inside the object or
// is refused; never a panic.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"bytes=0-9", "bytes=5-", "bytes=-3", "bytes=-0", "bytes=9-1", "bytes=1-2,4-5", "bytes=+1-2", "bytes=99999999999999999999-"} {
		f.Add(s, int64(10))
	}
	f.Fuzz(func(t *testing.T, s string, size int64) {
		if size < 0 {
			return
		}
		start, end, ok := parseRange(s, size)
		if ok && (start < 0 || end < start || end >= size) {
			t.Fatalf("parseRange(%q, %d) = %d, %d", s, size, start, end)
		}
	})
}

func BenchmarkGenS3ListPage(b *testing.B) {
	g, err := NewGenS3("b", 1281167, 1000, 1024)
	if err != nil {
		b.Fatal(err)
	}
	lq := genListQuery{maxKeys: 1000, startAfter: g.Key(640000)}
	var buf bytes.Buffer
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf.Reset()
		g.writeList(&buf, lq, g.page(lq))
	}
	b.ReportMetric(float64(buf.Len()), "bytes/page")
}
