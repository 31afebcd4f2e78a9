package s3

import (
	"context"
	"strings"
	"testing"

	"github.com/dsmount/dsmount/backend"
)

// TestEndpointCredentials: user information in an endpoint URL, whether
// given as Options.Endpoint or found by the SDK in the environment, is
// refused before any request with a one-line ErrInvalid that does not echo
// it; otherwise it would end up in the source ID, and so in /proc/mounts,
// logs, stats and the cache index.
func TestEndpointCredentials(t *testing.T) {
	isolateEnv(t)
	addr := freeAddr(t) // nothing listens: a check made after a request would fail otherwise
	for _, c := range []struct {
		name, endpoint, env string
	}{
		{"option", "http://dsuser:secretpw@" + addr, ""},
		{"option user only", "http://dsuser@" + addr, ""},
		{"option without scheme", "dsuser:secretpw@" + addr, ""},
		{"AWS_ENDPOINT_URL_S3", "", "AWS_ENDPOINT_URL_S3"},
		{"AWS_ENDPOINT_URL", "", "AWS_ENDPOINT_URL"},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			if c.env != "" {
				t.Setenv(c.env, "http://dsuser:secretpw@"+addr)
			}
			_, err := New(context.Background(), "s3://bucket/prefix", Options{Endpoint: c.endpoint, PathStyle: true})
			mustKind(t, err, backend.ErrInvalid)
			msg := err.Error()
			if strings.Contains(msg, "secretpw") || strings.Contains(msg, "dsuser") || strings.Contains(msg, "\n") {
				t.Errorf("error echoes the credentials or spans lines: %q", msg)
			}
			if !strings.Contains(msg, "credentials in the endpoint URL are not accepted") {
				t.Errorf("error %q does not say why", msg)
			}
			t.Log(msg)
		})
	}
}

// FuzzCheckEndpoint: whatever --s3-endpoint (or the AWS configuration)
// says, the check returns, never accepts user information, and never
// repeats a refused URL that carries some.
func FuzzCheckEndpoint(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:9000", "https://s3.example.com/", "http://u:pw@h", "u:pw@h", "ftp://h", "http://[::1", "http://h/%zz", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, endpoint string) {
		err := checkEndpoint("s3://b", "endpoint", endpoint)
		if err == nil && strings.Contains(endpoint, "@") {
			t.Fatalf("accepted %q, which carries user information", endpoint)
		}
		if err != nil && strings.Contains(endpoint, "@") && len(endpoint) > 3 && strings.Contains(err.Error(), endpoint) {
			t.Fatalf("the refusal of %q repeats it: %v", endpoint, err)
		}
	})
}
