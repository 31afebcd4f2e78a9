package main

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// TestLiftReplacesAWedgedProxy: a lift that toxiproxy does not answer
// replaces the server, with the proxy on the same address; one it answers
// does not. Needs the toxiproxy binary ($DSMOUNT_TOXIPROXY).
func TestLiftReplacesAWedgedProxy(t *testing.T) {
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "pong")
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	tp := testenv.StartToxiproxy(t)
	r := &rig{pt: t, tp: tp, upstream: ln.Addr().String()}
	r.proxyAddr = tp.AddProxy(proxy, r.upstream)
	in := &injector{r: r, log: slog.New(slog.DiscardHandler)}

	w := in.open("latency", "test")
	in.lift(w, func(*testenv.Toxiproxy) error { return nil })
	if r.proxyRestarts != 0 || r.proxy() != tp || w.End.IsZero() || w.Err != "" {
		t.Fatalf("an answered lift: %d restarts, window %+v", r.proxyRestarts, w)
	}

	w = in.open("latency", "test")
	in.lift(w, func(*testenv.Toxiproxy) error { return errors.New("wedged") })
	if r.proxyRestarts != 1 || r.proxy() == tp || w.End.IsZero() || w.Err != "" || w.End.Sub(w.Lift) < 500*time.Millisecond {
		t.Fatalf("a wedged lift: %d restarts, window %+v", r.proxyRestarts, w)
	}
	if err := in.lifted(); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + r.proxyAddr + "/")
	if err != nil {
		t.Fatalf("through the replaced proxy: %v", err)
	}
	resp.Body.Close()
}
