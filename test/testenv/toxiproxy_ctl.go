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
