package ranges

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dsmount/dsmount/bench/internal/cli"
)

// pass is one --passes entry: a name, a line for --help, and what it runs,
// which returns its rows (each naming its reference by ID). A new pass (a
// declared one, say) is one more entry here and its function. The LMDB
// passes (lmdb.go) read an LMDB, not the token file, and are not in the
// default --passes.
type pass struct {
	name, help string
	run        func(e *env) []row
	lmdb       bool
}

// allPasses are the passes, in the order they run (the store passes
// first: the full pass drops the page cache, MinIO's copy of the object
// included).
var allPasses = []pass{
	{"raw", "ranged GETs of windows, --readers in flight, no filesystem: the reference of the store passes", runRaw, false},
	{"raw-parallel", "ranged GETs of windows, --prefetch-parallel in flight (the daemon's prefetch bound), no filesystem: the store's own parallel rate, the ceiling of any client of it", runRawParallel, false},
	{"quarter", "a mount whose cache holds a quarter of the file (--cache-size), reads undeclared", runQuarter, false},
	{"quarter-declared", "a mount whose cache holds a quarter of the file, each reader a job declaring its windows as ranges (dsmount.ranges.NanoGPTWindows) and reading them with its get_batch", runQuarterDeclared, false},
	{"quarter-paced", "quarter-declared with a fixed sleep per window, the readers' demand --demand of the declared pass's windows/s: their share of time waiting in get_batch is the stall", runQuarterPaced, false},
	{"full", "a mount whose cache holds the file, reads undeclared: cold against the raw GETs; then, the file cached whole, from the cache disk and from the page cache, each against the local file", runFull, false},
	{"lmdb-raw", "ranged GETs of an LMDB's records, --readers in flight, no filesystem: the reference of the LMDB passes", runLMDBRaw, true},
	{"lmdb-quarter", "a mount of the LMDB whose cache holds a quarter of data.mdb, readers opening it readahead=False (MADV_RANDOM), records by key in a random order", runLMDBQuarter, true},
	{"lmdb-quarter-ra", "lmdb-quarter with LMDB's default readahead=True", runLMDBQuarterRA, true},
}

// passNames is the default --passes: those of the token file.
func passNames() string {
	var s []string
	for _, p := range allPasses {
		if !p.lmdb {
			s = append(s, p.name)
		}
	}
	return strings.Join(s, ",")
}

// allNames is every pass's name.
func allNames() string {
	var s []string
	for _, p := range allPasses {
		s = append(s, p.name)
	}
	return strings.Join(s, ",")
}

// tokenPasses says whether any of passes reads the token file.
func tokenPasses(passes []string) bool {
	for _, p := range allPasses {
		if !p.lmdb && selected(passes, p.name) {
			return true
		}
	}
	return false
}

func passHelp() string {
	var s []string
	for _, p := range allPasses {
		s = append(s, p.name+" ("+p.help+")")
	}
	return strings.Join(s, "; ")
}

// parsePasses reads --passes: names of allPasses, returned in its order.
func parsePasses(s string) ([]string, error) {
	want := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		known := false
		for _, p := range allPasses {
			known = known || p.name == f
		}
		if !known {
			return nil, fmt.Errorf("unknown pass %q (want some of %s)", f, allNames())
		}
		want[f] = true
	}
	var out []string
	for _, p := range allPasses {
		if want[p.name] {
			out = append(out, p.name)
		}
	}
	return out, nil
}

func selected(passes []string, name string) bool {
	for _, p := range passes {
		if p == name {
			return true
		}
	}
	return false
}

func runRaw(e *env) []row {
	r := rawGets(e, e.cfg.seconds, 0)
	r.ID, r.Name = "raw", fmt.Sprintf("raw ranged GETs, %d in flight", e.cfg.readers)
	r.Note = "GetObject with a Range of one window, no filesystem; µs/window is this program's CPU"
	cli.Logf("raw ranged GETs: %.0f windows/s, %d GETs", r.Rate, r.StoreGETs)
	return []row{r}
}

func runRawParallel(e *env) []row {
	n := e.cfg.parallel
	r := rawGetsN(e, e.cfg.seconds, 1<<20, n)
	e.parallelRate = r.Rate
	r.ID, r.Name, r.Ref = "raw-parallel", fmt.Sprintf("raw ranged GETs, %d in flight", n), "raw"
	r.Note = "the store's own parallel rate: what the declared passes can reach at one GET per window"
	cli.Logf("raw ranged GETs, %d in flight: %.0f windows/s", n, r.Rate)
	return []row{r}
}

func runQuarter(e *env) []row {
	m := e.mount("quarter", strconv.FormatInt(e.cfg.cacheSize, 10))
	r := e.timed("quarter", "mount, quarter cache, undeclared", m.file, e.cfg.pageCache, m)
	r.Ref = "raw"
	r.Note = fmt.Sprintf("%s; dsmount fetched %.1f MB in %d GETs (%.1f× the bytes used)", m, float64(r.FetchedBytes)/1e6, r.DaemonGETs,
		float64(r.FetchedBytes)/float64(max(1, r.UsedBytes)))
	m.stop(e)
	return []row{r}
}

func runQuarterDeclared(e *env) []row {
	m := e.mount("quarter-declared", strconv.FormatInt(e.cfg.cacheSize, 10))
	r, tot := e.declaredRun("quarter-declared", "mount, quarter cache, declared ranges", m, 0)
	e.declaredRate = r.Rate
	r.Ref = "raw"
	r.Note = fmt.Sprintf("%s; %.2f× the store's parallel rate; %d windows declared by %d jobs (slowest declaration %.2f s, in the timed span); get_batch took %.0f%% of the readers' time; dsmount fetched %.1f MB in %d GETs (%.2f× the bytes used)",
		m, r.Rate/max(e.parallelRate, 1e-9), tot.declared, e.cfg.readers, tot.declareS, 100*tot.waitShare, float64(r.FetchedBytes)/1e6, r.DaemonGETs, float64(r.FetchedBytes)/float64(max(1, r.UsedBytes)))
	m.stop(e)
	return []row{r}
}

