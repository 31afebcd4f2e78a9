package testenv

import (
	"context"
	"fmt"
	"io"
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
// first failure (no GET starts after it; those in flight finish).
func ParallelGets(ctx context.Context, client *s3.Client, bucket, prefix string, names []string, sizes []int64, par int) (int64, time.Duration, error) {
	var total atomic.Int64
	start := time.Now()
	err := Parallel(len(names), par, func() func(int) error {
		buf := make([]byte, 256<<10)
		return func(i int) error {
			in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(joinKey(prefix, names[i]))}
			if sizes != nil && sizes[i] > 0 {
				in.Range = aws.String(fmt.Sprintf("bytes=0-%d", sizes[i]-1))
			}
			out, err := client.GetObject(ctx, in)
			if err != nil {
				return err
			}
			n, err := Drain(out.Body, buf)
			out.Body.Close()
			total.Add(n)
			if err != nil {
				return err
			}
			if sizes != nil && n != sizes[i] {
				return fmt.Errorf("%s: read %d bytes, want %d", names[i], n, sizes[i])
			}
			return nil
		}
	})
	return total.Load(), time.Since(start), err
}

// Drain reads r to its end through buf and returns how many bytes it
// read. Not io.Copy to io.Discard: that reads in 8 KiB pieces, whatever
// buf is.
func Drain(r io.Reader, buf []byte) (int64, error) {
	var n int64
	for {
		k, err := r.Read(buf)
		n += int64(k)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
