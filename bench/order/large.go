package order

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/bench/internal/measure"
	"github.com/dsmount/dsmount/test/testenv"
)

// largeRound is one round of the large-file passes.
type largeRound struct {
	oneConn, storePar, ddMount, ddLocal result
}

// shapeLargeLink measures what one connection through the large file's
// proxy (latency only) gets and, if that is well above --large-conn-mbs,
// adds a downstream bandwidth toxic of that rate (toxiproxy's rate is in
// KB/s of 1000 bytes and applies to each connection on its own), then
// measures again.
func shapeLargeLink(e *env, proxy string) {
	want := e.cfg.largeConnMBs
	probe := oneConn(e, "probe")
	cli.Logf("large file: one connection through %s (+%d ms, no bandwidth limit): %.1f MB/s", proxy, e.cfg.largeLatency, probe.MBPerSec())
	if probe.MBPerSec() <= 1.2*want {
		e.linkNote = fmt.Sprintf("one connection through the proxy gets %.1f MB/s unshaped (+%d ms): no bandwidth toxic",
			probe.MBPerSec(), e.cfg.largeLatency)
		return
	}
	rate := int64(want * 1000) // KB/s
	e.Store.Toxiproxy.AddToxic("large", testenv.Toxic{Name: "bandwidth", Type: "bandwidth", Stream: "downstream", Toxicity: 1,
		Attributes: map[string]any{"rate": rate}})
	shaped := oneConn(e, "probe")
	cli.Logf("large file: bandwidth toxic %d KB/s per connection: one connection now gets %.1f MB/s", rate, shaped.MBPerSec())
	e.linkNote = fmt.Sprintf("one connection: %.1f MB/s unshaped, %.1f MB/s with a bandwidth toxic of %d KB/s per connection (+%d ms latency)",
		probe.MBPerSec(), shaped.MBPerSec(), rate, e.cfg.largeLatency)
}

func runLargeRound(e *env, r int) largeRound {
	var lr largeRound
	e.recycleMemory()
	lr.oneConn = oneConn(e, "one connection GET")
	cli.Logf("round %d: one connection %.1f MB/s", r, lr.oneConn.MBPerSec())
	lr.storePar = parallelRanges(e, 16)
	cli.Logf("round %d: 16 parallel 4 MiB ranged GETs (no filesystem): %.1f MB/s", r, lr.storePar.MBPerSec())
	e.recycleMemory()
	lr.ddMount = ddMount(e, r)
	cli.Logf("round %d: dd through a cold mount %.1f MB/s, %d GETs", r, lr.ddMount.MBPerSec(), lr.ddMount.GETs)
	e.recycleMemory()
	lr.ddLocal = ddLocal(e)
	cli.Logf("round %d: dd from local disk %.1f MB/s", r, lr.ddLocal.MBPerSec())
	return lr
}

// oneConn is a single GetObject of the whole large object through its
// proxy: one connection, timed from the request to the last byte.
func oneConn(e *env, name string) result {
	meter := measure.Start(e.Store, measure.Self)
	start := time.Now()
	out, err := e.largeClient.GetObject(context.Background(), &s3.GetObjectInput{
		Bucket: aws.String(bucket), Key: aws.String("big/" + e.largeRel)})
	if err != nil {
		e.T.Fatalf("GetObject big/%s: %v", e.largeRel, err)
	}
	h := crc32.New(castagnoli)
	n, err := io.CopyBuffer(h, out.Body, make([]byte, 1<<20))
	out.Body.Close()
	el := time.Since(start)
	usage := meter.Stop()
	if err != nil {
		e.T.Fatalf("GetObject big/%s: reading: %v", e.largeRel, err)
	}
	if n != e.largeSize || h.Sum32() != e.largeCRC {
		e.T.Fatalf("GetObject big/%s: %d bytes, CRC-32C %08x; the source has %d, %08x", e.largeRel, n, h.Sum32(), e.largeSize, e.largeCRC)
	}
	return result{name: name, Pass: measure.Pass{Files: 1, Bytes: n, Elapsed: el}, Usage: usage, stall: -1,
		note: "one GetObject of the whole object (no Range), one connection; proc cpu: this program"}
}

