package testenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestToxiproxy checks the harness: a proxy forwards to its upstream on
// 127.0.0.1, a latency toxic on the downstream delays every answer by at
// least its latency, and removing it takes the delay away. It also reads an
// object from MinIO through a slowed proxy with the S3 client, the way the
// warm benchmark does.
func TestToxiproxy(t *testing.T) {
	upstream := ServePong(t)

	tp := StartToxiproxy(t)
	addr := tp.AddProxy("echo", upstream)
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("proxy listen address %q, want 127.0.0.1:PORT (%v)", addr, err)
	}
	if ps, err := tp.Proxies(); err != nil || ps["echo"] != addr {
		t.Fatalf("Proxies() = %v, %v; want echo at %s", ps, err, addr)
	}

	get := func() time.Duration {
		t.Helper()
		start := time.Now()
		if err := getPong(addr); err != nil {
			t.Fatalf("GET through the proxy: %v", err)
		}
		return time.Since(start)
	}
	base := get()
	tp.AddLatency("echo", 150, 0)
	for i := 0; i < 3; i++ {
		if d := get(); d < 150*time.Millisecond {
			t.Fatalf("with a 150 ms latency toxic a request took %v (without: %v)", d, base)
		}
	}
	if err := tp.AddToxicErr("no-such-proxy", Toxic{Name: "x", Type: "latency", Stream: "downstream",
		Attributes: map[string]any{"latency": 1}}); err == nil {
		t.Fatal("adding a toxic to a missing proxy did not fail")
	}
	tp.RemoveToxic("echo", "latency")
	if d := get(); d >= 150*time.Millisecond {
		t.Fatalf("after removing the toxic a request took %v", d)
	}

	// S3 through a slowed proxy: ranged GET of a whole object.
	m := StartMinIO(t)
	m.CreateBucket("tox")
	data := Bytes(9, 9, 110_000)
	m.PutObject("tox", "k", data)
	p := tp.AddProxy("minio", m.Addr())
	tp.AddLatency("minio", 20, 5)
	user, pass := m.Creds()
	c := NewS3Client("http://"+p, user, pass)
	g0, _ := m.GetObjectCount()
	start := time.Now()
	out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("tox"), Key: aws.String("k"),
		Range: aws.String("bytes=0-109999")})
	if err != nil {
		t.Fatalf("GetObject through the proxy: %v", err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || string(got) != string(data) {
		t.Fatalf("GetObject through the proxy: %d bytes, %v", len(got), err)
	}
	if d := time.Since(start); d < 15*time.Millisecond {
		t.Fatalf("GetObject through a +20±5 ms proxy took %v", d)
	}
	if g1, _ := m.GetObjectCount(); g1-g0 != 1 {
		t.Fatalf("MinIO counted %d GETs through the proxy, want 1", g1-g0)
	}
	if !strings.HasPrefix(tp.API(), "http://127.0.0.1:") {
		t.Fatalf("API %q not on 127.0.0.1", tp.API())
	}
}

// getPong makes one GET of http://addr/ on a connection of its own and
// wants ServePong's answer.
func getPong(addr string) error {
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + addr + "/")
	if err != nil {
		return err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if string(b) != "pong" {
		return fmt.Errorf("answer %q, want pong", b)
	}
	return nil
}
