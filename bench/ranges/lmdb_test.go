package ranges

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLMDBFlags(t *testing.T) {
	c, _, err := parseFlags([]string{"--passes", "lmdb-quarter,lmdb-raw"})
	if err != nil || !slices.Equal(c.passes, []string{"lmdb-raw", "lmdb-quarter"}) || tokenPasses(c.passes) ||
		c.lmdb != (lmdbConfig{records: 10000, min: 60000, max: 150000}) {
		t.Fatalf("got %+v, %v", c, err)
	}
	if c, _, err := parseFlags([]string{"--passes", "raw,lmdb-quarter-ra"}); err != nil || !tokenPasses(c.passes) {
		t.Fatalf("raw,lmdb-quarter-ra: %+v, %v", c, err)
	}
	for _, bad := range [][]string{{"--lmdb-records", "0"}, {"--lmdb-min-record", "10", "--lmdb-max-record", "9"}, {"--lmdb-max-record", "100M"}} {
		if _, _, err := parseFlags(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// A record's bytes are its own: checkRecord passes the generator's and
// fails one byte changed, a record's neighbour's bytes and a short one.
func TestCheckRecord(t *testing.T) {
	l := lmdbConfig{records: 10, min: 1000, max: 3001}
	rec := func(k int) []byte {
		p := make([]byte, l.recordLen(46, k))
		base := recordBase(46, k)
		for i := range p {
			p[i] = byte(mix64(base|uint64(i/8)) >> (8 * (i % 8)))
		}
		return p
	}
	for k := 0; k < 10; k++ {
		p := rec(k)
		if err := l.checkRecord(46, k, p); err != nil {
			t.Fatalf("record %d: %v", k, err)
		}
		p[len(p)-1] ^= 1
		if l.checkRecord(46, k, p) == nil {
			t.Errorf("record %d with its last byte changed passed", k)
		}
		if l.checkRecord(46, k, rec(k)[:len(p)-1]) == nil {
			t.Errorf("record %d one byte short passed", k)
		}
		if q := rec(k + 1); len(q) == len(p) && l.checkRecord(46, k, q) == nil {
			t.Errorf("record %d+1 passed as %d", k, k)
		}
	}
}

// lmdb_build.py and lmdb_reader.py agree with this program: the ranges
// the build finds hold what checkRecord wants, the reader reads every
// record right with readahead on and off, and finds records changed in
// data.mdb. Fails without /usr/bin/python3, numpy and lmdb (test/run.sh
// installs Debian's python3-numpy and python3-lmdb).
func TestLMDBScripts(t *testing.T) {
	if err := exec.Command(python, "-c", "import numpy, lmdb").Run(); err != nil {
		t.Fatalf("%s with numpy and lmdb (Debian's python3-numpy, python3-lmdb): %v", python, err)
	}
	dir := t.TempDir()
	l := lmdbConfig{records: 40, min: 5000, max: 20000}
	for name, data := range map[string][]byte{"build.py": lmdbBuildPy, "reader.py": lmdbReaderPy, "lmdb_records.py": lmdbRecordsPy} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db, table := filepath.Join(dir, "db"), filepath.Join(dir, "table.bin")
	out, err := exec.Command(python, filepath.Join(dir, "build.py"), "--dir", db, "--records", "40", "--min", "5000", "--max", "20000",
		"--seed", "46", "--table", table).CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v: %s", err, out)
	}
	var info lmdbInfo
	if err := json.Unmarshal(out, &info); err != nil || info.Records != 40 || info.OverflowPages == 0 {
		t.Fatalf("build printed %q: %+v, %v", out, info, err)
	}
	offs, lns, err := readTable(table, 40)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(db, "data.mdb"))
	if err != nil || int64(len(data)) != info.DataBytes {
		t.Fatalf("data.mdb: %d bytes, %v; build said %d", len(data), err, info.DataBytes)
	}
	var sum int64
	for k := range offs {
		if err := l.checkRecord(46, k, data[offs[k]:offs[k]+lns[k]]); err != nil {
			t.Fatal(err)
		}
		sum += lns[k]
	}
	if sum != info.RecordBytes {
		t.Errorf("record bytes %d, build said %d", sum, info.RecordBytes)
	}
	order := filepath.Join(dir, "order.bin")
	if err := writeOrder(order, lmdbOrder(1, 2, 40, 1000)); err != nil {
		t.Fatal(err)
	}
	run := func(ra string) readerResult {
		t.Helper()
		cmd := exec.Command(python, filepath.Join(dir, "reader.py"), "--path", db, "--seed", "46", "--min", "5000", "--max", "20000",
			"--records", "40", "--order", order, "--reader", "1", "--readahead", ra)
		cmd.Stdin = strings.NewReader("go 0.3\n")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("reader: %v: %s %s", err, out, stderrOf(err))
		}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		var r readerResult
		if !sc.Scan() || sc.Text() != "ready" || !sc.Scan() || json.Unmarshal(sc.Bytes(), &r) != nil {
			t.Fatalf("reader printed %q", out)
		}
		return r
	}
	for _, ra := range []string{"0", "1"} {
		if r := run(ra); r.Records < 40 || r.Bad != 0 || r.Bytes < r.Records*5000 {
			t.Fatalf("readahead %s: %+v, first bad %s", ra, r, r.FirstBad)
		}
	}
	for k := range offs {
		if k%4 == 0 {
			data[offs[k]+lns[k]/2] ^= 1
		}
	}
	if err := os.WriteFile(filepath.Join(db, "data.mdb"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run("0"); r.Bad == 0 || r.Bad >= r.Records {
		t.Fatalf("records changed: %+v", r)
	}
}
