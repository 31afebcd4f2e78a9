package s3

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/dsmount/dsmount/internal/version"
)

// recordingClient answers nothing: it keeps the request it was given.
type recordingClient struct{ req *http.Request }

func (c *recordingClient) Do(r *http.Request) (*http.Response, error) {
	c.req = r
	return nil, errors.New("recorded")
}

// TestUserAgent: the GETs dsmount makes itself name dsmount and its
// version, for the store's access logs (the SDK's requests carry it as
// their app ID, config.WithAppID).
func TestUserAgent(t *testing.T) {
	hc := &recordingClient{}
	g := newRawGetter(hc, url.URL{Scheme: "http", Host: "127.0.0.1:1"}, "bucket", "us-east-1", nil)
	g.get(context.Background(), "key", "", 0, 10)
	if hc.req == nil {
		t.Fatal("no request sent")
	}
	ua := hc.req.Header.Get("User-Agent")
	if ua != "dsmount/"+version.String() || !strings.HasPrefix(userAgent, "dsmount/") {
		t.Errorf("User-Agent %q, want dsmount/%s", ua, version.String())
	}
}