func runQuarterPaced(e *env) []row {
	if e.declaredRate <= 0 {
		e.T.Fatalf("the quarter-paced pass sets its demand from the quarter-declared pass's rate: run both (--passes ...,quarter-declared,quarter-paced)")
	}
	c := e.cfg
	perReader := c.demand * e.declaredRate / float64(c.readers)
	workMS := 1000 / perReader
	m := e.mount("quarter-paced", strconv.FormatInt(c.cacheSize, 10))
	r, tot := e.declaredRun("quarter-paced", fmt.Sprintf("mount, quarter cache, declared, paced at %.2g× the declared rate", c.demand), m, workMS)
	r.Ref = "quarter-declared"
	r.Stall = tot.waitShare
	r.Note = fmt.Sprintf("%s; %.3f ms sleep per window (demand %.0f windows/s); stall: get_batch took %.1f%% of the readers' time; dsmount fetched %.2f× the bytes used",
		m, workMS, c.demand*e.declaredRate, 100*tot.waitShare, float64(r.FetchedBytes)/float64(max(1, r.UsedBytes)))
	m.stop(e)
	return []row{r}
}

// declaredRun runs the declared readers over m for --seconds, their page
// cache bounded.
func (e *env) declaredRun(id, name string, m *mnt, workMS float64) (row, totals) {
	rs := e.startDeclared(m.file, e.cfg.pageCache, workMS)
	r := e.measure(id, name, rs, m)
	return r, rs.tot
}

func runFull(e *env) []row {
	c := e.cfg
	m := e.mount("full", c.fullCacheSize)
	cold := e.timed("full-cold", "mount, full cache, cold, undeclared", m.file, c.pageCache, m)
	cold.Ref = "raw"
	cold.Note = fmt.Sprintf("%s; store bytes %.2f× the file; dsmount fetched %.1f MB in %d GETs", m,
		float64(cold.StoreBytes)/float64(c.fileSize), float64(cold.FetchedBytes)/1e6, cold.DaemonGETs)

	m.warm(e)
	dropCaches(e)
	disk := e.timed("full-disk", "mount, full cache, from the cache disk", m.file, c.pageCache, m)
	disk.Ref = "local-disk"
	disk.Note = fmt.Sprintf("%s; the whole file cached (dsmount warm, untimed), drop_caches 3 first, page cache bounded", m)
	dropCaches(e)
	localDisk := e.timed("local-disk", "local file, from disk", e.src, c.pageCache, nil)
	localDisk.Note = "the token file on the local disk (the cache dir's filesystem), drop_caches 3 first, page cache bounded"

	readWhole(e, m.file)
	page := e.timed("full-page", "mount, full cache, from the page cache", m.file, 0, m)
	page.Ref = "local-page"
	page.Note = fmt.Sprintf("%s; the file read whole through the mount first (untimed), readers unbounded", m)
	readWhole(e, e.src)
	localPage := e.timed("local-page", "local file, from the page cache", e.src, 0, nil)
	localPage.Note = "the local file read whole first (untimed), readers unbounded"
	m.stop(e)
	return []row{cold, disk, localDisk, page, localPage}
}

// timed runs the readers over path for --seconds, their page cache bounded
// by bound (0: not bounded), and measures the store and, with m, the
// mount's daemon.
func (e *env) timed(id, name, path string, bound int64, m *mnt) row {
	return e.measure(id, name, e.startReaders(path, bound), m)
}

// measure lets readers rs (ready) read for --seconds and measures the
// store and, with m, the mount's daemon.
func (e *env) measure(id, name string, rs *readers, m *mnt) row {
	s0 := e.storeNow()
	var d0 daemonSnap
	if m != nil {
		d0 = m.snap(e)
	}
	tot := rs.run(e.cfg.seconds)
	rs.tot = tot
	s1 := e.storeNow()
	r := row{ID: id, Name: name, Unit: rs.unit, Windows: tot.windows, UsedBytes: tot.bytes, Seconds: e.cfg.seconds, Wall: tot.wall.Seconds(),
		StoreBytes: s1.bytes - s0.bytes, StoreGETs: s1.gets - s0.gets,
		FetchedBytes: -1, DaemonGETs: -1, FUSEReads: -1, DaemonCPU: -1, ClientCPU: -1, Cgroup: &rs.cgNote}
	if m != nil {
		d1 := m.snap(e)
		r.DaemonCPU, r.DaemonGETs, r.FetchedBytes, r.FUSEReads = d1.cpu-d0.cpu, d1.gets-d0.gets, d1.fetched-d0.fetched, d1.reads-d0.reads
		if d1.prefetched > 0 || d1.jobReads > 0 {
			r.Jobs = &jobCounts{Reads: d1.jobReads, Prefetched: d1.prefetched, PrefetchHits: d1.prefetchHits, Pushed: d1.pushed,
				Stalls: d1.stalls, PrefetchEvicted: d1.evictedAhead}
			cli.Logf("%s: the jobs: %+v", name, *r.Jobs)
		}
	}
	r.fill(e)
	batches := ""
	if tot.batches > 0 {
		batches = fmt.Sprintf(", %d batches", tot.batches)
	}
	cli.Logf("%s: %.0f %ss/s (%d%s), store %d GETs %.1f MB", name, r.Rate, r.Unit, r.Windows, batches, r.StoreGETs, float64(r.StoreBytes)/1e6)
	return r
}
