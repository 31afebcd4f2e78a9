package testenv

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// What the two in-process S3 endpoints (FakeS3, GenS3) answer alike: the
// path-style routing of a one-bucket store, an object's GET or HEAD with
// its conditions and range, and the error document.

// serveS3Path answers a path-style request to a store of the one bucket:
// HeadBucket, GetBucketLocation, a listing (by list) and an object's GET
// or HEAD (by object); anything else is refused as S3 would.
func serveS3Path(w http.ResponseWriter, r *http.Request, bucket string,
	list func(http.ResponseWriter, *http.Request), object func(w http.ResponseWriter, r *http.Request, key string)) {
	p, err := url.PathUnescape(r.URL.EscapedPath())
	if err != nil {
		writeS3Error(w, r, 400, "InvalidURI", err.Error())
		return
	}
	b, key, hasKey := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	if b != bucket {
		writeS3Error(w, r, 404, "NoSuchBucket", "The specified bucket does not exist")
		return
	}
	switch {
	case !hasKey || key == "" && r.Method == http.MethodGet:
		switch {
		case r.Method == http.MethodHead:
			w.WriteHeader(200)
		case r.Method != http.MethodGet:
			writeS3Error(w, r, 405, "MethodNotAllowed", r.Method)
		case r.URL.Query().Has("location"):
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprintf(w, `%s<LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></LocationConstraint>`, xml.Header)
		default:
			list(w, r)
		}
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		object(w, r, key)
	default:
		writeS3Error(w, r, 405, "MethodNotAllowed", r.Method)
	}
}

// s3Object is what serveS3Object needs of an object: its ETag (quoted),
// Last-Modified, size, and a way to write n of its bytes from start.
type s3Object struct {
	etag    string
	modTime time.Time
	size    int64
	body    func(w http.ResponseWriter, start, n int64)
}

// serveS3Object answers a GET or HEAD of o: If-Match (unless ignoreIfMatch)
// and If-None-Match, then the whole object or one Range of it.
func serveS3Object(w http.ResponseWriter, r *http.Request, o s3Object, ignoreIfMatch bool) {
	tag := strings.Trim(o.etag, `"`)
	if im := r.Header.Get("If-Match"); !ignoreIfMatch && im != "" && im != "*" && strings.Trim(im, `"`) != tag {
		writeS3Error(w, r, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
		return
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" && (inm == "*" || strings.Trim(inm, `"`) == tag) {
		w.WriteHeader(304)
		return
	}
	h := w.Header()
	h.Set("ETag", o.etag)
	h.Set("Last-Modified", o.modTime.Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Type", "application/octet-stream")
	start, end, status := int64(0), o.size-1, 200
	if rg := r.Header.Get("Range"); rg != "" {
		s, e, ok := parseRange(rg, o.size)
		if !ok {
			h.Set("Content-Range", fmt.Sprintf("bytes */%d", o.size))
			writeS3Error(w, r, 416, "InvalidRange", "The requested range is not satisfiable")
			return
		}
		start, end, status = s, e, 206
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, o.size))
	}
	n := max(end-start+1, 0)
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(status)
	if r.Method == http.MethodGet && n > 0 {
		o.body(w, start, n)
	}
}

// writeS3Error answers an S3 error document (none to a HEAD).
func writeS3Error(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		buf := genBufs.Get().(*bytes.Buffer)
		defer genBufs.Put(buf)
		buf.Reset()
		buf.WriteString(xml.Header + "<Error><Code>")
		xmlText(buf, code)
		buf.WriteString("</Code><Message>")
		xmlText(buf, msg)
		buf.WriteString("</Message></Error>")
		w.Write(buf.Bytes())
	}
}

// parseRange reads a Range header of one range, "bytes=a-b", "bytes=a-" or
// "bytes=-n", against an object of size bytes; ok is false when it is
// malformed or not satisfiable. An end past the object's is its end, as S3
// has it, however many digits it has.
func parseRange(s string, size int64) (start, end int64, ok bool) {
	spec, found := strings.CutPrefix(s, "bytes=")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(spec, "-")
	if !found || !allDigits(b) || a != "" && !allDigits(a) {
		return 0, 0, false
	}
	if a == "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 || size == 0 {
			return 0, 0, false
		}
		return max(0, size-n), size - 1, true
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil || start >= size {
		return 0, 0, false
	}
	end = size - 1
	if b != "" {
		e, err := strconv.ParseInt(b, 10, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) || e < start {
			return 0, 0, false
		}
		if err == nil {
			end = min(e, size-1)
		}
	}
	return start, end, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
