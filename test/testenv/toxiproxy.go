package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// ToxiproxyVersion is the module test/run.sh installs (its cmd/server,
// renamed toxiproxy-server).
const ToxiproxyVersion = "github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0"

// ToxiproxyBinary returns where the toxiproxy server binary is expected:
// $DSMOUNT_TOXIPROXY if set, else $HOME/.cache/dsmount-tools/bin/toxiproxy-server
// (where test/run.sh installs it).
func ToxiproxyBinary() string {
	if p := os.Getenv("DSMOUNT_TOXIPROXY"); p != "" {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = "/root"
	}
	return filepath.Join(home, ".cache", "dsmount-tools", "bin", "toxiproxy-server")
}

// Toxiproxy is a toxiproxy server (a TCP proxy that injects latency and
// faults) started for one test, its API and proxies on 127.0.0.1. It is driven
// through its HTTP API.
type Toxiproxy struct {
	t      T
	api    string // http://127.0.0.1:PORT
	cmd    *exec.Cmd
	done   chan struct{}
	output *capBuffer
	hc     *http.Client
}

// StartToxiproxy starts a toxiproxy server on a free port and waits until its
// API answers. It fails the test (never skips) when the binary is missing.
// The server is killed, and waited for, in t.Cleanup.
func StartToxiproxy(t T) *Toxiproxy {
	t.Helper()
	bin := ToxiproxyBinary()
	if st, err := os.Stat(bin); err != nil || st.IsDir() {
		t.Fatalf("toxiproxy server binary not found at %s (%v): run test/run.sh, or "+
			"`GOBIN=$HOME/.cache/dsmount-tools/bin go install %s` and rename the resulting `server` "+
			"to toxiproxy-server, or point DSMOUNT_TOXIPROXY at a toxiproxy server binary",
			bin, err, ToxiproxyVersion)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		tp, err := startToxiproxy(t, bin)
		if err == nil {
			return tp
		}
		lastErr = err
		t.Logf("starting toxiproxy (attempt %d): %v", attempt+1, err)
	}
	t.Fatalf("toxiproxy did not start: %v", lastErr)
	return nil
}

func startToxiproxy(t T, bin string) (*Toxiproxy, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	tp := &Toxiproxy{
		t:      t,
		api:    fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		done:   make(chan struct{}),
		output: &capBuffer{max: 1 << 20},
		hc:     &http.Client{Timeout: 10 * time.Second},
	}
	cmd := exec.Command(bin, "-host", "127.0.0.1", "-port", fmt.Sprint(ports[0]), "-seed", "1")
	cmd.Stdout = tp.output
	cmd.Stderr = tp.output
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	tp.cmd = cmd
	go func() { cmd.Wait(); close(tp.done) }()
	stop := func() {
		cmd.Process.Kill()
		<-tp.done
	}
	if err := tp.waitReady(30 * time.Second); err != nil {
		stop()
		return nil, fmt.Errorf("%v\ntoxiproxy output:\n%s", err, tp.output.String())
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("toxiproxy output (last 1 MiB):\n%s", tp.output.String())
		}
	})
	return tp, nil
}

// waitReady polls GET /version until it answers 200, the process exits, or
// the deadline passes.
func (tp *Toxiproxy) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := hc.Get(tp.api + "/version")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET /version: %s", resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("toxiproxy API at %s not ready after %v (last error: %v)", tp.api, timeout, err)
		}
		select {
		case <-tp.done:
			return fmt.Errorf("toxiproxy exited before its API answered: %v", tp.cmd.ProcessState)
		case <-tick.C:
		}
	}
}

// API is the base URL of the server's HTTP API.
func (tp *Toxiproxy) API() string { return tp.api }

// call sends a JSON request to the API and decodes a JSON answer into out
// (if non-nil). A status other than 200/201/204 is an error.
func (tp *Toxiproxy) call(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, tp.api+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := tp.hc.Do(req)
	if err != nil {
		return fmt.Errorf("toxiproxy %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("toxiproxy %s %s: %w", method, path, err)
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusCreated, http.StatusNoContent:
	default:
		return fmt.Errorf("toxiproxy %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("toxiproxy %s %s: decoding %q: %w", method, path, data, err)
		}
	}
	return nil
}

type toxiproxyProxy struct {
	Name     string `json:"name"`
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
	Enabled  bool   `json:"enabled"`
}

// AddProxy creates a proxy named name that forwards to upstream (host:port)
// and listens on a port of 127.0.0.1 chosen by the kernel. It returns the
// proxy's listen address (127.0.0.1:PORT). It fails the test on error.
func (tp *Toxiproxy) AddProxy(name, upstream string) string {
	tp.t.Helper()
	addr, err := tp.AddProxyErr(name, upstream)
	if err != nil {
		tp.t.Fatalf("%v", err)
	}
	return addr
}

// AddProxyErr is AddProxy with an error result.
func (tp *Toxiproxy) AddProxyErr(name, upstream string) (string, error) {
	var got toxiproxyProxy
	err := tp.call(http.MethodPost, "/proxies",
		toxiproxyProxy{Name: name, Listen: "127.0.0.1:0", Upstream: upstream, Enabled: true}, &got)
	if err != nil {
		return "", err
	}
	if got.Listen == "" {
		return "", fmt.Errorf("toxiproxy: proxy %q created without a listen address", name)
	}
	return got.Listen, nil
}

// Toxic is one toxic as the API describes it.
type Toxic struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Stream     string         `json:"stream"` // "upstream" or "downstream"
	Toxicity   float64        `json:"toxicity"`
	Attributes map[string]any `json:"attributes"`
}

// AddToxic adds a toxic to proxy or fails the test.
func (tp *Toxiproxy) AddToxic(proxy string, tx Toxic) {
	tp.t.Helper()
	if err := tp.AddToxicErr(proxy, tx); err != nil {
		tp.t.Fatalf("%v", err)
	}
}

// AddToxicErr is AddToxic with an error result.
func (tp *Toxiproxy) AddToxicErr(proxy string, tx Toxic) error {
	if tx.Toxicity == 0 {
		tx.Toxicity = 1
	}
	return tp.call(http.MethodPost, "/proxies/"+proxy+"/toxics", tx, nil)
}

// RemoveToxic deletes the toxic named name from proxy or fails the test.
func (tp *Toxiproxy) RemoveToxic(proxy, name string) {
	tp.t.Helper()
	if err := tp.call(http.MethodDelete, "/proxies/"+proxy+"/toxics/"+name, nil, nil); err != nil {
		tp.t.Fatalf("%v", err)
	}
}

// AddLatency delays everything the upstream sends back through proxy (the
// downstream direction) by ms milliseconds ± jitter, like a remote store.
// The toxic is named "latency". It fails the test on error.
func (tp *Toxiproxy) AddLatency(proxy string, ms, jitter int) {
	tp.t.Helper()
	tp.AddToxic(proxy, Toxic{Name: "latency", Type: "latency", Stream: "downstream", Toxicity: 1,
		Attributes: map[string]any{"latency": ms, "jitter": jitter}})
}

// Proxies lists the proxies by name with their listen addresses.
func (tp *Toxiproxy) Proxies() (map[string]string, error) {
	var got map[string]toxiproxyProxy
	if err := tp.call(http.MethodGet, "/proxies", nil, &got); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for n, p := range got {
		out[n] = p.Listen
	}
	return out, nil
}

// Pid is the toxiproxy server's process ID.
func (tp *Toxiproxy) Pid() int { return tp.cmd.Process.Pid }
