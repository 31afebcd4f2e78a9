package ranges

import (
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/dsmount/dsmount/bench/internal/cli"
)

// The LMDB passes (issue 46, target 3): an image dataset as one LMDB
// (Debian's python3-lmdb), --lmdb-records records of --lmdb-min-record to
// --lmdb-max-record bytes, keys b"%08d" % k, read by key in a random order.
// lmdb_build.py builds it and finds each record's byte range in data.mdb;
// lmdb_reader.py reads it through a mount; lmdbGets (lmdbpasses.go) asks
// the store for the same ranges.
const (
	lmdbPrefix = "lmdb"        // the database's prefix in the bucket
	lmdbDir    = "images.lmdb" // its directory under the prefix (data.mdb inside)
)

//go:embed lmdb_build.py
var lmdbBuildPy []byte

//go:embed lmdb_reader.py
var lmdbReaderPy []byte

// lmdbRecordsPy is the record formula both scripts import.
//
//go:embed lmdb_records.py
var lmdbRecordsPy []byte

// lmdbConfig is the LMDB passes' flags.
type lmdbConfig struct {
	records, min, max int
}

func (l *lmdbConfig) addFlags(fs *flag.FlagSet) {
	fs.IntVar(&l.records, "lmdb-records", 10000, "records in the LMDB passes' database (e.g. 2000 for a quick run)")
	fs.IntVar(&l.min, "lmdb-min-record", 60000, "the LMDB's smallest record, bytes")
	fs.IntVar(&l.max, "lmdb-max-record", 150000, "the LMDB's largest record, bytes")
}

func (l lmdbConfig) check() error {
	if l.records < 1 || l.records >= 1<<24 || l.min < 1 || l.min > l.max || l.max >= 1<<26 {
		return fmt.Errorf("--lmdb-records must be 1 to 2^24-1, and 1 <= --lmdb-min-record <= --lmdb-max-record < 64 MiB")
	}
	return nil
}

// The records: record k of seed s (s < 2^16, k < 2^24), with mix64 the
// splitmix64 finalizer and base = s<<48 | k<<24, is the first
// recordLen bytes of the little-endian words mix64(base | j), j = 0, 1, ...
// lmdb_build.py and lmdb_reader.py compute the same.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

func recordBase(seed uint64, k int) uint64 { return (seed&0xFFFF)<<48 | uint64(k)<<24 }

// recordLen is record k's length in bytes.
func (l lmdbConfig) recordLen(seed uint64, k int) int {
	return l.min + int(mix64(recordBase(seed, k)|0xFFFFFF)%uint64(l.max-l.min+1))
}

// checkRecord checks p against record k: it returns an error naming the
// first wrong byte, or a wrong length.
func (l lmdbConfig) checkRecord(seed uint64, k int, p []byte) error {
	if n := l.recordLen(seed, k); len(p) != n {
		return fmt.Errorf("record %d: %d bytes, want %d", k, len(p), n)
	}
	base := recordBase(seed, k)
	var w [8]byte
	for off := 0; off < len(p); off += 8 {
		binary.LittleEndian.PutUint64(w[:], mix64(base|uint64(off/8)))
		for i := 0; i < 8 && off+i < len(p); i++ {
			if p[off+i] != w[i] {
				return fmt.Errorf("record %d: byte %d is %#x, want %#x", k, off+i, p[off+i], w[i])
			}
		}
	}
	return nil
}

// lmdbSet is the LMDB, built and uploaded, and its readers' order.
type lmdbSet struct {
	dir       string  // the database on local disk (data.mdb inside)
	offs, lns []int64 // record k's byte range in data.mdb
	order     string  // the readers' key order: --readers rows of records uint32
	rows      [][]int // the same, for the raw GETs
	info      lmdbInfo
}

// lmdbInfo is what lmdb_build.py says it built, and the LMDB passes'
// bounds, for the report.
type lmdbInfo struct {
	DataBytes     int64 `json:"data_bytes"`   // data.mdb's size
	RecordBytes   int64 `json:"record_bytes"` // the records' bytes, all together
	Records       int   `json:"records"`
	PageSize      int   `json:"page_size"`
	Depth         int   `json:"depth"`
	BranchPages   int   `json:"branch_pages"`
	LeafPages     int   `json:"leaf_pages"`
	OverflowPages int   `json:"overflow_pages"`
	MinRecord     int   `json:"min_record_bytes"`
	MaxRecord     int   `json:"max_record_bytes"`
	// CacheSize is the lmdb-quarter passes' --cache-size, PageCache their
	// readers' page cache bound: each a quarter of data.mdb.
	CacheSize int64 `json:"quarter_cache_bytes"`
	PageCache int64 `json:"page_cache_bound_bytes"`
}

func (i *lmdbInfo) String() string {
	return fmt.Sprintf("an LMDB of %d records of %d-%d bytes (%.0f MB), data.mdb %.0f MB (B-tree depth %d, %d branch and %d leaf pages of %d bytes), keys read in a random order, every record's bytes checked; lmdb-quarter cache %.0f MB, page cache bound %.0f MB",
		i.Records, i.MinRecord, i.MaxRecord, float64(i.RecordBytes)/1e6, float64(i.DataBytes)/1e6, i.Depth, i.BranchPages, i.LeafPages, i.PageSize,
		float64(i.CacheSize)/1e6, float64(i.PageCache)/1e6)
}

