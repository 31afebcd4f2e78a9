package testenv

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// TestToxiproxyDisable checks SetProxyEnabledErr: a disabled proxy refuses
// connections (the store looks down), and enabled again it forwards on the
// same address; and RemoveToxicErr.
func TestToxiproxyDisable(t *testing.T) {
	upstream := ServePong(t)

	tp := StartToxiproxy(t)
	addr := tp.AddProxy("svc", upstream)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	get := func() error {
		resp, err := hc.Get("http://" + addr + "/")
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	if err := get(); err != nil {
		t.Fatalf("GET through the proxy: %v", err)
	}
	if err := tp.SetProxyEnabledErr("svc", false); err != nil {
		t.Fatal(err)
	}
	if on, err := tp.ProxyEnabledErr("svc"); err != nil || on {
		t.Fatalf("ProxyEnabledErr after disabling = %v, %v", on, err)
	}
	if err := get(); err == nil {
		t.Fatal("GET through a disabled proxy succeeded")
	}
	if err := tp.SetProxyEnabledErr("svc", true); err != nil {
		t.Fatal(err)
	}
	if err := get(); err != nil {
		t.Fatalf("GET through the proxy enabled again: %v", err)
	}
	tp.AddLatency("svc", 1, 0)
	if got, err := tp.ToxicsErr("svc"); err != nil || len(got) != 1 || got[0].Name != "latency" {
		t.Fatalf("ToxicsErr = %+v, %v; want the latency toxic", got, err)
	}
	if err := tp.RemoveToxicErr("svc", "latency"); err != nil {
		t.Fatal(err)
	}
	if got, err := tp.ToxicsErr("svc"); err != nil || len(got) != 0 {
		t.Fatalf("ToxicsErr after the removal = %+v, %v; want none", got, err)
	}
	if err := tp.RemoveToxicErr("svc", "latency"); err == nil {
		t.Fatal("removing a toxic twice succeeded")
	}
}

// TestToxiproxyReplace kills a toxiproxy server and makes its proxy again,
// on the same address, in a new one.
func TestToxiproxyReplace(t *testing.T) {
	upstream := ServePong(t)
	tp := StartToxiproxy(t)
	addr := tp.AddProxy("svc", upstream)
	tp.Kill()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	if resp, err := hc.Get("http://" + addr + "/"); err == nil {
		resp.Body.Close()
		t.Fatal("GET through a killed toxiproxy succeeded")
	}
	tp2 := StartToxiproxy(t)
	if err := tp2.AddProxyAtErr("svc", addr, upstream); err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("GET through the new toxiproxy: %v", err)
	}
	resp.Body.Close()
}
