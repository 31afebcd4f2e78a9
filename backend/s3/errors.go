package s3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/dsmount/dsmount/backend"
)

// Error codes S3 (and compatible stores) use for bad or insufficient
// credentials; several arrive with status 400 rather than 403.
var permissionCodes = map[string]bool{
	"AccessDenied":          true,
	"AllAccessDisabled":     true,
	"InvalidAccessKeyId":    true,
	"SignatureDoesNotMatch": true,
	"ExpiredToken":          true,
	"InvalidToken":          true,
	"TokenRefreshRequired":  true,
	"AccountProblem":        true,
	"InvalidSecurity":       true,
}

var notFoundCodes = map[string]bool{
	"NoSuchBucket": true,
	"NoSuchKey":    true,
	"NotFound":     true,
}

// classify turns an SDK error into a *backend.Error. The SDK error stays in
// the chain for errors.As, and so does ctx's error when ctx ended, even if
// the SDK reported the cancellation in its own words.
func classify(ctx context.Context, op, key string, err error) *backend.Error {
	c := &cause{msg: describe(err), err: err}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		c.also = cerr
	}
	return &backend.Error{Op: op, Key: key, Kind: kindOf(ctx, err), Err: c}
}

func kindOf(ctx context.Context, err error) error {
	code, status := apiCode(err), httpStatus(err)
	var ce credsError
	switch {
	case ctx.Err() != nil:
		return backend.ErrUnavailable
	case errors.As(err, &ce):
		// Even when the last provider tried timed out: off EC2 that is
		// instance metadata, and the fix is to supply credentials.
		return backend.ErrPermission
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return backend.ErrUnavailable
	case notFoundCodes[code], status == 404:
		return backend.ErrNotFound
	case code == "PreconditionFailed", status == 412:
		return backend.ErrChanged
	case permissionCodes[code], status == 401, status == 403:
		return backend.ErrPermission
	case isThrottle(code), status == 429:
		return backend.ErrThrottled
	case status == 0, status >= 500:
		// No response at all (refused, DNS, timeout, reset) or a
		// server-side failure that outlived the SDK's retries.
		return backend.ErrUnavailable
	default:
		// Remaining 3xx/4xx: the request itself is wrong (bad bucket
		// name, wrong region, unsupported feature).
		return backend.ErrInvalid
	}
}

func isThrottle(code string) bool {
	_, ok := retry.DefaultThrottleErrorCodes[code]
	return ok
}

// apiCode returns the S3 error code ("NoSuchBucket"), or "".
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// httpStatus returns the response's status code, or 0 when no response
// arrived.
func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.Response != nil && re.Response.Response != nil {
		return re.Response.StatusCode
	}
	return 0
}

// bucketRegion returns the region S3 says the bucket lives in when a request
// failed for going to the wrong one.
func bucketRegion(err error) string {
	var re *smithyhttp.ResponseError
	if err == nil || !errors.As(err, &re) || re.Response == nil || re.Response.Response == nil {
		return ""
	}
	switch re.Response.StatusCode {
	case 301, 400, 403:
		return re.Response.Header.Get("X-Amz-Bucket-Region")
	}
	return ""
}

// describe words err for a one-line message: the store's own code and text
// when it answered, the network failure when it did not, rather than the
// SDK's multi-clause operation error.
func describe(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code, msg, status := ae.ErrorCode(), ae.ErrorMessage(), httpStatus(err)
		switch {
		case msg != "" && code != "":
			return code + ": " + msg
		case msg != "":
			return msg
		case status != 0:
			return fmt.Sprintf("%s (HTTP %d)", code, status)
		default:
			return code
		}
	}
	var ce credsError
	var dns *net.DNSError
	var op *net.OpError
	var ue *url.Error
	switch {
	case errors.As(err, &ce):
		return ce.Error()
	case errors.As(err, &dns):
		return dns.Error()
	case errors.As(err, &op):
		return op.Error()
	case errors.As(err, &ue):
		return ue.Err.Error()
	}
	return err.Error()
}

// cause carries a short message while keeping the SDK error (and the
// context's error, when it ended) reachable for errors.Is/As.
type cause struct {
	msg  string
	err  error
	also error
}

func (c *cause) Error() string { return c.msg }

func (c *cause) Unwrap() []error {
	if c.also != nil {
		return []error{c.err, c.also}
	}
	return []error{c.err}
}

// credsMarker tags failures to obtain credentials, which otherwise surface
// as a network-looking error from the last provider tried (often IMDS).
type credsMarker struct{ p aws.CredentialsProvider }

func (m credsMarker) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := m.p.Retrieve(ctx)
	if err != nil && ctx.Err() == nil {
		return c, credsError{err}
	}
	return c, err
}

type credsError struct{ err error }

func (e credsError) Error() string {
	return "no usable AWS credentials (set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE, or mount anonymously): " + e.err.Error()
}

func (e credsError) Unwrap() error { return e.err }

// throttled reports whether a failed read of key is the store asking for
// fewer requests: a throttling code, 429, or 503 (S3's SlowDown, or a
// store's plain 503 under load).
func throttled(ctx context.Context, key string, err error) bool {
	return errors.Is(classify(ctx, "read", key, err), backend.ErrThrottled) || httpStatus(err) == 503
}
