package ranges

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
)

// row is one timed run of readers (or of the raw GETs).
type row struct {
	ID   string `json:"id"`   // what other rows name as their reference
	Name string `json:"pass"` // as the table shows it
	// Ref is the ID of the row this one's ratio is against ("": a
	// reference, or its reference did not run).
	Ref   string  `json:"reference,omitempty"`
	Ratio float64 `json:"ratio,omitempty"` // Rate over Ref's
	// Unit is what Windows counts: "window" of tokens, or "record" of the
	// LMDB passes.
	Unit    string  `json:"unit"`
	Windows int64   `json:"windows"`       // windows (records) read and checked within Seconds
	Seconds float64 `json:"seconds"`       // --seconds
	Wall    float64 `json:"wall_seconds"`  // "go" to the last reader's answer
	Rate    float64 `json:"windows_per_s"` // Windows / Seconds
	// UsedBytes is the windows' (records') bytes: what the readers used.
	UsedBytes int64 `json:"bytes_used"`
	// StoreBytes is the bytes MinIO's metrics count as sent for its S3
	// answers during the run (bodies: the raw GETs' equal their windows'
	// bytes; the metrics' own ListBuckets add a little), StoreGETs its
	// GetObject requests.
	StoreBytes int64 `json:"store_bytes"`
	StoreGETs  int64 `json:"store_gets"`
	// Amplification is StoreBytes / UsedBytes.
	Amplification float64 `json:"store_bytes_per_byte_used"`
	// The mount's own counters (dsmount stats), -1 without a mount:
	// bytes fetched from the store, GETs sent, FUSE READs served.
	FetchedBytes int64 `json:"dsmount_bytes_fetched"`
	DaemonGETs   int64 `json:"dsmount_gets"`
	FUSEReads    int64 `json:"fuse_reads"`
	// DaemonCPU is the daemon's utime+stime during the run (-1: no
	// mount); ClientCPU this program's (the raw GETs; -1 otherwise).
	DaemonCPU float64 `json:"daemon_cpu_s"`
	ClientCPU float64 `json:"client_cpu_s"`
	// CPUPerWindow is DaemonCPU (or ClientCPU) per window (record), µs.
	CPUPerWindow float64 `json:"cpu_us_per_window"`
	// Stall is the paced declared pass's readers' share of their time
	// in get_batch.
	Stall float64 `json:"stall_share,omitempty"`
	// Jobs are the declared jobs' counts at the end of the run, every
	// job's together (dsmount stats), for the declared passes.
	Jobs   *jobCounts `json:"jobs,omitempty"`
	Cgroup *cgNote    `json:"readers_cgroup,omitempty"`
	Note   string     `json:"note,omitempty"`
}

// jobCounts are declared jobs' counts (control.JobStats), summed.
type jobCounts struct {
	Reads           int64 `json:"reads_seen"`
	Prefetched      int64 `json:"prefetched"`
	PrefetchHits    int64 `json:"prefetch_hits"`
	PrefetchEvicted int64 `json:"prefetch_evicted"`
	Pushed          int64 `json:"pushed"`
	Stalls          int64 `json:"stalls"`
}

// fill derives the rates from the counts.
func (r *row) fill(e *env) {
	r.Rate = float64(r.Windows) / r.Seconds
	if r.Unit == "" {
		r.Unit = "window"
	}
	if r.Unit == "window" {
		r.UsedBytes = r.Windows * int64(window(e.cfg))
	}
	if r.UsedBytes > 0 && r.StoreBytes > 0 {
		r.Amplification = float64(r.StoreBytes) / float64(r.UsedBytes)
	}
	cpu := r.DaemonCPU
	if cpu < 0 {
		cpu = r.ClientCPU
	}
	if cpu >= 0 && r.Windows > 0 {
		r.CPUPerWindow = cpu / float64(r.Windows) * 1e6
	}
}

// storeSnap is MinIO's GetObject count and answer bytes at one moment.
type storeSnap struct{ gets, bytes int64 }

func (e *env) storeNow() storeSnap {
	g, b := e.Store.MinIO.GetObjectCount()
	return storeSnap{g, b}
}

// report is the whole run, as --json writes it.
type report struct {
	Date      string    `json:"date"`
	FileBytes int64     `json:"file_bytes"`
	Readers   int       `json:"readers"`
	Batch     int       `json:"batch"`
	Block     int       `json:"block"`
	Window    int       `json:"window_bytes"`
	Seconds   float64   `json:"seconds"`
	PageCache int64     `json:"page_cache_bound_bytes"`
	CacheSize int64     `json:"quarter_cache_bytes"`
	LatencyMs int       `json:"latency_ms"`
	JitterMs  int       `json:"jitter_ms"`
	CPUs      string    `json:"cpus"`
	Dsmount   string    `json:"dsmount"`
	Rows      []row     `json:"rows"`
	Reproduce string    `json:"reproduce"`
	Passes    []string  `json:"passes"`
	LMDB      *lmdbInfo `json:"lmdb,omitempty"` // the LMDB passes' database, when they ran
}

