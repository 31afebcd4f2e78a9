package s3

import (
	"bytes"
	"context"
	"testing"

	"github.com/dsmount/dsmount/backend"
)

// testOddKeys reads, through the GETs made without the SDK, keys whose
// characters the SigV4 canonical path and the URL must escape alike.
func testOddKeys(t *testing.T, m *minio, bucket string) {
	keys := []string{
		"sp ace/ünï 文件.bin",
		"a+b=c&d,e;f:g@h$i!j'k(l)m*n",
		"pct%20lit%2F",
		"tilde~und_er-dot.",
		"hash#q?uestion",
		"brackets[x]{y}^`|<>\"",
		"deep/er/and/deeper/key",
	}
	for i, k := range keys {
		m.put(t, bucket, "odd/"+k, bytes.Repeat([]byte{byte(i + 1)}, 5000+i))
	}
	b := open(t, m, "s3://"+bucket+"/odd")
	if b.raw == nil {
		t.Fatal("ReadAt goes through the SDK; want its GETs made directly")
	}
	ctx := context.Background()
	for i, k := range keys {
		obj, err := b.Stat(ctx, k)
		if err != nil {
			t.Fatalf("stat %q: %v", k, err)
		}
		p := make([]byte, obj.Size-100)
		if n, err := b.ReadAt(ctx, obj, p, 100); err != nil || n != len(p) || !bytes.Equal(p, bytes.Repeat([]byte{byte(i + 1)}, len(p))) {
			t.Fatalf("ReadAt %q = %d, %v (bytes right: %v)", k, n, err, bytes.Equal(p, bytes.Repeat([]byte{byte(i + 1)}, len(p))))
		}
	}
}

// testRequestRetry: a store asking to slow down (503 SlowDown) is asked
// again, with back-off, until it answers; a refusal (403) is not retried.
func testRequestRetry(t *testing.T, m *minio, bucket string) {
	data := bytes.Repeat([]byte("retry"), 2000)
	b, proxy, obj := behindFaultProxy(t, m, bucket, data)
	if b.raw == nil {
		t.Fatal("ReadAt goes through the SDK; want its GETs made directly")
	}
	ctx := context.Background()
	obs := &countingObserver{}
	b.ObserveRequests(obs)

	proxy.failStatus, proxy.failCode = 503, "SlowDown"
	proxy.fails.Store(2)
	p := make([]byte, len(data))
	if n, err := b.ReadAt(ctx, obj, p, 0); err != nil || n != len(data) || !bytes.Equal(p, data) {
		t.Fatalf("ReadAt after two SlowDown answers = %d, %v", n, err)
	}
	if f, g := proxy.failed.Load(), proxy.gets.Load(); f != 2 || g != 1 {
		t.Fatalf("%d refused and %d served GETs; want 2 and 1", f, g)
	}
	// The observer heard of each: two throttled GETs, each retried, and
	// the one that answered.
	if done, failed, retried, bad := obs.counts(); done != 1 || failed != "throttled=2 timeout=0 other=0" || retried != failed || len(bad) > 0 {
		t.Errorf("observed %d GETs done (bad times: %q), failed %s, retried %s; want 1, throttled=2 both", done, bad, failed, retried)
	}

	proxy.failStatus, proxy.failCode = 403, "AccessDenied"
	proxy.fails.Store(1)
	proxy.failed.Store(0)
	_, err := b.ReadAt(ctx, obj, p, 0)
	mustKind(t, err, backend.ErrPermission)
	if f := proxy.failed.Load(); f != 1 {
		t.Fatalf("a 403 was asked %d times; want once", f)
	}
	if _, failed, retried, _ := obs.counts(); failed != "throttled=2 timeout=0 other=1" || retried != "throttled=2 timeout=0 other=0" {
		t.Errorf("after a 403: failed %s, retried %s; want one more failure (other) and no retry", failed, retried)
	}
	t.Log(err)

	// Slowing down for longer than the attempts last is reported as such.
	proxy.failStatus, proxy.failCode = 503, "SlowDown"
	proxy.fails.Store(100)
	_, err = b.ReadAt(ctx, obj, p, 0)
	mustKind(t, err, backend.ErrThrottled)
	t.Log(err)
}
