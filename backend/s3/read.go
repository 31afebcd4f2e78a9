package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/backend"
)

const (
	// ReadAt's own attempts at a range: the SDK retries a GET until the
	// response headers arrive, and a body cut off after that is ours to
	// retry; GETs made without the SDK (get.go) are retried here
	// altogether.
	bodyAttempts = 5
	// maxStalls bounds the attempts abandoned for making no progress
	// (tail.go): their timeouts double from 200 ms at least to the 30 s
	// ceiling within it.
	maxStalls       = 9
	bodyBaseDelay   = 50 * time.Millisecond
	throttleBackoff = 8
)

// Stat describes one object with a HEAD request.
func (b *Backend) Stat(ctx context.Context, key string) (backend.Object, error) {
	if key == "" {
		return backend.Object{}, backend.Errorf("stat", key, backend.ErrInvalid, "empty key")
	}
	if b.conns.isClosed() {
		return backend.Object{}, backend.Wrap("stat", key, backend.ErrUnavailable, errClosed{})
	}
	out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(b.bucket),
		Key:    aws.String(b.prefix + key),
	})
	if err != nil {
		return backend.Object{}, classify(ctx, "stat", key, err)
	}
	return backend.Object{
		Key:     key,
		Size:    aws.ToInt64(out.ContentLength),
		ModTime: aws.ToTime(out.LastModified),
		Version: b.versionOf(out.ETag, out.LastModified),
	}, nil
}

// ReadAt fetches [off, off+len(p)) of obj with a ranged GET conditioned on
// its ETag, so bytes of a newer version are never returned (ErrChanged); a
// version bound to Last-Modified (no ETag) is checked against the answer's.
func (b *Backend) ReadAt(ctx context.Context, obj backend.Object, p []byte, off int64) (int, error) {
	switch {
	case obj.Key == "":
		return 0, backend.Errorf("read", obj.Key, backend.ErrInvalid, "empty key")
	case off < 0:
		return 0, backend.Errorf("read", obj.Key, backend.ErrInvalid, "negative offset %d", off)
	case b.conns.isClosed():
		return 0, backend.Wrap("read", obj.Key, backend.ErrUnavailable, errClosed{})
	case off >= obj.Size:
		return 0, io.EOF
	case len(p) == 0:
		return 0, nil
	}
	delay := bodyBaseDelay
	// Failures and stalls are counted apart: a stall's timeout doubles
	// with each one (tail.go), so a store that has become slower for
	// every request is waited for longer each time, up to the 30 s
	// ceiling, rather than given up on after bodyAttempts short waits.
	failures, stalls := 0, 0
	for {
		n, retry, err := b.readRange(ctx, obj, p, off, stalls+1)
		if !retry {
			return n, err
		}
		stall := errors.As(err, new(stallError))
		if stall {
			stalls++
		} else {
			failures++
		}
		if failures == bodyAttempts || stalls == maxStalls || b.conns.isClosed() {
			return 0, classify(ctx, "read", obj.Key, fmt.Errorf("%d attempts: %w", failures+stalls, err))
		}
		b.tail.retries.Add(1)
		if stall {
			b.tail.retried(backend.FailureTimeout)
		} else {
			b.tail.retried(failureKind(ctx, obj.Key, err))
		}
		// Debug: with many GETs in flight, a store that slows down would
		// log a line per GET and attempt; failures that remain surface
		// as the read's error.
		b.log.Debug("s3: GET failed, retrying range", "key", obj.Key, "off", off, "len", len(p), "failures", failures, "stalls", stalls, "err", err)
		if stall {
			// The stall was the wait; a new connection is likely fine.
			continue
		}
		wait := delay
		if throttled(ctx, obj.Key, err) {
			// The store asks for less: back off harder (0.4 to 3.2 s).
			wait *= throttleBackoff
		}
		// Jitter keeps many readers cut off together from retrying in
		// lockstep.
		t := time.NewTimer(wait/2 + rand.N(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, classify(ctx, "read", obj.Key, err)
		case <-t.C:
		}
		delay *= 2
	}
}

// rangeAnswer is what readRange needs of a GET's answer.
type rangeAnswer struct {
	body          io.ReadCloser
	etag          string
	lastModified  string // the HTTP date, as sent
	contentRange  string
	contentLength int64 // -1: not given
	// sent is when the GET was sent, firstByte how long its answer took
	// (getRaced), both on the run clock: the GET's times reported once
	// its body is in.
	sent      runMark
	firstByte time.Duration
}

// get makes one ranged GET of obj, without the SDK's operation stack where
// it can (get.go).
func (b *Backend) get(ctx context.Context, obj backend.Object, off, n int64) (rangeAnswer, error) {
	if b.raw != nil {
		resp, err := b.raw.get(ctx, b.prefix+obj.Key, ifMatch(obj.Version), off, n)
		if err != nil {
			return rangeAnswer{}, err
		}
		return rangeAnswer{body: resp.Body, etag: resp.Header.Get("ETag"), lastModified: resp.Header.Get("Last-Modified"),
			contentRange: resp.Header.Get("Content-Range"), contentLength: resp.ContentLength}, nil
	}
	in := &s3.GetObjectInput{
		Bucket: aws.String(b.bucket),
		Key:    aws.String(b.prefix + obj.Key),
		Range:  aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1)),
	}
	if etag := ifMatch(obj.Version); etag != "" {
		in.IfMatch = aws.String(`"` + etag + `"`)
	}
	out, err := b.client.GetObject(ctx, in)
	if err != nil {
		return rangeAnswer{}, err
	}
	ans := rangeAnswer{body: out.Body, etag: aws.ToString(out.ETag), contentRange: aws.ToString(out.ContentRange), contentLength: -1}
	if out.LastModified != nil {
		ans.lastModified = out.LastModified.UTC().Format(http.TimeFormat)
	}
	if out.ContentLength != nil {
		ans.contentLength = *out.ContentLength
	}
	return ans, nil
}

