package testenv

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// ParallelGets fetches the object PREFIX/NAME (NAME alone for an empty
// prefix) in bucket for every name, in order, with plain GetObject calls, par
// in flight: what the store gives with no filesystem in the way. With sizes
// nil each GET is for the whole object; else sizes[i] is names[i]'s size, its
// GET is ranged (Range bytes=0-(size-1), as the daemon makes them; none for an
// empty object) and reading any other number of bytes is an error. It returns
// the bytes read, the time from the first GET to the end of the last, and the
// first failure (a worker whose GET fails stops; the others go on).
func ParallelGets(ctx context.Context, client *s3.Client, bucket, prefix string, names []string, sizes []int64, par int) (int64, time.Duration, error) {
	var next, total atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) { errOnce.Do(func() { firstErr = err }) }
	start := time.Now()
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 256<<10)
			for {
				i := next.Add(1) - 1
				if i >= int64(len(names)) {
					return
				}
				in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(joinKey(prefix, names[i]))}
				if sizes != nil && sizes[i] > 0 {
					in.Range = aws.String(fmt.Sprintf("bytes=0-%d", sizes[i]-1))
				}
				out, err := client.GetObject(ctx, in)
				if err != nil {
					fail(err)
					return
				}
				var n int64
				for {
					k, err := out.Body.Read(buf)
					n += int64(k)
					if err == io.EOF {
						break
					}
					if err != nil {
						fail(err)
						break
					}
				}
				out.Body.Close()
				if sizes != nil && n != sizes[i] {
					fail(fmt.Errorf("%s: read %d bytes, want %d", names[i], n, sizes[i]))
				}
				total.Add(n)
			}
		}()
	}
	wg.Wait()
	return total.Load(), time.Since(start), firstErr
}
