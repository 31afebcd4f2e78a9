package ranges

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/bench/internal/measure"
)

// span is one ranged GET of a reference pass: n bytes of the object at
// off, whose bytes check verifies; what names it in an error.
type span struct {
	off, n int64
	check  func([]byte) error
	what   string
}

// rangedGets is a reference pass: --readers goroutines of this program,
// goroutine g asking the store, through the proxy, for the spans
// next(g) gives in turn (each a GetObject with a Range of its bytes of
// key), checking every byte, for seconds. bufLen bounds a span. The row
// counts the spans done and their bytes; its CPU is this program's.
func rangedGets(e *env, seconds float64, key string, bufLen, inflight int, next func(g int) func() span) row {
	var (
		done, used atomic.Int64
		failOnce   sync.Once
		fail       error
		wg         sync.WaitGroup
	)
	s0, cpu0 := e.storeNow(), measure.Self()
	start := time.Now()
	deadline := start.Add(time.Duration(seconds * float64(time.Second)))
	for g := 0; g < inflight; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nextSpan := next(g)
			buf := make([]byte, bufLen+1)
			for time.Now().Before(deadline) {
				if err := getSpan(e, key, nextSpan(), buf, deadline, &done, &used); err != nil {
					failOnce.Do(func() { fail = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	if fail != nil {
		e.T.Fatalf("raw ranged GETs: %v", fail)
	}
	s1 := e.storeNow()
	return row{Windows: done.Load(), UsedBytes: used.Load(), Seconds: seconds, Wall: wall.Seconds(),
		StoreBytes: s1.bytes - s0.bytes, StoreGETs: s1.gets - s0.gets,
		FetchedBytes: -1, DaemonGETs: -1, FUSEReads: -1, DaemonCPU: -1, ClientCPU: measure.Self() - cpu0}
}

// getSpan fetches and checks one span, counting it unless the pass's time
// ran out meanwhile.
func getSpan(e *env, key string, s span, buf []byte, deadline time.Time, done, used *atomic.Int64) error {
	out, err := e.client.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", s.off, s.off+s.n-1))})
	if err != nil {
		return err
	}
	defer out.Body.Close()
	got, err := io.ReadFull(out.Body, buf)
	if err != io.ErrUnexpectedEOF || int64(got) != s.n {
		return fmt.Errorf("%s: %d bytes or more (%v), want %d", s.what, got, err, s.n)
	}
	if time.Now().After(deadline) {
		return nil
	}
	if err := s.check(buf[:got]); err != nil {
		return err
	}
	done.Add(1)
	used.Add(int64(got))
	return nil
}
