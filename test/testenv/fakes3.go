package testenv

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// FakeS3 is a minimal in-process S3 endpoint (path-style, one bucket, no
// signature checks) for keys a real server refuses to store: MinIO rejects
// "a//b", "./x", "../y" and names over 255 bytes per component, which AWS S3
// accepts and a mount must survive. It serves ListObjectsV2 (prefix,
// max-keys, continuation-token, start-after, encoding-type=url), HeadObject,
// and GetObject with Range and If-Match / If-None-Match, which is what an S3
// client reading a dataset needs. Prefer MinIO for everything else.
type FakeS3 struct {
	Bucket string
	// IgnoreIfMatch makes GetObject ignore If-Match, like S3-compatible
	// stores that do not implement conditional reads.
	IgnoreIfMatch bool

	srv  *http.Server
	ln   net.Listener
	mu   sync.Mutex
	objs map[string]fakeObject
	gets atomic.Int64
}

type fakeObject struct {
	data    []byte
	etag    string
	modTime time.Time
}

// StartFakeS3 serves bucket on 127.0.0.1 until the test ends.
func StartFakeS3(t T, bucket string) *FakeS3 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fake S3: %v", err)
	}
	f := &FakeS3{Bucket: bucket, ln: ln, objs: map[string]fakeObject{}}
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve)} // no ServeMux: it would clean "a//b" and "./x"
	go f.srv.Serve(ln)
	t.Cleanup(func() { f.srv.Close() })
	return f
}

// Endpoint is the URL to give an S3 client (path-style).
func (f *FakeS3) Endpoint() string { return "http://" + f.ln.Addr().String() }

// Put stores (or replaces) an object.
func (f *FakeS3) Put(key string, data []byte) {
	sum := md5.Sum(data)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objs[key] = fakeObject{data: append([]byte(nil), data...), etag: hex.EncodeToString(sum[:]),
		modTime: time.Now().UTC().Truncate(time.Second)}
}

// GetCount is how many GetObject requests the server has received.
func (f *FakeS3) GetCount() int64 { return f.gets.Load() }

// Env returns an environment for a dsmount reading from this server (any
// credentials are accepted).
func (f *FakeS3) Env(extra ...string) []string { return GenS3Env(extra...) }

// MountArgs are the dsmount flags that point it at this server.
func (f *FakeS3) MountArgs() []string {
	return []string{"--s3-endpoint", f.Endpoint(), "--s3-path-style"}
}

func (f *FakeS3) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("x-amz-request-id", "fake")
	serveS3Path(w, r, f.Bucket, f.list, f.object)
}

type listResult struct {
	XMLName               xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListBucketResult"`
	Name                  string
	Prefix                string
	KeyCount              int
	MaxKeys               int
	IsTruncated           bool
	EncodingType          string `xml:",omitempty"`
	ContinuationToken     string `xml:",omitempty"`
	NextContinuationToken string `xml:",omitempty"`
	StartAfter            string `xml:",omitempty"`
	Contents              []listEntry
	CommonPrefixes        []commonPrefix
}

type commonPrefix struct {
	Prefix string
}

type listEntry struct {
	Key          string
	LastModified string
	ETag         string
	Size         int64
	StorageClass string
}

func (f *FakeS3) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("list-type") != "2" {
		writeS3Error(w, r, 501, "NotImplemented", "only ListObjectsV2")
		return
	}
	prefix := q.Get("prefix")
	maxKeys := 1000
	if s := q.Get("max-keys"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 && n < maxKeys {
			maxKeys = n
		}
	}
	after := q.Get("start-after")
	if tok := q.Get("continuation-token"); tok != "" {
		b, err := base64.StdEncoding.DecodeString(tok)
		if err != nil {
			writeS3Error(w, r, 400, "InvalidArgument", "bad continuation token")
			return
		}
		after = string(b)
	}
	urlEnc := q.Get("encoding-type") == "url"
	enc := func(s string) string {
		if urlEnc {
			return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
		}
		return s
	}
	delim := q.Get("delimiter")
	f.mu.Lock()
	keys := make([]string, 0, len(f.objs))
	for k := range f.objs {
		if strings.HasPrefix(k, prefix) && k > after {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	res := listResult{Name: f.Bucket, Prefix: enc(prefix), MaxKeys: maxKeys,
		ContinuationToken: q.Get("continuation-token"), StartAfter: enc(q.Get("start-after"))}
	if urlEnc {
		res.EncodingType = "url"
	}
	// With a delimiter, the keys under one common prefix are one entry;
	// a page that ended at a common prefix goes on past all of its keys.
	last := ""
	n := 0
	for _, k := range keys {
		if delim != "" && strings.HasSuffix(after, delim) && strings.HasPrefix(k, after) {
			continue
		}
		cp := ""
		if delim != "" {
			if i := strings.Index(k[len(prefix):], delim); i >= 0 {
				cp = k[:len(prefix)+i+len(delim)]
			}
		}
		if cp != "" && cp == last {
			continue
		}
		if n == maxKeys {
			res.IsTruncated = true
			if maxKeys > 0 {
				res.NextContinuationToken = base64.StdEncoding.EncodeToString([]byte(last))
			}
			break
		}
		n++
		if cp != "" {
			res.CommonPrefixes = append(res.CommonPrefixes, commonPrefix{Prefix: enc(cp)})
			last = cp
			continue
		}
		last = k
		o := f.objs[k]
		res.Contents = append(res.Contents, listEntry{Key: enc(k), LastModified: o.modTime.Format("2006-01-02T15:04:05.000Z"),
			ETag: `"` + o.etag + `"`, Size: int64(len(o.data)), StorageClass: "STANDARD"})
	}
	f.mu.Unlock()
	res.KeyCount = len(res.Contents) + len(res.CommonPrefixes)
	out, err := xml.Marshal(res)
	if err != nil {
		writeS3Error(w, r, 500, "InternalError", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.Write([]byte(xml.Header))
	w.Write(out)
}

func (f *FakeS3) object(w http.ResponseWriter, r *http.Request, key string) {
	if r.Method == http.MethodGet {
		f.gets.Add(1)
	}
	f.mu.Lock()
	o, ok := f.objs[key]
	f.mu.Unlock()
	if !ok {
		writeS3Error(w, r, 404, "NoSuchKey", "The specified key does not exist.")
		return
	}
	serveS3Object(w, r, s3Object{etag: `"` + o.etag + `"`, modTime: o.modTime, size: int64(len(o.data)),
		body: func(w http.ResponseWriter, start, n int64) { w.Write(o.data[start : start+n]) }}, f.IgnoreIfMatch)
}
