package order

import (
	"cmp"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/bench/internal/measure"
	"github.com/dsmount/dsmount/test/testenv"
)

// smallRound is one round of the small-file passes.
type smallRound struct {
	ceiling, declared, cold, stallDeclared, stallCold result
	work                                              time.Duration // w, the simulated work per sample
}

// runSmallRound runs the small-file passes on the order of round r. The
// declared pass runs right after the ceiling it is compared with.
func runSmallRound(e *env, r int) smallRound {
	c := e.cfg
	order := shuffled(e.paths, c.seed+uint64(r)-1)
	var sr smallRound
	e.recycleMemory()
	sr.ceiling = ceiling(e, order)
	cli.Logf("round %d: ceiling %.0f files/s", r, sr.ceiling.FilesPerSec())
	sr.work = time.Duration(float64(c.readers) / (c.demand * sr.ceiling.FilesPerSec()) * float64(time.Second))

	e.recycleMemory()
	sr.declared = epochPass(e, r, "declared", order, true, 0)
	if !c.skipUndeclared {
		e.recycleMemory()
		sr.cold = epochPass(e, r, "not declared", order, false, 0)
	}
	e.recycleMemory()
	sr.stallDeclared = epochPass(e, r, "stall, declared", order, true, sr.work)
	if !c.skipUndeclared {
		e.recycleMemory()
		sr.stallCold = epochPass(e, r, "stall, not declared", order, false, sr.work)
	}
	return sr
}

func shuffled(paths []string, seed uint64) []string {
	order := append([]string(nil), paths...)
	rng := rand.New(rand.NewPCG(seed, 0x0bde4))
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	return order
}

// ceiling is plain parallel ranged GETs of every file in order, --gets in
// flight, through the small files' proxy: the store's own ceiling.
func ceiling(e *env, order []string) result {
	sizes := make([]int64, len(order))
	for i, p := range order {
		sizes[i] = e.sizes[p]
	}
	meter := measure.Start(e.Store, measure.Self)
	p, err := measure.RawGets(e.smallClient, bucket, "ds", order, sizes, e.cfg.getsPar)
	usage := meter.Stop()
	if err != nil {
		e.T.Fatalf("ceiling GETs: %v", err)
	}
	return result{name: "ceiling (raw GETs)", Pass: p, Usage: usage, stall: -1,
		note: fmt.Sprintf("%d ranged GetObject in flight, no filesystem; proc cpu: this program", e.cfg.getsPar)}
}

