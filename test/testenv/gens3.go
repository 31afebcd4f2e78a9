package testenv

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// GenS3 is an in-process S3 endpoint (path-style, one bucket, no signature
// checks, on 127.0.0.1 only) whose objects are generated, not stored: n
// objects of one size in ImageNet's layout (GenS3Keys), each object's bytes
// a function of its key (GenS3ReadAt), so a dataset of millions of objects
// costs no disk and a reader can still check every byte. It serves
// ListObjectsV2 (prefix, delimiter, max-keys, continuation-token,
// start-after, encoding-type=url) by binary search over the sorted keys, so
// a page costs O(page) whatever n is; HeadObject; GetObject with Range and
// If-Match / If-None-Match; HeadBucket and GetBucketLocation. GET
// /_gens3/counters (no bucket may be named so) answers the request counts
// as JSON, for a benchmark that runs the server in another process.
type GenS3 struct {
	Bucket string
	*GenS3Keys
	size int64

	srv   *http.Server
	ln    net.Listener
	lists atomic.Int64
	gets  atomic.Int64
	heads atomic.Int64
}

// GenS3Counters is what GET /_gens3/counters answers.
type GenS3Counters struct {
	Lists int64 `json:"lists"`
	Gets  int64 `json:"gets"`
	Heads int64 `json:"heads"`
}

// genS3ModTime is every object's Last-Modified: fixed, so two servers of
// the same parameters are the same store to a cache.
var genS3ModTime = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// StartGenS3 serves bucket with n generated objects of size bytes in dirs
// class directories until the test ends.
func StartGenS3(t T, bucket string, n, dirs int, size int64) *GenS3 {
	t.Helper()
	g, err := ServeGenS3(bucket, n, dirs, size)
	if err != nil {
		t.Fatalf("generated S3: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// ServeGenS3 is StartGenS3 for a program: it serves in the background
// until Close.
func ServeGenS3(bucket string, n, dirs int, size int64) (*GenS3, error) {
	g, err := NewGenS3(bucket, n, dirs, size)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("generated S3: %w", err)
	}
	g.ln = ln
	// No ServeMux: it would clean the paths of odd keys.
	g.srv = &http.Server{Handler: g, ReadHeaderTimeout: time.Minute}
	go g.srv.Serve(ln)
	return g, nil
}

// NewGenS3 builds the server's keys without listening: an http.Handler.
func NewGenS3(bucket string, n, dirs int, size int64) (*GenS3, error) {
	if size < 0 {
		return nil, fmt.Errorf("generated S3: negative object size %d", size)
	}
	keys, err := NewGenS3Keys(n, dirs)
	if err != nil {
		return nil, err
	}
	return &GenS3{Bucket: bucket, GenS3Keys: keys, size: size}, nil
}

// Close stops serving.
func (g *GenS3) Close() error {
	if g.srv == nil {
		return nil
	}
	return g.srv.Close()
}

// Endpoint is the URL to give an S3 client (path-style).
func (g *GenS3) Endpoint() string { return "http://" + g.ln.Addr().String() }

// Size is every object's size.
func (g *GenS3) Size() int64 { return g.size }

// Keys is the sorted key table.
func (g *GenS3) Keys() *GenS3Keys { return g.GenS3Keys }

// ListCount, GetCount and HeadCount are how many ListObjectsV2, GetObject
// and HeadObject requests the server has received.
func (g *GenS3) ListCount() int64 { return g.lists.Load() }
func (g *GenS3) GetCount() int64  { return g.gets.Load() }
func (g *GenS3) HeadCount() int64 { return g.heads.Load() }

// Counters are the three counts together.
func (g *GenS3) Counters() GenS3Counters {
	return GenS3Counters{Lists: g.ListCount(), Gets: g.GetCount(), Heads: g.HeadCount()}
}

// Env returns an environment for a dsmount reading from this server (any
// credentials are accepted).
func (g *GenS3) Env(extra ...string) []string { return GenS3Env(extra...) }

// GenS3Env is GenS3.Env for a server in another process.
func GenS3Env(extra ...string) []string {
	base := filterEnv(os.Environ(), "AWS_", "AWS_CA_BUNDLE")
	base = append(base, "AWS_ACCESS_KEY_ID=fake", "AWS_SECRET_ACCESS_KEY=fake-secret",
		"AWS_REGION="+MinIORegion, "AWS_EC2_METADATA_DISABLED=true")
	return append(base, extra...)
}

// MountArgs are the dsmount flags that point it at this server.
func (g *GenS3) MountArgs() []string {
	return []string{"--s3-endpoint", g.Endpoint(), "--s3-path-style"}
}

func (g *GenS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("x-amz-request-id", "gens3")
	if r.URL.Path == "/_gens3/counters" && r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "application/json")
		c := g.Counters()
		fmt.Fprintf(w, `{"lists":%d,"gets":%d,"heads":%d}`, c.Lists, c.Gets, c.Heads)
		return
	}
	serveS3Path(w, r, g.Bucket, func(w http.ResponseWriter, r *http.Request) {
		g.lists.Add(1)
		g.list(w, r)
	}, g.object)
}

