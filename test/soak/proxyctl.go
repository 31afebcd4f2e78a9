package main

import (
	"fmt"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// Toxiproxy can wedge removing a toxic while a connection's client goes
// away (Shopify/toxiproxy#558, open): the removal never ends, and every
// API call and every new connection through the proxy waits behind it.
// The soak then replaces the server: a new toxiproxy, the proxy made
// again on the address the daemon knows. Connections through the old one
// are cut; the lift's window spans it all, an outage the rule in
// explain.go explains as a slow lift.

// proxy is the toxiproxy server in use.
func (r *rig) proxy() *testenv.Toxiproxy {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tp
}

// replaceProxy kills the toxiproxy server and starts a new one with the
// proxy on the same address.
func (r *rig) replaceProxy() error {
	old := r.proxy()
	old.Kill()
	tp := testenv.StartToxiproxy(r.pt)
	if err := retry(func() error { return tp.AddProxyAtErr(proxy, r.proxyAddr, r.upstream) }); err != nil {
		return err
	}
	r.mu.Lock()
	r.tp = tp
	r.proxyRestarts++
	r.mu.Unlock()
	return nil
}

// lift undoes w's fault with undo, tried twice; if toxiproxy still does
// not answer, it is wedged, and is replaced.
func (in *injector) lift(w *window, undo func(*testenv.Toxiproxy) error) {
	in.lifting(w)
	tp := in.r.proxy()
	err := undo(tp)
	if err != nil {
		time.Sleep(500 * time.Millisecond) // a reset kept-alive API connection: try once more
		err = undo(tp)
	}
	if err == nil {
		in.close(w, nil)
		return
	}
	in.log.Warn("toxiproxy does not undo the fault: replacing it", "kind", w.Kind, "err", err)
	if rerr := in.r.replaceProxy(); rerr != nil {
		in.close(w, fmt.Errorf("%v; replacing toxiproxy: %v", err, rerr))
		return
	}
	in.mu.Lock()
	w.Detail += fmt.Sprintf("; toxiproxy wedged undoing it (%v), replaced %.1fs after the lift began", err, time.Since(w.Lift).Seconds())
	in.mu.Unlock()
	in.close(w, nil)
}

// retry makes up to 5 tries of a call to toxiproxy's API, half a second
// apart: a call on a kept-alive connection the server has just closed
// fails ("connection reset by peer") and is not retried by the client.
func retry(call func() error) error {
	var err error
	for range 5 {
		if err = call(); err == nil {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return err
}

// lifted checks that no toxic is left on the proxy and that it is
// enabled: every fault was undone.
func (in *injector) lifted() error {
	tp := in.r.proxy()
	toxics, err := tp.ToxicsErr(proxy)
	if err != nil {
		return err
	}
	on, err := tp.ProxyEnabledErr(proxy)
	if err != nil {
		return err
	}
	if len(toxics) > 0 || !on {
		return fmt.Errorf("toxics left on the proxy: %+v; enabled: %v", toxics, on)
	}
	return nil
}