// epochPass reads every file of order once through a fresh mount and cache
// dir with --readers readers sharing one index into order; with declare it
// first runs `dsmount order` (inside the timed span); with work > 0 each
// reader sleeps work after each sample.
func epochPass(e *env, round int, name string, order []string, declare bool, work time.Duration) result {
	c, t := e.cfg, e.T
	dir := filepath.Join(e.Work, fmt.Sprintf("round%d-%s", round, strings.NewReplacer(" ", "", ",", "-").Replace(name)))
	os.MkdirAll(dir, 0o755)
	orderFile := filepath.Join(dir, "order.txt")
	if err := os.WriteFile(orderFile, []byte(strings.Join(order, "\n")+"\n"), 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	m, metricsURL := e.startMount(dir, "s3://"+bucket+"/ds", e.smallEndpoint)
	mp := m.Dir()

	smp := startSampler(metricsURL, c.sampleEvery)
	trace, err := testenv.StartFuseTrace(mp)
	if err != nil {
		t.Fatalf("%v", err)
	}
	sw0 := testenv.ProcSwitches(m.Pid())
	meter := measure.Start(e.Store, measure.Proc(m.Pid()))
	start := time.Now()
	var declTime time.Duration
	if declare {
		r := testenv.RunCLI(e.Bin, nil, 5*time.Minute, "order", mp, "--job", "bench", "--epoch", "0", orderFile, "--json")
		declTime = r.Duration
		if r.ExitCode != 0 {
			t.Fatalf("dsmount order: exit %d\nstdout: %s\nstderr: %s", r.ExitCode, r.Stdout, r.Stderr)
		}
		var res struct {
			Declared int `json:"declared"`
			Skipped  int `json:"skipped"`
		}
		if err := testenv.DecodeJSONObject(r.Stdout, &res); err != nil {
			t.Fatalf("dsmount order --json: %v", err)
		}
		if res.Declared != len(order) || res.Skipped != 0 {
			t.Fatalf("dsmount order declared %d files, skipped %d; the order has %d", res.Declared, res.Skipped, len(order))
		}
	}
	rs, err := readEpoch(e, mp, order, c.readers, work)
	el := time.Since(start)
	if c.slowLog {
		printSlowReads(fmt.Sprintf("round %d: %s", round, name), rs)
	}
	usage := meter.Stop()
	switches := testenv.ProcSwitches(m.Pid()) - sw0
	ops, terr := trace.Stop()
	inFlight := smp.finish()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if terr != nil {
		t.Fatalf("%v", terr)
	}
	if rs.files != int64(len(order)) {
		t.Fatalf("%s: read %d files, the order has %d", name, rs.files, len(order))
	}
	st, err := testenv.StatsErr(e.Bin, mp)
	if err != nil {
		t.Fatalf("%v", err)
	}
	logs := e.stopMount(m, dir)

	res := result{name: name, Pass: measure.Pass{Files: rs.files, Bytes: rs.bytes, Elapsed: el}, Usage: usage, stall: -1, logs: logs}
	notes := []string{fmt.Sprintf("%d readers", c.readers)}
	if declare {
		notes = append(notes, fmt.Sprintf("order declared (%.2fs, timed)", declTime.Seconds()))
	}
	if work > 0 {
		res.work = time.Duration(int64(len(order)) * int64(work) / int64(c.readers))
		res.stall = (el - res.work).Seconds() / el.Seconds()
		notes = append(notes, fmt.Sprintf("work %.2fms/sample: pure work %.2fs (slept %.2fs/reader), stall %.1f%%",
			float64(work)/1e6, res.work.Seconds(), rs.slept.Seconds()/float64(c.readers), 100*res.stall))
	}
	pc := percentiles(rs.lat, 50, 90, 99)
	notes = append(notes, fmt.Sprintf("read mean %.2fms p50 %.2f p90 %.2f p99 %.2f", rs.readTime.Seconds()*1e3/float64(rs.files), pc[0], pc[1], pc[2]))
	notes = append(notes, fmt.Sprintf("hits %d misses %d", st.Mount.Hits, st.Mount.Misses))
	nf := float64(len(order))
	notes = append(notes, fmt.Sprintf("per file: daemon %.0f µs CPU, %.1f switches; FUSE %s", usage.ProcCPU/nf*1e6, float64(switches)/nf, ops.PerFile(len(order))))
	notes = append(notes, fmt.Sprintf("reads over %v by tenth of the order %v", slowRead, rs.slowAt))
	for _, j := range st.Mount.Jobs {
		notes = append(notes, fmt.Sprintf("job %s: read %d/%d prefetched %d prefetch_hits %d stalls %d window %d",
			j.Name, j.Read, j.Declared, j.Prefetched, j.PrefetchHits, j.Stalls, j.Window))
	}
	if declare && len(st.Mount.Jobs) == 0 {
		notes = append(notes, "NO JOB in dsmount stats")
	}
	if inFlight != "" {
		notes = append(notes, inFlight)
	}
	res.note = strings.Join(notes, "; ")
	cli.Logf("round %d: %s: %.0f files/s in %.2fs, %d GETs", round, name, res.FilesPerSec(), el.Seconds(), usage.GETs)
	return res
}

// slowRead is a read that must have waited for a fetch: the store's
// added latency alone is 15 ms or more.
const slowRead = 10 * time.Millisecond

type readStats struct {
	files, bytes    int64
	readTime, slept time.Duration   // summed over readers
	lat             []time.Duration // every file's open-to-close time
	// slowAt counts reads over slowRead by the tenth of the order they
	// fall in: misses at the start of an epoch are the prefetcher getting
	// going, misses later are it falling behind.
	slowAt [10]int
	// slow lists the reads over slowRead (for --slow-log).
	slow []slowReadAt
}

// slowReadAt is one read over slowRead: when it started (from the start of
// the readers' epoch), its position in the order, how long it took.
type slowReadAt struct {
	at   time.Duration
	pos  int64
	took time.Duration
}

// printSlowReads lists rs's slow reads, in the order they started, for
// --slow-log.
func printSlowReads(name string, rs readStats) {
	slow := slices.SortedFunc(slices.Values(rs.slow), func(a, b slowReadAt) int { return cmp.Compare(a.at, b.at) })
	fmt.Fprintf(os.Stderr, "%s: %d reads over %v (started at ms: position in the order, ms taken)\n", name, len(slow), slowRead)
	const most = 300
	var b strings.Builder
	for i, s := range slow {
		if i == most {
			fmt.Fprintf(&b, "\n  ... %d more", len(slow)-most)
			break
		}
		if i%6 == 0 {
			b.WriteString("\n ")
		}
		fmt.Fprintf(&b, " %8.1f: %5d %6.1f", float64(s.at.Microseconds())/1000, s.pos, float64(s.took.Microseconds())/1000)
	}
	fmt.Fprintln(os.Stderr, b.String())
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// readEpoch reads root/<p> for every p of order with readers goroutines,
// each taking the next position from a shared index: open, read all, close,
// check size and CRC-32C against the source, then sleep work (compensated:
// a reader's total sleep is its samples times work). It stops at the first
// error and returns it.
func readEpoch(e *env, root string, order []string, readers int, work time.Duration) (readStats, error) {
	var each []*readStats // every reader's own, summed at the end
	epochStart := time.Now()
	err := testenv.Parallel(len(order), readers, func() func(int) error {
		my := &readStats{}
		each = append(each, my)
		var owed time.Duration
		buf := make([]byte, 1<<20)
		h := crc32.New(castagnoli)
		return func(i int) error {
			p := order[i]
			t0 := time.Now()
			h.Reset()
			n, err := readFile(filepath.Join(root, filepath.FromSlash(p)), buf, h)
			rt := time.Since(t0)
			my.readTime += rt
			my.lat = append(my.lat, rt)
			if rt > slowRead {
				my.slowAt[i*10/len(order)]++
				my.slow = append(my.slow, slowReadAt{at: t0.Sub(epochStart), pos: int64(i), took: rt})
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", p, err)
			}
			if n != e.sizes[p] {
				return fmt.Errorf("%s: read %d bytes, the source has %d", p, n, e.sizes[p])
			}
			if sum := h.Sum32(); sum != e.crcs[p] {
				return fmt.Errorf("%s: CRC-32C %08x, the source's is %08x", p, sum, e.crcs[p])
			}
			my.files++
			my.bytes += n
			if work > 0 {
				// The simulated training step, compensated: a reader
				// that overslept sleeps that much less next time.
				owed += work
				if d := owed - my.slept; d > 0 {
					s0 := time.Now()
					time.Sleep(d)
					my.slept += time.Since(s0)
				}
			}
			return nil
		}
	})
	var total readStats
	for _, my := range each {
		total.files += my.files
		total.bytes += my.bytes
		total.readTime += my.readTime
		total.slept += my.slept
		total.lat = append(total.lat, my.lat...)
		for i, n := range my.slowAt {
			total.slowAt[i] += n
		}
		total.slow = append(total.slow, my.slow...)
	}
	return total, err
}

// readFile reads name whole into w through buf: open, read until EOF, close.
func readFile(name string, buf []byte, w io.Writer) (int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, err
	}
	n, err := io.CopyBuffer(w, onlyReader{f}, buf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// onlyReader hides *os.File's WriterTo so io.CopyBuffer reads through buf.
type onlyReader struct{ io.Reader }
