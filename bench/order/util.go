package order

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/dsmount/dsmount/bench/internal/measure"
	"github.com/dsmount/dsmount/test/testenv"
)

// result is one pass.
type result struct {
	name string
	measure.Pass
	measure.Usage
	stall float64 // stall passes: (epoch - work) / epoch; else -1
	work  time.Duration
	note  string
	logs  []string // the daemon's WARN/ERROR (and non-JSON) stderr lines
}

// sampler scrapes a daemon's dsmount_backend_fetches_in_flight every interval while
// a pass runs: how many backend fetches the daemon actually keeps going.
type sampler struct {
	stop, done chan struct{}
	n          int
	sum, max   float64
	errs       int
}

// startSampler starts scraping url (nil sampler when url is "").
func startSampler(url string, every time.Duration) *sampler {
	if url == "" || every <= 0 {
		return nil
	}
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			_, samples, err := testenv.ScrapeMetrics(url)
			v, k := testenv.PromFind(samples, "dsmount_backend_fetches_in_flight")
			if err != nil || k != 1 {
				s.errs++
				continue
			}
			s.n++
			s.sum += v
			s.max = max(s.max, v)
		}
	}()
	return s
}

// finish stops the sampler and describes what it saw ("" for nil).
func (s *sampler) finish() string {
	if s == nil {
		return ""
	}
	close(s.stop)
	<-s.done
	if s.n == 0 {
		return fmt.Sprintf("fetches in flight: no samples (%d scrape errors)", s.errs)
	}
	return fmt.Sprintf("fetches in flight: mean %.1f max %.0f (%d samples)", s.sum/float64(s.n), s.max, s.n)
}

// startMount mounts source on dir/mnt with a fresh cache dir/cache through
// endpoint; with --sample-every it also serves the daemon's metrics and
// returns their URL; with --cpuprofile-dir the daemon writes a CPU profile
// there (DSMOUNT_CPUPROFILE), named after dir.
func (e *env) startMount(dir, source, endpoint string) (*testenv.Mount, string) {
	mp, cacheDir := filepath.Join(dir, "mnt"), filepath.Join(dir, "cache")
	os.MkdirAll(mp, 0o755)
	os.MkdirAll(cacheDir, 0o755)
	args := []string{"--cache-dir", cacheDir, "--cache-size", e.cfg.cacheSize, "--chunk-size", e.cfg.chunkSize,
		"--s3-endpoint", endpoint, "--s3-path-style"}
	if e.cfg.prefetchPar > 0 {
		args = append(args, "--prefetch-parallel", fmt.Sprint(e.cfg.prefetchPar))
	}
	url := ""
	if e.cfg.sampleEvery > 0 {
		ports, err := testenv.FreePorts(1)
		if err != nil {
			e.T.Fatalf("%v", err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
		args = append(args, "--metrics-addr", addr)
		url = "http://" + addr + "/metrics"
	}
	args = append(args, e.cfg.mountArgs...)
	extraEnv := append([]string(nil), e.cfg.daemonEnv...)
	if e.cfg.profileDir != "" {
		extraEnv = append(extraEnv, "DSMOUNT_CPUPROFILE="+filepath.Join(e.cfg.profileDir, filepath.Base(dir)+".pprof"))
	}
	m := testenv.StartMount(e.T, testenv.MountConfig{Bin: e.Bin, Source: source, Mountpoint: mp, Env: e.Store.MinIO.Env(extraEnv...), Args: args})
	return m, url
}

// checkThroughMount re-reads rel through the mount at mp (untimed) and
// fails unless its CRC-32C is crc, the source's.
func (e *env) checkThroughMount(mp, rel string, crc uint32) {
	_, sum, err := testenv.CRCFile(filepath.Join(mp, filepath.FromSlash(rel)))
	if err != nil {
		e.T.Fatalf("re-reading %s through the mount: %v", rel, err)
	}
	if sum != crc {
		e.T.Fatalf("%s through the mount: CRC-32C %08x, the source's is %08x", rel, sum, crc)
	}
}

// stopMount unmounts m and returns the daemon's problem log lines. dir is
// kept, not deleted, until the program ends (see SettleKeeping).
func (e *env) stopMount(m *testenv.Mount, dir string) []string {
	logs := m.ProblemLogs()
	m.Stop()
	if err := testenv.SettleKeeping(dir); err != nil {
		e.T.Fatalf("settle %s: %v", dir, err)
	}
	return logs
}

// percentiles returns the p-th percentiles of d (sorted in place), in ms.
func percentiles(d []time.Duration, ps ...float64) []float64 {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	out := make([]float64, len(ps))
	if len(d) == 0 {
		return out
	}
	for i, p := range ps {
		k := min(len(d)-1, int(p/100*float64(len(d))))
		out[i] = float64(d[k]) / 1e6
	}
	return out
}
