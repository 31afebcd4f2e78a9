package testenv

import (
	"io"
	"net"
	"net/http"
)

// ServePong serves "pong" to every HTTP request on 127.0.0.1 until the
// test ends, and returns its address: an upstream for proxy tests.
func ServePong(t T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pong server: %v", err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "pong")
	})}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}
