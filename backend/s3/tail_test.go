package s3

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsmount/dsmount/backend"
)

// TestTail runs the tail cases (tail.go) against MinIO behind a proxy
// that holds answers or bodies of chosen GETs until the client gives up.
func TestTail(t *testing.T) {
	m := startMinio(t, minioConfig{})
	isolateEnv(t)
	// Bucket names: "tail-" and the case's name in lower case.
	runMinioCases(t, m, "tail-", []minioCase{
		{"HedgeWins", testHedgeWins},
		{"AheadHedgesWhenUrgent", testAheadHedgesWhenUrgent},
		{"FirstByteTimeout", testFirstByteTimeout},
		{"BodyTimeout", testBodyTimeout},
		{"BodyTrickle", testBodyTrickle},
		{"SlowerStore", testSlowerStore},
	})
}

func tailData() []byte {
	data := make([]byte, 300<<10)
	for i := range data {
		data[i] = byte(i % 253)
	}
	return data
}

// readChecked reads all of obj through b and fails unless the bytes are
// data's.
func readChecked(t *testing.T, ctx context.Context, b *Backend, obj backend.Object, data []byte) {
	t.Helper()
	p := make([]byte, len(data))
	n, err := b.ReadAt(ctx, obj, p, 0)
	if err != nil || n != len(p) || !bytes.Equal(p, data) {
		t.Fatalf("ReadAt = %d, %v (bytes equal: %v)", n, err, bytes.Equal(p, data))
	}
}

// train makes enough healthy reads that the timeouts follow the store's
// measured answer times rather than the cold defaults.
func train(t *testing.T, b *Backend, obj backend.Object, data []byte) {
	t.Helper()
	for range minSamples {
		readChecked(t, context.Background(), b, obj, data)
	}
	if b.tail.answer.get() == 0 {
		t.Fatal("no answer-time percentile after minSamples reads")
	}
}

// A read someone waits for whose GET gets no answer sends a second GET
// after the cold hedge delay, which answers: one read, two GETs, well
// before the first-byte timeout would have retried.
func testHedgeWins(t *testing.T, m *minio, bucket string) {
	data := tailData()
	b, proxy, obj := behindFaultProxy(t, m, bucket, data)
	proxy.answerStalls.Store(1)
	before := proxy.objectGets.Load()
	start := time.Now()
	readChecked(t, context.Background(), b, obj, data)
	took := time.Since(start)
	st := b.RequestStats()
	if g := proxy.objectGets.Load() - before; g != 2 || st.Hedges != 1 || st.HedgesWon != 1 {
		t.Errorf("%d GETs, stats %+v; want 2 GETs, 1 hedge that won", g, st)
	}
	if st.FirstByteTimeouts != 0 || took >= coldTimeout {
		t.Errorf("took %v with %d first-byte timeouts: the hedge should have answered before the timeout (%v)", took, st.FirstByteTimeouts, coldTimeout)
	}
}

// A read ahead of its readers does not hedge at the urgent delay; once a
// reader is waiting for it, it does.
func testAheadHedgesWhenUrgent(t *testing.T, m *minio, bucket string) {
	data := tailData()
	b, proxy, obj := behindFaultProxy(t, m, bucket, data)
	train(t, b, obj, data)
	// As from a store far away: the ahead delay is then long enough
	// for the test to see that no hedge went out before it.
	b.tail.answer.p99.Store(int64(300 * time.Millisecond))
	hedgeAfter := b.tail.hedgeAfter()
	proxy.answerStalls.Store(1)
	var urgent atomic.Bool
	ctx := backend.WithUrgency(context.Background(), urgent.Load)
	done := make(chan struct{})
	go func() {
		defer close(done)
		readChecked(t, ctx, b, obj, data)
	}()
	// The stalled GET has arrived: until a reader waits, no hedge (the
	// ahead delay is hedgeAheadMult times the urgent one, and the
	// first-byte timeout is longer still).
	waitUntil(t, func() bool { return proxy.answerStalls.Load() <= 0 || b.tail.hedges.Load() > 0 })
	if h := b.tail.hedges.Load(); h != 0 {
		t.Fatalf("a read ahead hedged at once (%d hedges, hedge delay %v)", h, hedgeAfter)
	}
	urgent.Store(true)
	<-done
	if st := b.RequestStats(); st.Hedges != 1 || st.HedgesWon != 1 {
		t.Errorf("stats %+v: want the urgent read hedged once, the hedge winning", st)
	}
}

