package testenv

import (
	"fmt"
	"net/http"
)

// SetProxyEnabledErr turns proxy off (enabled false: toxiproxy closes its
// listener and every connection through it, so the upstream looks down:
// connections are refused) or back on, on the same address.
func (tp *Toxiproxy) SetProxyEnabledErr(proxy string, enabled bool) error {
	var got toxiproxyProxy
	if err := tp.call(http.MethodPost, "/proxies/"+proxy, map[string]bool{"enabled": enabled}, &got); err != nil {
		return err
	}
	if got.Enabled != enabled {
		return fmt.Errorf("toxiproxy: proxy %q is enabled=%v after asking for %v", proxy, got.Enabled, enabled)
	}
	return nil
}

// RemoveToxicErr is RemoveToxic with an error result.
func (tp *Toxiproxy) RemoveToxicErr(proxy, name string) error {
	return tp.call(http.MethodDelete, "/proxies/"+proxy+"/toxics/"+name, nil, nil)
}

// ToxicsErr lists the toxics on proxy.
func (tp *Toxiproxy) ToxicsErr(proxy string) ([]Toxic, error) {
	var got []Toxic
	err := tp.call(http.MethodGet, "/proxies/"+proxy+"/toxics", nil, &got)
	return got, err
}

// ProxyEnabledErr reports whether proxy is enabled.
func (tp *Toxiproxy) ProxyEnabledErr(proxy string) (bool, error) {
	var got toxiproxyProxy
	err := tp.call(http.MethodGet, "/proxies/"+proxy, nil, &got)
	return got.Enabled, err
}

// AddProxyAtErr is AddProxyErr listening on listen (127.0.0.1:PORT): how a
// proxy is made again, on the address its clients know, in a new
// toxiproxy server that replaces a wedged one.
func (tp *Toxiproxy) AddProxyAtErr(name, listen, upstream string) error {
	var got toxiproxyProxy
	err := tp.call(http.MethodPost, "/proxies",
		toxiproxyProxy{Name: name, Listen: listen, Upstream: upstream, Enabled: true}, &got)
	if err == nil && got.Listen != listen {
		err = fmt.Errorf("toxiproxy: proxy %q listens on %s, asked for %s", name, got.Listen, listen)
	}
	return err
}

// Kill ends the toxiproxy server now (SIGKILL) and waits for it: every
// connection through its proxies is cut. Toxiproxy can wedge removing a
// toxic while a link's client goes away (Shopify/toxiproxy#558: the API
// then hangs for good); the way out is a new server.
func (tp *Toxiproxy) Kill() {
	tp.cmd.Process.Kill()
	<-tp.done
}
