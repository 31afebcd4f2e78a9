package ranges

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/dsmount/dsmount/bench/internal/cli"
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
	r := rangedGets(e, seconds, lmdbPrefix+"/"+lmdbDir+"/data.mdb", c.lmdb.max, c.readers, func(g int) func() span {
		i := 0
		return func() span {
			k := order[g][i%len(order[g])]
			i++
			return span{off: db.offs[k], n: db.lns[k], what: fmt.Sprintf("record %d", k),
				check: func(b []byte) error { return c.lmdb.checkRecord(c.seed, k, b) }}
		}
	})
	r.Unit = "record"
	r.fill(e)
	return r
}
