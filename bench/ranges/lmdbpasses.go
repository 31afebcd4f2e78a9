package ranges

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/bench/internal/measure"
)

func runLMDBRaw(e *env) []row {
	db := e.lmdb()
	r := lmdbGets(e, e.cfg.seconds, db.rows)
	r.ID, r.Name = "lmdb-raw", fmt.Sprintf("raw ranged GETs of records, %d in flight", e.cfg.readers)
	r.Note = "GetObject with a Range of one record's bytes in data.mdb, in the readers' key order, no filesystem; µs/record is this program's CPU"
	cli.Logf("raw ranged GETs of records: %.0f records/s, %d GETs", r.Rate, r.StoreGETs)
	return []row{r}
}

func runLMDBQuarter(e *env) []row { return lmdbQuarter(e, "lmdb-quarter", false) }

func runLMDBQuarterRA(e *env) []row { return lmdbQuarter(e, "lmdb-quarter-ra", true) }

// lmdbQuarter is a fresh mount of the LMDB whose cache holds a quarter of
// data.mdb, read by lmdb_reader.py with LMDB's readahead as asked, their
// page cache bounded to a quarter of data.mdb.
func lmdbQuarter(e *env, id string, readahead bool) []row {
	db := e.lmdb()
	m := e.mountOf(id, lmdbPrefix, lmdbDir+"/data.mdb", strconv.FormatInt(db.info.CacheSize, 10))
	ra, name := "0", "LMDB mount, quarter, readahead=False"
	if readahead {
		ra, name = "1", "LMDB mount, quarter, readahead=True"
	}
	c := e.cfg
	script := filepath.Join(e.Work, "lmdb_reader.py")
	rs := e.startProcs(db.info.PageCache, "record", func(r int) []string {
		return []string{python, script, "--path", filepath.Dir(m.file), "--seed", strconv.FormatUint(c.seed&0xFFFF, 10),
			"--min", strconv.Itoa(c.lmdb.min), "--max", strconv.Itoa(c.lmdb.max), "--records", strconv.Itoa(c.lmdb.records),
			"--order", db.order, "--reader", strconv.Itoa(r), "--readahead", ra}
	})
	r := e.measure(id, name, rs, m)
	r.Ref = "lmdb-raw"
	r.Note = fmt.Sprintf("%s; lmdb.open(readonly=True, lock=False, readahead=%v), a read txn and txn.get per record; dsmount fetched %.1f MB in %d GETs (%.1f× the records' bytes); %.1f FUSE READs per record",
		m, readahead, float64(r.FetchedBytes)/1e6, r.DaemonGETs, float64(r.FetchedBytes)/float64(max(1, r.UsedBytes)),
		float64(r.FUSEReads)/float64(max(1, r.Windows)))
	m.stop(e)
	return []row{r}
}

// lmdbGets is the LMDB passes' reference: --readers goroutines of this
// program, goroutine g asking the store, through the proxy, for the
// records of order[g] in turn (a GetObject with a Range of the record's
// bytes in data.mdb), checking every byte, for seconds. CPU is this
// program's.
func lmdbGets(e *env, seconds float64, order [][]int) row {
	c := e.cfg
	db := e.db
	key := lmdbPrefix + "/" + lmdbDir + "/data.mdb"
	var (
		records, used atomic.Int64
		failOnce      sync.Once
		fail          error
		wg            sync.WaitGroup
	)
	s0, cpu0 := e.storeNow(), measure.Self()
	start := time.Now()
	deadline := start.Add(time.Duration(seconds * float64(time.Second)))
	for g := 0; g < c.readers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, c.lmdb.max+1)
			for i := 0; time.Now().Before(deadline); i++ {
				k := order[g][i%len(order[g])]
				off, n := db.offs[k], db.lns[k]
				err := func() error {
					out, err := e.client.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
						Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1))})
					if err != nil {
						return err
					}
					defer out.Body.Close()
					got, err := io.ReadFull(out.Body, buf)
					if err != io.ErrUnexpectedEOF {
						return fmt.Errorf("record %d: %d bytes or more (%v), want %d", k, got, err, n)
					}
					if time.Now().After(deadline) {
						return nil
					}
					if err := c.lmdb.checkRecord(c.seed, k, buf[:got]); err != nil {
						return err
					}
					records.Add(1)
					used.Add(int64(got))
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
		e.T.Fatalf("raw ranged GETs of records: %v", fail)
	}
	s1 := e.storeNow()
	r := row{Unit: "record", Windows: records.Load(), UsedBytes: used.Load(), Seconds: seconds, Wall: wall.Seconds(),
		StoreBytes: s1.bytes - s0.bytes, StoreGETs: s1.gets - s0.gets,
		FetchedBytes: -1, DaemonGETs: -1, FUSEReads: -1, DaemonCPU: -1, ClientCPU: measure.Self() - cpu0}
	r.fill(e)
	return r
}
