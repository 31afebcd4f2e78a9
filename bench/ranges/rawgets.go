package ranges

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/bench/internal/measure"
)

// rawGets is the reference: --readers goroutines of this program, each
// asking the store, through the proxy, for one window at a time (a
// GetObject with a Range of the window's bytes at a random token) and
// checking every token, for seconds. stream picks the goroutines' random
// streams (the warm-up's differ from the pass's). CPU is this program's.
func rawGets(e *env, seconds float64, stream uint64) row {
	c := e.cfg
	toks := c.block + 1
	win := window(c)
	key := prefix + "/" + fileRel
	var (
		windows  atomic.Int64
		failOnce sync.Once
		fail     error
		wg       sync.WaitGroup
	)
	s0, cpu0 := e.storeNow(), measure.Self()
	start := time.Now()
	deadline := start.Add(time.Duration(seconds * float64(time.Second)))
	for g := 0; g < c.readers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c.rngSeed), stream+uint64(g)))
			buf := make([]byte, win+1)
			for time.Now().Before(deadline) {
				i := rng.Uint64N(e.tokens - uint64(c.block))
				err := func() error {
					out, err := e.client.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
						Range: aws.String(fmt.Sprintf("bytes=%d-%d", 2*i, 2*i+uint64(win)-1))})
					if err != nil {
						return err
					}
					defer out.Body.Close()
					n, err := io.ReadFull(out.Body, buf)
					if err != io.ErrUnexpectedEOF {
						return fmt.Errorf("window at token %d: %d bytes or more (%v), want %d", i, n, err, win)
					}
					if time.Now().After(deadline) {
						return nil
					}
					if err := checkWindow(c.seed, i, buf[:n], toks); err != nil {
						return err
					}
					windows.Add(1)
					return nil
				}()
				if err != nil {
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
	r := row{Windows: windows.Load(), Seconds: seconds, Wall: wall.Seconds(), StoreBytes: s1.bytes - s0.bytes, StoreGETs: s1.gets - s0.gets,
		FetchedBytes: -1, DaemonGETs: -1, FUSEReads: -1, DaemonCPU: -1, ClientCPU: measure.Self() - cpu0}
	r.fill(e)
	return r
}