// results sets each row's ratio to its reference's rate and gathers the
// run.
func results(e *env, rows []row) report {
	c := e.cfg
	byID := map[string]row{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	for i, r := range rows {
		ref, ok := byID[r.Ref]
		if !ok || ref.Rate <= 0 {
			rows[i].Ref = ""
			continue
		}
		rows[i].Ratio = r.Rate / ref.Rate
	}
	bin := e.Bin
	if os.Getenv("DSMOUNT_BIN") == "" {
		bin = "this checkout's, built for the run"
	}
	return report{Date: time.Now().UTC().Format(time.RFC3339), FileBytes: c.fileSize, Readers: c.readers, Batch: c.batch, Block: c.block,
		Window: window(c), Seconds: c.seconds, PageCache: c.pageCache, CacheSize: c.cacheSize, LatencyMs: c.Latency, JitterMs: c.Jitter,
		CPUs: e.Store.CPUNote, Dsmount: bin, Rows: rows, Reproduce: e.reproduce(), Passes: c.passes, LMDB: e.lmdbInfo()}
}

// printTable prints the rows, a table per unit (windows, records), and
// what they mean.
func printTable(w io.Writer, rep report) {
	tokens := false
	for _, unit := range []string{"window", "record"} {
		var rows []row
		for _, r := range rep.Rows {
			if r.Unit == unit {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			continue
		}
		tokens = tokens || unit == "window"
		fmt.Fprintf(w, "\n%-40s %8s %9s %-18s %9s %10s %7s %10s %7s %9s\n",
			"pass", unit+"s", unit+"s/s", "ratio", "store MB", "store/used", "GETs", "µs/"+unit, "READs", "cg limit")
		for _, r := range rows {
			printRow(w, r)
		}
	}
	fmt.Fprintf(w, "\n")
	for _, r := range rep.Rows {
		if r.Note != "" {
			fmt.Fprintf(w, "%s: %s\n", r.Name, r.Note)
		}
	}
	if tokens {
		fmt.Fprintf(w, "\nwindows: %d tokens (%d bytes) at random starts, %d per np.memmap (batch), every token checked; windows/s: those finished within %g s\n",
			rep.Block+1, rep.Window, rep.Batch, rep.Seconds)
	}
	if l := rep.LMDB; l != nil {
		fmt.Fprintf(w, "\nrecords: %s; records/s: those finished within %g s\n", l, rep.Seconds)
	}
	fmt.Fprintf(w, "ratio: rate over the named row's; store MB, GETs: MinIO's S3 answer bytes and GetObject requests during the run; store/used: store bytes over the windows' (records') bytes\n")
	fmt.Fprintf(w, "µs/window (record): the daemon's CPU (utime+stime) per window (record), or this program's for the raw GETs; READs: FUSE READs the daemon served (dsmount stats)\n")
	fmt.Fprintf(w, "cg limit: the readers' memory cgroup (what they held when ready + 16 MiB + the page cache bound: %.0f MB for the windows, a quarter of data.mdb for the records); none: unbounded\n", float64(rep.PageCache)/1e6)
	if tokens {
		fmt.Fprintf(w, "file: %.0f MB of uint16 tokens; quarter cache %.0f MB; ", float64(rep.FileBytes)/1e6, float64(rep.CacheSize)/1e6)
	}
	fmt.Fprintf(w, "%d readers; MinIO behind toxiproxy +%d ms ± %d; cpus: %s; %d CPUs; dsmount: %s\n",
		rep.Readers, rep.LatencyMs, rep.JitterMs, rep.CPUs, runtime.NumCPU(), rep.Dsmount)
	fmt.Fprintf(w, "\nreproduce: %s\n", rep.Reproduce)
}

func printRow(w io.Writer, r row) {
	ratio := "reference"
	if r.Ref != "" {
		ratio = fmt.Sprintf("%.2f× %s", r.Ratio, r.Ref)
	}
	amp, fuse, limit, cpu := "-", "-", "-", "-"
	if r.DaemonCPU >= 0 || r.ClientCPU >= 0 {
		cpu = fmt.Sprintf("%.1f", r.CPUPerWindow)
	}
	if r.Amplification > 0 {
		amp = fmt.Sprintf("%.1f", r.Amplification)
	}
	if r.FUSEReads >= 0 {
		fuse = fmt.Sprint(r.FUSEReads)
	}
	if r.Cgroup != nil {
		limit = "none"
		if r.Cgroup.Limit > 0 {
			limit = fmt.Sprintf("%.0f MB", float64(r.Cgroup.Limit)/1e6)
		}
	}
	fmt.Fprintf(w, "%-40s %8d %9.0f %-18s %9.1f %10s %7d %10s %7s %9s\n", r.Name, r.Windows, r.Rate, ratio,
		float64(r.StoreBytes)/1e6, amp, r.StoreGETs, cpu, fuse, limit)
}

// writeJSON writes rep to path.
func writeJSON(path string, rep report) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
