package s3

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithytime "github.com/aws/smithy-go/time"

	"github.com/dsmount/dsmount/test/testenv"
)

// The page decoder must read every page the SDK reads as the SDK reads it
// (listxml.go); these tests hold it against the SDK's own deserializer,
// run on the same bytes through a client whose HTTP "transport" answers
// with them.

// cannedBody carries the answer a cannedClient gives, in the request's
// context.
type cannedBody struct{}

type cannedClient struct{}

func (cannedClient) Do(req *http.Request) (*http.Response, error) {
	body, _ := req.Context().Value(cannedBody{}).([]byte)
	return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{"Content-Type": {"application/xml"}},
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: req}, nil
}

func newCannedSDK() *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://canned.invalid"), UsePathStyle: true,
		HTTPClient: cannedClient{}, Credentials: aws.AnonymousCredentials{}, RetryMaxAttempts: 1})
}

// sdkDecode is the SDK's reading of a ListObjectsV2 answer.
func sdkDecode(c *s3.Client, body []byte) (*s3.ListObjectsV2Output, error) {
	ctx := context.WithValue(context.Background(), cannedBody{}, body)
	return c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("b")})
}

// sdkPage is what the raw decoder should make of the SDK's reading: keys
// and prefixes decoded as url.QueryUnescape does when the page says
// EncodingType url. ok is false where that decoding fails.
func sdkPage(out *s3.ListObjectsV2Output) (p listPage, ok bool) {
	dec := func(s string) string {
		if out.EncodingType != "url" {
			return s
		}
		d, err := url.QueryUnescape(s)
		if err != nil {
			ok = false
		}
		return d
	}
	ok = true
	for _, o := range out.Contents {
		p.objs = append(p.objs, listObject{key: dec(aws.ToString(o.Key)), size: aws.ToInt64(o.Size),
			modTime: aws.ToTime(o.LastModified), etag: aws.ToString(o.ETag)})
	}
	for _, cp := range out.CommonPrefixes {
		p.prefixes = append(p.prefixes, dec(aws.ToString(cp.Prefix)))
	}
	p.truncated = aws.ToBool(out.IsTruncated)
	p.next = aws.ToString(out.NextContinuationToken)
	return p, ok
}

// samePage says how got differs from want, or "".
func samePage(got, want *listPage) string {
	if len(got.objs) != len(want.objs) {
		return fmt.Sprintf("%d objects, want %d", len(got.objs), len(want.objs))
	}
	for i, g := range got.objs {
		w := want.objs[i]
		if g.key != w.key || g.size != w.size || g.etag != w.etag || !g.modTime.Equal(w.modTime) || g.modTime.IsZero() != w.modTime.IsZero() {
			return fmt.Sprintf("object %d: %+v, want %+v", i, g, w)
		}
	}
	if !slices.Equal(got.prefixes, want.prefixes) && len(got.prefixes)+len(want.prefixes) > 0 {
		return fmt.Sprintf("prefixes %q, want %q", got.prefixes, want.prefixes)
	}
	if got.truncated != want.truncated || got.next != want.next {
		return fmt.Sprintf("truncated %v next %q, want %v %q", got.truncated, got.next, want.truncated, want.next)
	}
	return ""
}

// checkAgainstSDK decodes body both ways: where the SDK reads it, the raw
// decoder must read the same.
func checkAgainstSDK(t *testing.T, c *s3.Client, body []byte) (*listPage, error) {
	t.Helper()
	var d pageDecoder
	got, err := d.decode(body)
	out, sdkErr := sdkDecode(c, body)
	if sdkErr != nil {
		return got, err // lenient where the SDK refuses: nothing to compare
	}
	want, ok := sdkPage(out)
	switch {
	case !ok && err == nil:
		t.Fatalf("decoded a page with a bad URL escape: %+v\n%q", got, body)
	case !ok:
	case err != nil:
		t.Fatalf("the SDK reads the page, the decoder fails: %v\n%q", err, body)
	default:
		if diff := samePage(got, &want); diff != "" {
			t.Fatalf("%s\n%q", diff, body)
		}
	}
	return got, err
}

const pageHead = `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`

