package testenv

import (
	"testing"
)

// TestToxiproxyDisable checks SetProxyEnabledErr: a disabled proxy refuses
// connections (the store looks down), and enabled again it forwards on the
// same address; and RemoveToxicErr.
func TestToxiproxyDisable(t *testing.T) {
	upstream := ServePong(t)

	tp := StartToxiproxy(t)
	addr := tp.AddProxy("svc", upstream)
	if err := getPong(addr); err != nil {
		t.Fatalf("GET through the proxy: %v", err)
	}
	if err := tp.SetProxyEnabledErr("svc", false); err != nil {
		t.Fatal(err)
	}
	if on, err := tp.ProxyEnabledErr("svc"); err != nil || on {
		t.Fatalf("ProxyEnabledErr after disabling = %v, %v", on, err)
	}
	if err := getPong(addr); err == nil {
		t.Fatal("GET through a disabled proxy succeeded")
	}
	if err := tp.SetProxyEnabledErr("svc", true); err != nil {
		t.Fatal(err)
	}
	if err := getPong(addr); err != nil {
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
	if err := getPong(addr); err == nil {
		t.Fatal("GET through a killed toxiproxy succeeded")
	}
	tp2 := StartToxiproxy(t)
	if err := tp2.AddProxyAtErr("svc", addr, upstream); err != nil {
		t.Fatal(err)
	}
	if err := getPong(addr); err != nil {
		t.Fatalf("GET through the new toxiproxy: %v", err)
	}
}