// ddMount runs dd over the large file on a fresh mount and cache dir, then
// checks its bytes through the mount (untimed).
func ddMount(e *env, round int) result {
	t := e.T
	dir := filepath.Join(e.Work, fmt.Sprintf("round%d-large", round))
	m, metricsURL := e.startMount(dir, "s3://"+bucket+"/big", e.largeEndpoint)
	mp := m.Dir()
	file := filepath.Join(mp, filepath.FromSlash(e.largeRel))

	meter := measure.Start(e.Store, measure.Proc(m.Pid()))
	smp := startSampler(metricsURL, e.cfg.sampleEvery)
	n, _, el, err := testenv.DD(file)
	usage := meter.Stop()
	inFlight := smp.finish()
	if err != nil {
		t.Fatalf("dd through the mount: %v", err)
	}
	if n != e.largeSize {
		t.Fatalf("dd through the mount copied %d bytes; the file has %d", n, e.largeSize)
	}
	st, err := testenv.StatsErr(e.Bin, mp)
	if err != nil {
		t.Fatalf("%v", err)
	}
	e.checkThroughMount(mp, e.largeRel, e.largeCRC)
	logs := e.stopMount(m, dir)
	return result{name: "dd, cold mount", Pass: measure.Pass{Files: 1, Bytes: n, Elapsed: el}, Usage: usage, stall: -1, logs: logs,
		note: fmt.Sprintf("dd bs=1M, fresh mount+cache, --chunk-size %s; hits %d misses %d, %d chunks fetched; bytes checked after (CRC-32C); %s",
			e.cfg.chunkSize, st.Mount.Hits, st.Mount.Misses, st.Cache.ChunksFetched, inFlight)}
}

// ddLocal runs dd over the source file on local disk, its page cache
// dropped first.
func ddLocal(e *env) result {
	src := filepath.Join(e.largeSrc, filepath.FromSlash(e.largeRel))
	if err := testenv.DropPageCache(src); err != nil {
		e.T.Fatalf("fadvise DONTNEED %s: %v", src, err)
	}
	c0 := testenv.MachineCPU()
	n, _, el, err := testenv.DD(src)
	cpu := testenv.MachineCPU().BusySince(c0)
	if err != nil || n != e.largeSize {
		e.T.Fatalf("dd %s: %d bytes, %v", src, n, err)
	}
	return result{name: "dd, local disk", Pass: measure.Pass{Files: 1, Bytes: n, Elapsed: el}, Usage: measure.Usage{CPU: cpu, ProcCPU: -1}, stall: -1,
		note: "dd bs=1M of the source file, its page cache dropped (fadvise DONTNEED); context only"}
}

// parallelRanges reads the large object as 4 MiB ranged GETs, par in
// flight, no filesystem: what the proxy and MinIO give to parallel
// connections (context for the dd pass, which can't beat it).
func parallelRanges(e *env, par int) result {
	r, err := rangedGets(e, pieces("big/"+e.largeRel, e.largeSize), par)
	if err != nil {
		e.T.Fatalf("parallel ranged GETs of big/%s: %v", e.largeRel, err)
	}
	r.name, r.Files = "store, 16 ranged GETs", 1
	r.note = fmt.Sprintf("%d ranged GetObject of 4 MiB in flight, no filesystem: what the store gives in parallel; context only; proc cpu: this program", par)
	return r
}

// rangeGet is one ranged GET: bytes [off, end] of key.
type rangeGet struct {
	key      string
	off, end int64
}

// pieces splits key, of size bytes, into 4 MiB ranges.
func pieces(key string, size int64) []rangeGet {
	const piece = 4 << 20
	var rs []rangeGet
	for off := int64(0); off < size; off += piece {
		rs = append(rs, rangeGet{key, off, min(off+piece, size) - 1})
	}
	return rs
}

// rangedGets makes gets, par in flight, through the large file's proxy,
// reading each body to the end, and measures them (bytes, time, GETs,
// CPU); name, files and note are the caller's.
func rangedGets(e *env, gets []rangeGet, par int) (result, error) {
	var total atomic.Int64
	meter := measure.Start(e.Store, measure.Self)
	start := time.Now()
	err := testenv.Parallel(len(gets), par, func() func(int) error {
		return func(i int) error {
			g := gets[i]
			out, err := e.largeClient.GetObject(context.Background(), &s3.GetObjectInput{
				Bucket: aws.String(bucket), Key: aws.String(g.key), Range: aws.String(fmt.Sprintf("bytes=%d-%d", g.off, g.end))})
			if err != nil {
				return err
			}
			n, err := io.Copy(io.Discard, out.Body)
			out.Body.Close()
			total.Add(n)
			return err
		}
	})
	el := time.Since(start)
	usage := meter.Stop()
	if err != nil {
		return result{}, err
	}
	return result{Pass: measure.Pass{Bytes: total.Load(), Elapsed: el}, Usage: usage, stall: -1}, nil
}