// readRange makes attempt (1, 2, ...) of a read: one GET, or two when the
// first is slow to answer (getRaced). retry reports a failure that another GET may
// not meet: a body cut off (which the SDK does not retry), or, for GETs
// made without the SDK, any transient failure; err is then the raw cause.
func (b *Backend) readRange(ctx context.Context, obj backend.Object, p []byte, off int64, attempt int) (n int, retry bool, err error) {
	out, end, err := b.getRaced(ctx, obj, off, int64(len(p)), attempt)
	if err != nil {
		if httpStatus(err) == 416 || apiCode(err) == "InvalidRange" {
			return 0, false, io.EOF // the object is shorter than obj.Size said
		}
		if ctx.Err() == nil && errors.As(err, new(stallError)) {
			return 0, true, err
		}
		if b.raw != nil && retryable(ctx, err) {
			return 0, true, err
		}
		return 0, false, classify(ctx, "read", obj.Key, err)
	}
	defer end()
	defer out.body.Close()

	if err := checkAnswer(obj, out.etag, out.lastModified); err != nil {
		b.tail.getFailed(ctx, backend.FailureOther)
		return 0, false, err
	}
	if start, ok := rangeStart(out.contentRange); (ok && start != off) || (!ok && off != 0) {
		b.tail.getFailed(ctx, backend.FailureOther)
		return 0, false, backend.Errorf("read", obj.Key, backend.ErrUnavailable,
			"store answered range bytes=%d- with Content-Range %q", off, out.contentRange)
	}
	want := int64(len(p))
	if out.contentLength >= 0 && out.contentLength < want {
		want = out.contentLength
	}

	watch := watchBody(out.body, b.tail.run, b.tail.bodyIdleTimeout(), b.tail.bodyDeadline(want, attempt), end)
	var body io.Reader = watch
	if fn := backend.ProgressOf(ctx); fn != nil {
		body = progressReader{body, fn}
	}
	n, err = io.ReadFull(body, p[:want])
	if err == nil {
		b.tail.observeBody(n, watch.ran())
		b.tail.getDone(out.firstByte, b.tail.run.ran(out.sent))
	}
	stall := watch.stop()
	switch {
	case err != nil && stall != nil && ctx.Err() == nil:
		b.tail.bodyTimeouts.Add(1)
		b.tail.getFailed(ctx, backend.FailureTimeout)
		return 0, true, *stall
	case err == nil && int(want) == len(p):
		return n, false, nil
	case err == nil:
		return n, false, io.EOF // the object ends inside p
	case ctx.Err() != nil:
		return 0, false, classify(ctx, "read", obj.Key, err)
	default:
		// Includes io.ErrUnexpectedEOF: the connection ended before
		// Content-Length bytes arrived.
		b.tail.getFailed(ctx, failureKind(ctx, obj.Key, err))
		return 0, true, err
	}
}

// progressReader tells fn of each read's bytes (backend.WithProgress).
type progressReader struct {
	r  io.Reader
	fn func(n int)
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.fn(n)
	}
	return n, err
}

// rangeStart parses the first byte position of "bytes 100-199/1000".
func rangeStart(cr string) (int64, bool) {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, false
	}
	var start int64
	if _, err := fmt.Sscanf(rest, "%d-", &start); err != nil {
		return 0, false
	}
	return start, true
}

// unquote strips the quotes S3 puts around ETags; Versions are kept bare so
// List, Stat and GET responses compare equal.
func unquote(etag string) string {
	return strings.Trim(etag, `"`)
}
