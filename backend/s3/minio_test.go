package s3

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

const (
	minioUser   = "dsmount-test"
	minioSecret = "dsmount-test-secret"
)

type minio struct {
	endpoint string
	client   *s3.Client // fixture client, independent of the code under test
}

// minioConfig varies the server: a TLS certificate (served over https) and
// a region other than us-east-1.
type minioConfig struct {
	cert   *testCert
	region string
}

// startMinio runs a real MinIO server for the calling test and stops it in
// Cleanup. A missing binary fails the test: these tests are the only proof
// the backend works against a real store.
func startMinio(t *testing.T, cfg minioConfig) *minio {
	t.Helper()
	bin := os.Getenv("DSMOUNT_MINIO")
	if bin == "" {
		home, _ := os.UserHomeDir()
		bin = filepath.Join(home, ".cache/dsmount-tools/bin/minio")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("MinIO binary not found (%v); build it there or set DSMOUNT_MINIO", err)
	}
	addr, console := freeAddr(t), freeAddr(t)
	var logs syncBuffer
	args := []string{"server", t.TempDir(), "--address", addr, "--console-address", console}
	scheme, hc := "http", http.DefaultClient
	if cfg.cert != nil {
		certs := t.TempDir()
		writeFile(t, filepath.Join(certs, "public.crt"), cfg.cert.certPEM)
		writeFile(t, filepath.Join(certs, "private.key"), cfg.cert.keyPEM)
		args = append(args, "--certs-dir", certs)
		scheme, hc = "https", cfg.cert.client()
	}
	region := cmp.Or(cfg.region, "us-east-1")
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+minioUser, "MINIO_ROOT_PASSWORD="+minioSecret,
		"MINIO_UPDATE=off", "MINIO_CI_CD=1", "MINIO_SITE_REGION="+region)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting MinIO: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})

	endpoint := scheme + "://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get(endpoint + "/minio/health/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case <-exited:
			t.Fatalf("MinIO exited during startup:\n%s", logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("MinIO not live after 30s (last error %v):\n%s", err, logs.String())
		}
	}
	return &minio{endpoint: endpoint, client: s3.New(s3.Options{
		Region:       region,
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		HTTPClient:   hc,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: minioUser, SecretAccessKey: minioSecret}, nil
		}),
	})}
}

func (m *minio) mkbucket(t *testing.T, name string) {
	t.Helper()
	if _, err := m.client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("CreateBucket %s: %v", name, err)
	}
}

func (m *minio) put(t *testing.T, bucket, key string, data []byte) {
	t.Helper()
	_, err := m.client.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data),
	})
	if err != nil {
		t.Fatalf("PutObject %s/%s: %v", bucket, key, err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// testCert is a self-signed certificate for 127.0.0.1 that is also its own
// CA: valid as AWS_CA_BUNDLE and as MinIO's server certificate.
type testCert struct {
	certPEM, keyPEM []byte
	pool            *x509.CertPool
}

func newTestCert(t *testing.T) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "dsmount test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := &testCert{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
		pool:    x509.NewCertPool(),
	}
	c.pool.AppendCertsFromPEM(c.certPEM)
	return c
}

// bundle writes the certificate to a file for AWS_CA_BUNDLE.
func (c *testCert) bundle(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "ca.pem")
	writeFile(t, path, c.certPEM)
	return path
}

func (c *testCert) client() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: c.pool}
	return &http.Client{Transport: tr}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// faultProxy forwards requests to MinIO and can damage GET responses: cut
// the body halfway (the connection then drops) or stall it until the client
// goes away.
type faultProxy struct {
	url      string
	upstream string
	cuts     atomic.Int32 // GET bodies still to cut off
	stall    atomic.Bool
	gets     atomic.Int32
	// answerStalls object GETs still to hold, sending nothing, until the
	// client gives up on them; bodyStalls bodies still to stall halfway
	// the same way.
	answerStalls, bodyStalls atomic.Int32
	// trickles: bodies still to send half of, then a byte every 100 ms.
	trickles atomic.Int32
	// answerDelay holds every object GET this long (nanoseconds) before
	// passing it on: a store that has become slow.
	answerDelay atomic.Int64
	// objectGets counts object GETs received, stalled ones included.
	objectGets atomic.Int32
	// fails object GETs still to answer with failStatus and failCode
	// (an S3 error body) instead of passing them on.
	fails      atomic.Int32
	failStatus int
	failCode   string
	failed     atomic.Int32
	// listFails listings still to answer with listFailStatus and
	// listFailCode instead of passing them on.
	listFails      atomic.Int32
	listFailStatus int
	listFailCode   string
	listFailed     atomic.Int32
	// refuseURLKeys: listings with encoding-type get 400 InvalidArgument,
	// as from a store that doesn't support it.
	refuseURLKeys atomic.Bool
}

func newFaultProxy(t *testing.T, upstream string) *faultProxy {
	p := &faultProxy{upstream: upstream}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: p}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	p.url = "http://" + l.Addr().String()
	return p
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Query().Has("encoding-type") && p.refuseURLKeys.Load() {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(400)
		fmt.Fprint(w, "<Error><Code>InvalidArgument</Code><Message>encoding-type: not supported here</Message></Error>")
		return
	}
	if r.Method == http.MethodGet && r.URL.Query().Has("list-type") && p.listFails.Add(-1) >= 0 {
		p.listFailed.Add(1)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(p.listFailStatus)
		fmt.Fprintf(w, "<Error><Code>%s</Code><Message>injected by the test</Message></Error>", p.listFailCode)
		return
	}
	if r.Method == http.MethodGet && !r.URL.Query().Has("list-type") {
		p.objectGets.Add(1)
		if d := time.Duration(p.answerDelay.Load()); d > 0 {
			select {
			case <-r.Context().Done():
				panic(http.ErrAbortHandler)
			case <-time.After(d):
			}
		}
		if p.answerStalls.Add(-1) >= 0 {
			<-r.Context().Done()
			panic(http.ErrAbortHandler)
		}
	}
	if r.Method == http.MethodGet && !r.URL.Query().Has("list-type") && p.fails.Add(-1) >= 0 {
		p.failed.Add(1)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(p.failStatus)
		fmt.Fprintf(w, "<Error><Code>%s</Code><Message>injected by the test</Message></Error>", p.failCode)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	out.Header = r.Header.Clone()
	out.Host = r.Host // the client signed the proxy's host
	out.ContentLength = r.ContentLength
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), 502)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	if r.Method != http.MethodGet || resp.StatusCode/100 != 2 || r.URL.Query().Has("list-type") {
		io.Copy(w, resp.Body)
		return
	}
	p.gets.Add(1)
	body, _ := io.ReadAll(resp.Body)
	switch {
	case p.stall.Load() || p.bodyStalls.Add(-1) >= 0:
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		panic(http.ErrAbortHandler)
	case p.trickles.Add(-1) >= 0:
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		for _, c := range body[len(body)/2:] {
			select {
			case <-r.Context().Done():
				panic(http.ErrAbortHandler)
			case <-time.After(100 * time.Millisecond):
			}
			w.Write([]byte{c})
			w.(http.Flusher).Flush()
		}
	case p.cuts.Add(-1) >= 0:
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // drops the connection mid-body
	default:
		w.Write(body)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
