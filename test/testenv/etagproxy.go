package testenv

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
)

// ETagProxy stands in front of an S3 server and hides every ETag, like the
// S3-compatible stores that give none: it deletes the ETag response header
// (GET, HEAD) and the <ETag> elements of listings. Everything else passes
// through unchanged, the Host header included, so SigV4 signatures made for
// the proxy's address still verify at the server.
type ETagProxy struct {
	srv *http.Server
	ln  net.Listener
}

// etagElement matches one <ETag>…</ETag> of a ListObjectsV2 answer (the
// quotes inside are escaped as &#34; or &quot;, never a '<').
var etagElement = regexp.MustCompile(`<ETag>[^<]*</ETag>`)

// StartETagProxy forwards 127.0.0.1:0 to upstream ("http://host:port") until
// the test ends.
func StartETagProxy(t T, upstream string) *ETagProxy {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil || target.Host == "" {
		t.Fatalf("ETag proxy: bad upstream %q: %v", upstream, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("ETag proxy: %v", err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			// The client signed the Host it sent (the proxy's address).
			r.Out.Host = r.In.Host
		},
		ModifyResponse: stripETags,
	}
	p := &ETagProxy{srv: &http.Server{Handler: rp}, ln: ln}
	go p.srv.Serve(ln)
	t.Cleanup(func() { p.srv.Close() })
	return p
}

// Endpoint is the URL to give an S3 client (path-style).
func (p *ETagProxy) Endpoint() string { return "http://" + p.ln.Addr().String() }

// stripETags removes the ETag header and, from XML answers (listings), the
// ETag elements, fixing Content-Length.
func stripETags(resp *http.Response) error {
	resp.Header.Del("ETag")
	if resp.Request == nil || resp.Request.Method != http.MethodGet || !resp.Request.URL.Query().Has("list-type") {
		return nil
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && ce != "identity" {
		// Rewriting a compressed body would need decoding it first;
		// failing loudly beats letting ETags through unnoticed.
		return fmt.Errorf("ETag proxy: listing with Content-Encoding %q", ce)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	body = etagElement.ReplaceAll(body, nil)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	resp.Header.Del("Transfer-Encoding")
	return nil
}
