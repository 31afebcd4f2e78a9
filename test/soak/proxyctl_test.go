package main

import (
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// TestLiftReplacesAWedgedProxy: a lift that toxiproxy does not answer
// replaces the server, with the proxy on the same address; one it answers
// does not. Needs the toxiproxy binary ($DSMOUNT_TOXIPROXY).
func TestLiftReplacesAWedgedProxy(t *testing.T) {
	upstream := testenv.ServePong(t)
	tp := testenv.StartToxiproxy(t)
	r := &rig{pt: t, tp: tp, upstream: upstream}
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
