package testenv

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// ThrottleProxy stands in front of an S3 server and admits object GETs at
// most Rate a second (a token bucket holding Burst), answering the others
// 503 SlowDown as S3 does to a prefix asked too much of. Listings and
// everything else pass through unchanged, the Host header included, so
// SigV4 signatures made for the proxy's address still verify.
type ThrottleProxy struct {
	srv   *http.Server
	ln    net.Listener
	rate  float64
	burst float64
	start time.Time

	mu     sync.Mutex
	tokens float64
	last   time.Time
	// admitted and throttled count object GETs by the second since start.
	admitted, throttled []int64
}

// StartThrottleProxy forwards 127.0.0.1:0 to upstream ("http://host:port")
// until the test ends, admitting rate object GETs a second.
func StartThrottleProxy(t T, upstream string, rate float64, burst int) *ThrottleProxy {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil || target.Host == "" {
		t.Fatalf("throttle proxy: bad upstream %q: %v", upstream, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("throttle proxy: %v", err)
	}
	now := time.Now()
	p := &ThrottleProxy{ln: ln, rate: rate, burst: float64(burst), tokens: float64(burst), last: now, start: now}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host // the client signed the Host it sent
	}}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "" && !p.admit() {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go p.srv.Serve(ln)
	t.Cleanup(func() { p.srv.Close() })
	return p
}

// Endpoint is the URL to give an S3 client (path-style).
func (p *ThrottleProxy) Endpoint() string { return "http://" + p.ln.Addr().String() }

// admit takes a token for one object GET, counting it either way.
func (p *ThrottleProxy) admit() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.tokens = min(p.burst, p.tokens+now.Sub(p.last).Seconds()*p.rate)
	p.last = now
	sec := int(now.Sub(p.start) / time.Second)
	for len(p.admitted) <= sec {
		p.admitted = append(p.admitted, 0)
		p.throttled = append(p.throttled, 0)
	}
	if p.tokens < 1 {
		p.throttled[sec]++
		return false
	}
	p.tokens--
	p.admitted[sec]++
	return true
}

// Counts returns the object GETs admitted and throttled in each second
// since the proxy started.
func (p *ThrottleProxy) Counts() (admitted, throttled []int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int64(nil), p.admitted...), append([]int64(nil), p.throttled...)
}

// SetRate changes the GETs admitted a second from now on.
func (p *ThrottleProxy) SetRate(rate float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate = rate
}

// Start is when the proxy started: Counts' second 0 begins then.
func (p *ThrottleProxy) Start() time.Time { return p.start }
