package s3

import (
	"context"
	"errors"
	"net/http"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/dsmount/dsmount/backend"
)

// sdkError builds the error chain the SDK returns for an HTTP error
// response, for statuses a local MinIO cannot be made to send on demand.
func sdkError(status int, code string) error {
	var api error = &smithy.GenericAPIError{Code: code, Message: "msg"}
	if code == "" {
		api = errors.New("no body")
	}
	return &smithy.OperationError{ServiceID: "S3", OperationName: "GetObject", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: http.Header{}}},
			Err:      api,
		},
	}}
}

func TestKindOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{sdkError(503, "SlowDown"), backend.ErrThrottled},
		{sdkError(429, ""), backend.ErrThrottled},
		{sdkError(503, "ServiceUnavailable"), backend.ErrUnavailable},
		{sdkError(500, "InternalError"), backend.ErrUnavailable},
		{sdkError(412, "PreconditionFailed"), backend.ErrChanged},
		{sdkError(404, "NoSuchKey"), backend.ErrNotFound},
		{sdkError(404, ""), backend.ErrNotFound},
		{sdkError(403, "AccessDenied"), backend.ErrPermission},
		{sdkError(400, "ExpiredToken"), backend.ErrPermission},
		{sdkError(400, "InvalidArgument"), backend.ErrInvalid},
		{sdkError(301, "PermanentRedirect"), backend.ErrInvalid},
		{credsError{errors.New("none")}, backend.ErrPermission},
		{errors.New("dial tcp: connection refused"), backend.ErrUnavailable},
	} {
		e := classify(context.Background(), "read", "k", tc.err)
		if !errors.Is(e, tc.want) {
			t.Errorf("%v: kind %v, want %v", tc.err, e.Kind, tc.want)
		}
		if !errors.Is(e, tc.err) {
			t.Errorf("%v: cause not reachable from %v", tc.err, e)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e := classify(ctx, "read", "k", errors.New("request canceled, use of closed connection"))
	if !errors.Is(e, context.Canceled) || !errors.Is(e, backend.ErrUnavailable) {
		t.Errorf("cancelled: %v does not carry context.Canceled", e)
	}
}

func TestParseSource(t *testing.T) {
	for src, want := range map[string][2]string{
		"s3://b":          {"b", ""},
		"s3://b/":         {"b", ""},
		"s3://b/p":        {"b", "p/"},
		"s3://b/p/":       {"b", "p/"},
		"s3://b/p/q r/ü":  {"b", "p/q r/ü/"},
		"s3://My_Old.b-1": {"My_Old.b-1", ""},
	} {
		bucket, prefix, err := parseSource(src)
		if err != nil || bucket != want[0] || prefix != want[1] {
			t.Errorf("parseSource(%q) = %q, %q, %v; want %q", src, bucket, prefix, err, want)
		}
	}
}