func TestDecodePage(t *testing.T) {
	c := newCannedSDK()
	obj := func(key, rest string) string {
		return "<Contents><Key>" + key + "</Key><LastModified>2024-01-02T03:04:05.678Z</LastModified>" +
			"<ETag>&quot;0123abcd&quot;</ETag><Size>42</Size>" + rest + "<StorageClass>STANDARD</StorageClass></Contents>"
	}
	cases := []struct {
		name, body string
		keys       []string // nil: the decoder must fail
		prefixes   []string
	}{
		{"empty body", "", []string{}, nil},
		{"declaration only", `<?xml version="1.0"?>`, []string{}, nil},
		{"self-closed root", `<ListBucketResult/>`, []string{}, nil},
		{"plain", pageHead + `<Name>b</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated>` +
			`<NextContinuationToken>tok/en+=</NextContinuationToken>` + obj("p/a", "") + obj("p/b c", `<Owner><ID>x</ID><DisplayName>y</DisplayName></Owner>`) +
			`<CommonPrefixes><Prefix>p/d/</Prefix></CommonPrefixes></ListBucketResult>`, []string{"p/a", "p/b c"}, []string{"p/d/"}},
		{"entities and CDATA", pageHead + obj("a&amp;b&lt;c&gt;d&quot;e&apos;f&#38;g&#x4E2D;&#x1F600;", "") + obj("<![CDATA[x<y>&amp;]]>", "") + `</ListBucketResult>`,
			[]string{"a&b<c>d\"e'f&g中😀", "x<y>&amp;"}, nil},
		{"line ends", pageHead + obj("a\r\nb\rc\n", "") + obj("&#13;\n", "") + `</ListBucketResult>`, []string{"a\nb\nc\n", "\r\n"}, nil},
		{"url encoded", pageHead + `<EncodingType>url</EncodingType>` + obj("sp+ace%20%2B%0D%01%E6%96%87", "") +
			`<CommonPrefixes><Prefix>d%2Fx+/</Prefix></CommonPrefixes></ListBucketResult>`, []string{"sp ace +\r\x01文"}, []string{"d/x /"}},
		{"url encoding said last", pageHead + obj("a%41", "") + `<EncodingType>url</EncodingType></ListBucketResult>`, []string{"aA"}, nil},
		{"not url encoded", pageHead + obj("a%41+", "") + `</ListBucketResult>`, []string{"a%41+"}, nil},
		{"bad url escape", pageHead + `<EncodingType>url</EncodingType>` + obj("a%4", "") + `</ListBucketResult>`, nil, nil},
		{"names folded and prefixed", `<s3:listbucketresult xmlns:s3="x"><s3:CONTENTS><s3:key>k</s3:key><SIZE>7</SIZE></s3:CONTENTS>` +
			`<commonprefixes><prefix>q/</prefix></commonprefixes><istruncated>false</istruncated></s3:listbucketresult>`, []string{"k"}, []string{"q/"}},
		{"self-closed values", pageHead + `<Contents><Key/><ETag/></Contents><Contents/><CommonPrefixes/></ListBucketResult>`, []string{"", ""}, []string{""}},
		{"the last of repeated values", pageHead + `<Contents><Key>a</Key><Key>b</Key></Contents><IsTruncated>true</IsTruncated><IsTruncated>false</IsTruncated></ListBucketResult>`, []string{"b"}, nil},
		{"unknown elements at depth", pageHead + `<Foo><Contents><Key>no</Key></Contents></Foo><Contents><X><Key>no</Key></X><Key>yes</Key></Contents></ListBucketResult>`, []string{"yes"}, nil},
		{"attributes and comments", `<!-- c --><ListBucketResult a="1>2" b='/>'><!-- <Contents> --><Contents k="v"><Key>k</Key></Contents></ListBucketResult >trailing <junk`, []string{"k"}, nil},
		{"doctype", `<!DOCTYPE x [ <!ELEMENT x ANY> ]><ListBucketResult><Contents><Key>k</Key></Contents></ListBucketResult>`, []string{"k"}, nil},
		{"unclosed root", pageHead + obj("a", ""), nil, nil},
		{"mismatched tags", pageHead + `<Contents><Key>a</Key></Content></ListBucketResult>`, nil, nil},
		{"element inside a value", pageHead + `<Contents><Key>a<b/></Key></Contents></ListBucketResult>`, nil, nil},
		{"unknown entity", pageHead + obj("a&nbsp;", "") + `</ListBucketResult>`, nil, nil},
		{"bad size", pageHead + `<Contents><Key>a</Key><Size>12x</Size></Contents></ListBucketResult>`, nil, nil},
		{"bad time", pageHead + `<Contents><Key>a</Key><LastModified>2024-02-30T00:00:00Z</LastModified></Contents></ListBucketResult>`, nil, nil},
		{"bad truncation", pageHead + `<IsTruncated>yes</IsTruncated></ListBucketResult>`, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			page, err := checkAgainstSDK(t, c, []byte(tc.body))
			if tc.keys == nil {
				if err == nil {
					t.Fatalf("decoded %+v, want an error", page)
				}
				t.Log(err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, o := range page.objs {
				keys = append(keys, o.key)
			}
			if !slices.Equal(keys, tc.keys) && len(keys)+len(tc.keys) > 0 || !slices.Equal(page.prefixes, tc.prefixes) && len(page.prefixes)+len(tc.prefixes) > 0 {
				t.Fatalf("keys %q prefixes %q, want %q %q", keys, page.prefixes, tc.keys, tc.prefixes)
			}
		})
	}
}

// TestDecodePageFields: what List makes of an object's fields.
func TestDecodePageFields(t *testing.T) {
	body := pageHead + `<IsTruncated>true</IsTruncated><NextContinuationToken>a&amp;b</NextContinuationToken>` +
		`<Contents><Key>k</Key><LastModified>2024-01-02T03:04:05.678912Z</LastModified><ETag>"e"</ETag><Size>1234567890123</Size></Contents>` +
		`<Contents><Key>l</Key><LastModified>2024-01-02T03:04:05.678912Z</LastModified></Contents></ListBucketResult>`
	var d pageDecoder
	p, err := d.decode([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2024, 1, 2, 3, 4, 5, 678912000, time.UTC)
	if o := p.objs[0]; o.key != "k" || o.size != 1234567890123 || o.etag != `"e"` || !o.modTime.Equal(want) || !p.truncated || p.next != "a&b" {
		t.Fatalf("page %+v", p)
	}
	if o := p.objs[1]; o.etag != "" || o.size != 0 || !o.modTime.Equal(want) {
		t.Fatalf("object without ETag or Size: %+v", o)
	}
}

// genPage is one page of n generated ImageNet-style keys, as GenS3
// serves it.
func genPage(tb testing.TB, n int, urlEncoded bool) []byte {
	g, err := testenv.NewGenS3("bench", n, 1, 1024)
	if err != nil {
		tb.Fatal(err)
	}
	target := "/bench?list-type=2&max-keys=1000"
	if urlEncoded {
		target += "&encoding-type=url"
	}
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
	if rec.Code != 200 {
		tb.Fatalf("generated page: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

func TestDecodeGeneratedPage(t *testing.T) {
	c := newCannedSDK()
	for _, enc := range []bool{false, true} {
		p, err := checkAgainstSDK(t, c, genPage(t, 1000, enc))
		if err != nil || len(p.objs) != 1000 || !strings.HasPrefix(p.objs[0].key, "train/n") {
			t.Fatalf("url %v: %d objects, %v", enc, len(p.objs), err)
		}
	}
}

// BenchmarkDecodePage decodes a page of 1,000 keys through the SDK and by
// hand, in one goroutine: the CPU a key costs, transport aside.
func BenchmarkDecodePage(b *testing.B) {
	body := genPage(b, 1000, true)
	b.Run("sdk", func(b *testing.B) {
		c := newCannedSDK()
		b.SetBytes(int64(len(body)))
		for range b.N {
			if out, err := sdkDecode(c, body); err != nil || len(out.Contents) != 1000 {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed())/float64(b.N*1000), "ns/key")
	})
	b.Run("raw", func(b *testing.B) {
		var d pageDecoder
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for range b.N {
			if p, err := d.decode(body); err != nil || len(p.objs) != 1000 {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed())/float64(b.N*1000), "ns/key")
	})
}

// FuzzDecodePage: no input makes the decoder panic, and any page the SDK
// reads, it reads the same.
func FuzzDecodePage(f *testing.F) {
	f.Add([]byte(pageHead + `<Contents><Key>a&amp;b</Key><Size>1</Size><ETag>&quot;e&quot;</ETag><LastModified>2024-01-02T03:04:05Z</LastModified></Contents>` +
		`<CommonPrefixes><Prefix>p/</Prefix></CommonPrefixes><IsTruncated>true</IsTruncated><NextContinuationToken>t</NextContinuationToken></ListBucketResult>`))
	f.Add([]byte(pageHead + `<EncodingType>url</EncodingType><Contents><Key>a+b%2F%0D</Key></Contents><![CDATA[x]]><!-- c --></ListBucketResult>`))
	f.Add([]byte(`<a:R xmlns:a="x"><a:contents><KEY><![CDATA[k]]></KEY></a:contents></a:R>`))
	f.Add(genPage(f, 3, true))
	f.Add(genPage(f, 3, false))
	c := newCannedSDK()
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAgainstSDK(t, c, body)
	})
}

// FuzzDecodePageKeys: keys of any bytes, written into a page as a store
// would write them (escaped for XML, or URL-encoded when asked), read
// back the same.
func FuzzDecodePageKeys(f *testing.F) {
	f.Add("sp ace/ünï 文件.bin\x00a+b=c&d<e>\"'\r\n\x01\xff", true)
	f.Add("plain/key\x00other\rkey", false)
	f.Fuzz(func(t *testing.T, joined string, urlEncoded bool) {
		keys := strings.Split(joined, "\x00")
		var b strings.Builder
		b.WriteString(pageHead)
		if urlEncoded {
			b.WriteString("<EncodingType>url</EncodingType>")
		}
		for _, k := range keys {
			if urlEncoded {
				k = url.QueryEscape(k)
			} else if !validXMLText(k) {
				return // a store can't write it without URL encoding
			}
			b.WriteString("<Contents><Key>")
			// As Go escapes it: "\r" as "&#xD;", so it is not read as "\n".
			xmlEscape(&b, k)
			b.WriteString("</Key></Contents>")
		}
		b.WriteString("</ListBucketResult>")
		var d pageDecoder
		p, err := d.decode([]byte(b.String()))
		if err != nil {
			t.Fatalf("%v\n%q", err, b.String())
		}
		var got []string
		for _, o := range p.objs {
			got = append(got, o.key)
		}
		if !slices.Equal(got, keys) {
			t.Fatalf("keys %q, want %q", got, keys)
		}
	})
}

func xmlEscape(b *strings.Builder, s string) {
	var buf bytes.Buffer
	xml.EscapeText(&buf, []byte(s))
	b.Write(buf.Bytes())
}

// validXMLText reports whether s is made of characters XML 1.0 can carry.
func validXMLText(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || !(r == 0x09 || r == 0x0A || r == 0x0D || r >= 0x20 && r <= 0xD7FF ||
			r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF) {
			return false
		}
	}
	return true
}

// FuzzParseISOTime: the fast path reads what smithy's ParseDateTime reads,
// the same, and leaves the rest to it.
func FuzzParseISOTime(f *testing.F) {
	for _, s := range []string{"2024-01-02T03:04:05Z", "2024-01-02T03:04:05.678Z", "2024-02-29T23:59:59.123456789Z", "2023-02-29T00:00:00Z",
		"2024-01-02T03:04:05.1234567891Z", "2024-01-02T24:00:00Z", "0000-01-01T00:00:00Z", "2024-01-02T03:04:05,5Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseISOTime([]byte(s))
		if !ok {
			return
		}
		want, err := smithytime.ParseDateTime(s)
		if err != nil || !got.Equal(want) || got.Location() != want.Location() {
			t.Fatalf("parseISOTime(%q) = %v, smithy reads %v, %v", s, got, want, err)
		}
	})
}