// lmdbInfo is the LMDB's, nil unless an LMDB pass ran.
func (e *env) lmdbInfo() *lmdbInfo {
	if e.db == nil {
		return nil
	}
	return &e.db.info
}

// lmdb builds the LMDB (once), checks every record's range in data.mdb,
// uploads data.mdb, writes the readers' order and lmdb_reader.py, and, if
// no token pass warmed the store, warms it with untimed raw GETs.
func (e *env) lmdb() *lmdbSet {
	if e.db != nil {
		return e.db
	}
	c := e.cfg
	if err := exec.Command(python, "-c", "import lmdb").Run(); err != nil {
		e.T.Fatalf("%s can't import lmdb (Debian's python3-lmdb): %v", python, err)
	}
	root := filepath.Join(e.Work, "src-lmdb")
	db := &lmdbSet{dir: filepath.Join(root, lmdbDir), order: filepath.Join(e.Work, "lmdb-order.bin")}
	build := filepath.Join(e.Work, "lmdb_build.py")
	table := filepath.Join(e.Work, "lmdb-table.bin")
	for path, data := range map[string][]byte{build: lmdbBuildPy, filepath.Join(e.Work, "lmdb_reader.py"): lmdbReaderPy,
		filepath.Join(e.Work, "lmdb_records.py"): lmdbRecordsPy} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			e.T.Fatalf("%v", err)
		}
	}
	t0 := time.Now()
	out, err := exec.Command(python, build, "--dir", db.dir, "--records", strconv.Itoa(c.lmdb.records), "--min", strconv.Itoa(c.lmdb.min),
		"--max", strconv.Itoa(c.lmdb.max), "--seed", strconv.FormatUint(c.seed&0xFFFF, 10), "--table", table).Output()
	if err != nil {
		e.T.Fatalf("lmdb_build.py: %v: %s %s", err, out, stderrOf(err))
	}
	if err := json.Unmarshal(out, &db.info); err != nil {
		e.T.Fatalf("lmdb_build.py printed %q: %v", out, err)
	}
	db.info.MinRecord, db.info.MaxRecord = c.lmdb.min, c.lmdb.max
	db.info.CacheSize, db.info.PageCache = db.info.DataBytes/4, db.info.DataBytes/4
	if db.offs, db.lns, err = readTable(table, c.lmdb.records); err != nil {
		e.T.Fatalf("%v", err)
	}
	// lmdb_build.py checked the ranges with its formula; checking them with
	// this program's too proves the two agree.
	data, err := os.ReadFile(filepath.Join(db.dir, "data.mdb"))
	if err != nil {
		e.T.Fatalf("%v", err)
	}
	for k := range db.offs {
		if end := db.offs[k] + db.lns[k]; end > int64(len(data)) {
			e.T.Fatalf("record %d's range ends at %d, past data.mdb's %d bytes", k, end, len(data))
		}
		if err := c.lmdb.checkRecord(c.seed, k, data[db.offs[k]:db.offs[k]+db.lns[k]]); err != nil {
			e.T.Fatalf("data.mdb at lmdb_build.py's range: %v", err)
		}
	}
	data = nil
	cli.Logf("LMDB: %s, built and checked in %v", &db.info, cli.Since(t0))
	t0 = time.Now()
	e.Store.Upload(e.T, bucket, lmdbPrefix, root, 1)
	cli.Logf("uploaded data.mdb to MinIO in %v", cli.Since(t0))
	db.rows = lmdbOrder(c.rngSeed, c.readers, c.lmdb.records, 1000)
	if err := writeOrder(db.order, db.rows); err != nil {
		e.T.Fatalf("%v", err)
	}
	e.db = db
	if c.warmStore > 0 && !e.warmed {
		r := lmdbGets(e, c.warmStore, lmdbOrder(c.rngSeed, c.readers, c.lmdb.records, 2000))
		cli.Logf("store warm-up (untimed): %.0f records/s of raw ranged GETs for %.0f s", r.Rate, c.warmStore)
		e.warmed = true
	}
	return db
}

// lmdbOrder is the readers' key orders: row r a permutation of the
// records from rngSeed and stream+r.
func lmdbOrder(rngSeed int64, readers, records int, stream uint64) [][]int {
	rows := make([][]int, readers)
	for r := range rows {
		rows[r] = rand.New(rand.NewPCG(uint64(rngSeed), stream+uint64(r))).Perm(records)
	}
	return rows
}

// writeOrder writes rows as uint32 little-endian, row after row.
func writeOrder(path string, rows [][]int) error {
	var b []byte
	for _, row := range rows {
		for _, k := range row {
			b = binary.LittleEndian.AppendUint32(b, uint32(k))
		}
	}
	return os.WriteFile(path, b, 0o644)
}

// readTable reads lmdb_build.py's table: per record, its offset and
// length in data.mdb, two uint64 little-endian.
func readTable(path string, records int) (offs, lns []int64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	if len(b) != 16*records {
		return nil, nil, fmt.Errorf("%s: %d bytes, want %d for %d records", path, len(b), 16*records, records)
	}
	offs, lns = make([]int64, records), make([]int64, records)
	for k := range offs {
		offs[k] = int64(binary.LittleEndian.Uint64(b[16*k:]))
		lns[k] = int64(binary.LittleEndian.Uint64(b[16*k+8:]))
	}
	return offs, lns, nil
}

// stderrOf is an exec.ExitError's stderr, its last lines.
func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return lastLines(string(ee.Stderr), 20)
	}
	return ""
}
