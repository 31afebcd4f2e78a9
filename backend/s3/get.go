package s3

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/encoding/httpbinding"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// rawGetter makes ReadAt's ranged GETs as plain HTTP requests signed with
// the SDK's SigV4 signer, skipping the SDK's operation stack. That stack
// (endpoint rules, auth scheme resolution, some thirty middlewares, its
// allocations) cost much of a small GET's CPU. A cold epoch makes one GET
// per small file, and the node's CPU is what a training job's loaders
// need too.
//
// What the SDK decides stays the SDK's: the credentials (its provider
// chain and cache), the HTTP client (its transport, AWS_CA_BUNDLE, the
// connection pool), and the bucket's URL, taken from a request the SDK
// itself built and sent (the probe in New). List's pages are fetched the
// same way (listraw.go). Stats, and everything for stores the getter can't
// sign for (S3 Express), go through the SDK.
type rawGetter struct {
	hc     aws.HTTPClient
	base   url.URL // the bucket's URL, as the SDK addressed it
	region string
	creds  aws.CredentialsProvider // nil: anonymous, unsigned
	signer *v4.Signer
	clock  *skewClock // signing time, corrected for a skewed node clock
	// plainList: the store refused encoding-type=url, so listings go
	// without it (listraw.go).
	plainList atomic.Bool
}

// emptyPayloadHash is the SHA-256 of an empty body, which a GET signs.
const emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// captureBucketURL is an SDK option that records the URL of the request
// it is given, once signed: with the query dropped, the bucket's URL.
func captureBucketURL(dst *url.URL) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("dsmountCaptureURL",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				if req, ok := in.Request.(*smithyhttp.Request); ok && req.URL != nil {
					u := *req.URL
					u.RawQuery, u.Fragment, u.User = "", "", nil
					*dst = u
				}
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	}
}

// newRawGetter returns a getter for the bucket at base, or nil where the
// SDK must make the requests itself.
func newRawGetter(hc aws.HTTPClient, base url.URL, bucket, region string, creds aws.CredentialsProvider) *rawGetter {
	if base.Host == "" || (base.Scheme != "http" && base.Scheme != "https") ||
		strings.HasSuffix(bucket, "--x-s3") { // S3 Express: session auth
		return nil
	}
	return &rawGetter{hc: hc, base: base, region: region, creds: creds, signer: v4.NewSigner(), clock: newSkewClock()}
}

// get makes one ranged GET of key, conditioned on etag when set. A non-2xx
// answer comes back as the SDK would report it (a *smithyhttp.ResponseError
// carrying the store's code), so classify words and sorts it the same.
func (g *rawGetter) get(ctx context.Context, key, etag string, off, n int64) (*http.Response, error) {
	path := strings.TrimSuffix(g.base.Path, "/") + "/" + key
	escaped := strings.TrimSuffix(g.base.EscapedPath(), "/") + "/" + httpbinding.EscapePath(key, false)
	return g.do(ctx, path, escaped, "", func(h http.Header) {
		h.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-"+strconv.FormatInt(off+n-1, 10))
		if etag != "" {
			h.Set("If-Match", `"`+etag+`"`)
		}
	})
}

// do makes one GET of path (escaped as given) with the query and headers
// set. A refusal that the store's clock explains is signed again at once,
// at the store's time (clock.go).
func (g *rawGetter) do(ctx context.Context, path, escaped, query string, header func(http.Header)) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		signedAt := g.clock.signingTime()
		resp, err := g.send(ctx, path, escaped, query, header, signedAt)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode/100 == 2 {
			return resp, nil
		}
		err = responseError(resp)
		resp.Body.Close()
		if attempt == 1 && g.creds != nil && g.clock.learn(apiCode(err), signedAt, resp) {
			continue
		}
		return nil, err
	}
}

// send signs (at signedAt) and sends one GET.
func (g *rawGetter) send(ctx context.Context, path, escaped, query string, header func(http.Header), signedAt time.Time) (*http.Response, error) {
	u := g.base
	u.Path, u.RawPath, u.RawQuery = path, escaped, query
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, requestError{err}
	}
	// u.String() re-escapes; keep the exact path that is signed and sent.
	req.URL.Path, req.URL.RawPath = u.Path, escaped
	header(req.Header)
	req.Header.Set("User-Agent", userAgent)
	if g.creds != nil {
		creds, err := g.creds.Retrieve(ctx)
		if err != nil {
			return nil, err
		}
		req.Header.Set("X-Amz-Content-Sha256", emptyPayloadHash)
		err = g.signer.SignHTTP(ctx, creds, req, emptyPayloadHash, "s3", g.region, signedAt,
			func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
		if err != nil {
			return nil, requestError{err}
		}
	}
	return g.hc.Do(req)
}

// responseError reads an S3 error answer (<Error><Code>…</Code>…) into the
// SDK's error types.
func responseError(resp *http.Response) error {
	var body struct {
		Code    string
		Message string
	}
	if b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10)); err == nil && len(b) > 0 {
		xml.Unmarshal(b, &body)
	}
	if body.Code == "" {
		// HEAD-like answers (412, 416, 304) come without a body.
		body.Code = strings.ReplaceAll(http.StatusText(resp.StatusCode), " ", "")
	}
	fault := smithy.FaultClient
	if resp.StatusCode >= 500 {
		fault = smithy.FaultServer
	}
	return &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: resp},
		Err:      &smithy.GenericAPIError{Code: body.Code, Message: body.Message, Fault: fault},
	}
}

// requestError is a GET that could not be made (its URL or signature):
// making it again would fail the same way.
type requestError struct{ err error }

func (e requestError) Error() string { return "build request: " + e.err.Error() }
func (e requestError) Unwrap() error { return e.err }

// retryable reports whether a failed GET may succeed if made again: no
// answer at all (a refused, reset or timed-out connection), the store
// failing or asking to slow down.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.As(err, new(credsError)) || errors.As(err, new(errClosed)) || errors.As(err, new(requestError)) {
		return false
	}
	switch status := httpStatus(err); {
	case status == 0:
		return true
	case status == 501, status == 505: // not implemented, version unsupported: never will be
		return false
	case status == 429, status >= 500:
		return true
	default:
		return isThrottle(apiCode(err)) || apiCode(err) == "RequestTimeout"
	}
}