// With the hedge budget spent, a GET with no answer is abandoned at the
// first-byte timeout that follows the measured answer times, and made
// again.
func testFirstByteTimeout(t *testing.T, m *minio, bucket string) {
	data := tailData()
	b, proxy, obj := behindFaultProxy(t, m, bucket, data)
	train(t, b, obj, data)
	b.tail.mu.Lock()
	b.tail.tokens = -1000 // no hedges
	b.tail.mu.Unlock()
	timeout := b.tail.firstByteTimeout(1)
	if timeout >= coldTimeout {
		t.Fatalf("first-byte timeout %v after training: want it to follow the measured answers (p99 %v)", timeout, b.tail.answer.get())
	}
	proxy.answerStalls.Store(1)
	before, st := readObservingOneTimeout(t, b, obj, data)
	if st.FirstByteTimeouts-before.FirstByteTimeouts != 1 || st.Retries-before.Retries != 1 || st.Hedges != 0 {
		t.Errorf("stats %+v (before %+v): want one first-byte timeout, one retry, no hedge", st, before)
	}
}

// readObservingOneTimeout reads obj (checked against data) with a request
// observer attached, and wants it to have seen one GET done and one that
// timed out and was retried. It returns the backend's request stats
// before and after the read.
func readObservingOneTimeout(t *testing.T, b *Backend, obj backend.Object, data []byte) (before, after backend.RequestStats) {
	t.Helper()
	before = b.RequestStats()
	obs := &countingObserver{}
	b.ObserveRequests(obs)
	readChecked(t, context.Background(), b, obj, data)
	// A stalled body's GET had answered: its time to first byte is not
	// reported (its body never came), the second GET's is.
	if done, failed, retried, bad := obs.counts(); done != 1 || failed != "throttled=0 timeout=1 other=0" || retried != failed || len(bad) > 0 {
		t.Errorf("observed %d GETs done (bad times: %q), failed %s, retried %s; want 1, timeout=1 both", done, bad, failed, retried)
	}
	return before, b.RequestStats()
}

// A body that stops halfway is abandoned after the idle timeout and the
// range read again.
func testBodyTimeout(t *testing.T, m *minio, bucket string) {
	data := tailData()
	b, proxy, obj := behindFaultProxy(t, m, bucket, data)
	train(t, b, obj, data)
	proxy.bodyStalls.Store(1)
	before, st := readObservingOneTimeout(t, b, obj, data)
	if st.BodyTimeouts-before.BodyTimeouts != 1 || st.Retries-before.Retries != 1 {
		t.Errorf("stats %+v (before %+v): want one body timeout and one retry", st, before)
	}
}

// A body that keeps coming, a byte at a time, is abandoned at the body
// deadline that the measured transfer times give, and the range read
// again.
func testBodyTrickle(t *testing.T, m *minio, bucket string) {
	data := tailData()
	b, proxy, obj := behindFaultProxy(t, m, bucket, data)
	train(t, b, obj, data)
	deadline := b.tail.bodyDeadline(int64(len(data)), 1)
	if deadline == 0 {
		t.Fatal("no body deadline after training on 300 KiB bodies")
	}
	proxy.trickles.Store(1)
	before := b.RequestStats()
	start := time.Now()
	readChecked(t, context.Background(), b, obj, data)
	took := time.Since(start)
	st := b.RequestStats()
	if st.BodyTimeouts-before.BodyTimeouts != 1 || took < deadline {
		t.Errorf("took %v (deadline %v), stats %+v (before %+v): want one body timeout at the deadline", took, deadline, st, before)
	}
}

// A store that becomes slower for every request than the timeouts it
// taught allow is waited for longer at each attempt: its reads are slow,
// never failed.
func testSlowerStore(t *testing.T, m *minio, bucket string) {
	data := tailData()
	b, proxy, obj := behindFaultProxy(t, m, bucket, data)
	train(t, b, obj, data)
	first := b.tail.firstByteTimeout(1)
	slow := 6 * first
	proxy.answerDelay.Store(int64(slow))
	for range 2 {
		readChecked(t, context.Background(), b, obj, data)
	}
	st := b.RequestStats()
	if st.FirstByteTimeouts == 0 {
		t.Errorf("stats %+v: answers %v late with a first timeout of %v, and no timeout fired", st, slow, first)
	}
	t.Logf("answers %v late, first timeout %v: %+v", slow, first, st)
}

// waitUntil polls cond every millisecond until it holds, failing the test
// after a minute.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
		time.Sleep(time.Millisecond)
	}
}