// genListQuery is a parsed ListObjectsV2 request.
type genListQuery struct {
	prefix, delim, startAfter, token string
	maxKeys                          int
	urlEnc                           bool
	// from the continuation token: resume after marker, past every key
	// under it when it was a common prefix.
	marker       string
	markerPrefix bool
}

// parseGenListQuery reads a ListObjectsV2 query string.
func parseGenListQuery(q url.Values) (genListQuery, error) {
	if q.Get("list-type") != "2" {
		return genListQuery{}, errors.New("only ListObjectsV2 (list-type=2) is served")
	}
	lq := genListQuery{prefix: q.Get("prefix"), delim: q.Get("delimiter"), startAfter: q.Get("start-after"),
		token: q.Get("continuation-token"), maxKeys: 1000}
	if s := q.Get("max-keys"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return lq, fmt.Errorf("max-keys %q is not a count", s)
		}
		lq.maxKeys = min(n, 1000)
	}
	switch e := q.Get("encoding-type"); e {
	case "":
	case "url":
		lq.urlEnc = true
	default:
		return lq, fmt.Errorf("encoding-type %q: only url", e)
	}
	if q.Has("continuation-token") {
		b, err := base64.RawURLEncoding.DecodeString(lq.token)
		if err != nil || len(b) == 0 || b[0] != 'K' && b[0] != 'P' {
			return lq, errors.New("bad continuation token")
		}
		lq.marker, lq.markerPrefix = string(b[1:]), b[0] == 'P'
	}
	return lq, nil
}

// genListPage is one page of a listing: key indices and common prefixes,
// in key order between them.
type genListPage struct {
	keys      []int
	prefixes  []string
	truncated bool
	next      string // the continuation token, when truncated
}

// page answers lq in O(page · log n).
func (k *GenS3Keys) page(lq genListQuery) genListPage {
	var pg genListPage
	i := 0
	switch {
	case lq.token != "" && lq.markerPrefix:
		i = k.pastPrefix(0, lq.marker)
	case lq.token != "":
		i = k.upper(lq.marker)
	case lq.startAfter != "":
		i = k.upper(lq.startAfter)
	}
	i = max(i, k.lower(lq.prefix))
	pre := []byte(lq.prefix)
	pg.keys = make([]int, 0, min(lq.maxKeys, k.Len()-i))
	last, lastCP := -1, "" // the last entry: a key's index, or a common prefix
	for n := 0; n < lq.maxKeys && i < k.Len() && bytes.HasPrefix(k.key(i), pre); n++ {
		key := k.key(i)
		if lq.delim != "" {
			if j := bytes.Index(key[len(pre):], []byte(lq.delim)); j >= 0 {
				cp := string(key[:len(pre)+j+len(lq.delim)])
				pg.prefixes = append(pg.prefixes, cp)
				lastCP = cp
				i = k.pastPrefix(i, cp)
				continue
			}
		}
		pg.keys = append(pg.keys, i)
		last, lastCP = i, ""
		i++
	}
	pg.truncated = i < k.Len() && bytes.HasPrefix(k.key(i), pre)
	switch {
	case !pg.truncated:
	case lastCP != "":
		pg.next = base64.RawURLEncoding.EncodeToString([]byte("P" + lastCP))
	case last >= 0:
		pg.next = base64.RawURLEncoding.EncodeToString(append([]byte("K"), k.key(last)...))
	}
	return pg
}

func (g *GenS3) list(w http.ResponseWriter, r *http.Request) {
	lq, err := parseGenListQuery(r.URL.Query())
	if err != nil {
		writeS3Error(w, r, 400, "InvalidArgument", err.Error())
		return
	}
	pg := g.page(lq)
	buf := genBufs.Get().(*bytes.Buffer)
	defer genBufs.Put(buf)
	buf.Reset()
	g.writeList(buf, lq, pg)
	h := w.Header()
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.Write(buf.Bytes())
}

// writeList encodes a page by hand: encoding/xml's reflection would cost
// more than the rest of a 1000-key page together.
func (g *GenS3) writeList(buf *bytes.Buffer, lq genListQuery, pg genListPage) {
	enc := func(s string) string {
		if lq.urlEnc {
			return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
		}
		return s
	}
	elem := func(name, v string) {
		buf.WriteString("<" + name + ">")
		xmlText(buf, v)
		buf.WriteString("</" + name + ">")
	}
	buf.WriteString(xml.Header)
	buf.WriteString(`<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`)
	elem("Name", g.Bucket)
	elem("Prefix", enc(lq.prefix))
	if lq.delim != "" {
		elem("Delimiter", enc(lq.delim))
	}
	elem("KeyCount", strconv.Itoa(len(pg.keys)+len(pg.prefixes)))
	elem("MaxKeys", strconv.Itoa(lq.maxKeys))
	if lq.urlEnc {
		elem("EncodingType", "url")
	}
	elem("IsTruncated", strconv.FormatBool(pg.truncated))
	if lq.token != "" {
		elem("ContinuationToken", lq.token)
	}
	if pg.next != "" {
		elem("NextContinuationToken", pg.next)
	}
	if lq.startAfter != "" {
		elem("StartAfter", enc(lq.startAfter))
	}
	// The parts between a key and its ETag and after the ETag are the
	// same for every object.
	mid := "</Key><LastModified>" + genS3ModTime.Format("2006-01-02T15:04:05.000Z") + "</LastModified><ETag>&quot;"
	tail := "&quot;</ETag><Size>" + strconv.FormatInt(g.size, 10) + "</Size><StorageClass>STANDARD</StorageClass></Contents>"
	var etag [32]byte
	for _, i := range pg.keys {
		key := g.key(i)
		buf.WriteString("<Contents><Key>")
		if lq.urlEnc {
			xmlText(buf, enc(string(key)))
		} else {
			xmlBytes(buf, key)
		}
		buf.WriteString(mid)
		sum := genS3ETag(key, g.size)
		hex.Encode(etag[:], sum[:])
		buf.Write(etag[:])
		buf.WriteString(tail)
	}
	for _, p := range pg.prefixes {
		buf.WriteString("<CommonPrefixes><Prefix>")
		xmlText(buf, enc(p))
		buf.WriteString("</Prefix></CommonPrefixes>")
	}
	buf.WriteString("</ListBucketResult>")
}

// xmlText writes s escaped as XML character data; plain ASCII, the usual
// key, is copied as it is.
func xmlText(buf *bytes.Buffer, s string) {
	xmlBytes(buf, []byte(s))
}

func xmlBytes(buf *bytes.Buffer, s []byte) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '<' || c == '>' || c == '&' || c == '\'' || c == '"' {
			xml.EscapeText(buf, s)
			return
		}
	}
	buf.Write(s)
}

func (g *GenS3) object(w http.ResponseWriter, r *http.Request, key string) {
	if r.Method == http.MethodGet {
		g.gets.Add(1)
	} else {
		g.heads.Add(1)
	}
	if _, ok := g.Find(key); !ok {
		writeS3Error(w, r, 404, "NoSuchKey", "The specified key does not exist.")
		return
	}
	serveS3Object(w, r, s3Object{etag: GenS3ETag(key, g.size), modTime: genS3ModTime, size: g.size,
		body: func(w http.ResponseWriter, start, n int64) {
			buf := genBufs.Get().(*bytes.Buffer)
			defer genBufs.Put(buf)
			for off := start; off < start+n; {
				m := min(start+n-off, 64<<10)
				buf.Reset()
				buf.Grow(int(m))
				p := buf.AvailableBuffer()[:m]
				GenS3ReadAt(key, p, off)
				if _, err := w.Write(p); err != nil {
					return
				}
				off += m
			}
		}}, false)
}

var genBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}
