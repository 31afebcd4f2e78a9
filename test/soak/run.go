package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// jobExpirySlack is how long past its --job-timeout an abandoned job may
// still be listed (the daemon looks every 250 ms; the reader's last read
// may come a little after the time recorded).
const jobExpirySlack = 10 * time.Second

// run sets up, runs the work loop with faults and sampling for
// cfg.duration, does the final pass and checks, and stops the daemon. The
// caller then closes pt and runs the leak checks.
func run(ctx context.Context, cfg config, pt *testenv.ProgramT, log *slog.Logger) *result {
	res := newResult(cfg)
	r, err := setUp(ctx, cfg, pt, log)
	if r != nil {
		res.base = r.base
	}
	if err != nil {
		res.fail("set-up: %v", err)
		return res
	}
	res.Dataset = datasetInfo{Files: len(r.paths), Bytes: r.dataBytes, CacheSize: r.cacheSize, FastPath: r.fastPath}
	res.ownPIDs = []int{r.minio.Pid(), r.tp.Pid()}

	led := newLedger()
	inj := newInjector(r, cfg, log)
	s := &soak{cfg: cfg, r: r, log: log, led: led, inj: inj, rng: rand.New(rand.NewPCG(cfg.seed, 0x50a7)),
		orderTmp: pt.TempDir(), done: map[string]int{}}
	res.Started = time.Now()
	sm := &sampler{r: r, led: led, inj: inj, start: res.Started}

	var wg sync.WaitGroup
	bg, stopBG := context.WithCancel(ctx)
	faultCtx, stopFaults := context.WithCancel(ctx)
	wg.Add(1)
	go func() { defer wg.Done(); sm.run(bg, cfg.sample) }()
	faultsDone := make(chan struct{})
	go func() { defer close(faultsDone); inj.run(faultCtx, cfg.faultInterval) }()

	log.Info("soak started", "duration", cfg.duration, "fault_interval", cfg.faultInterval, "faults", strings.Join(cfg.faults, ","))
	loopErr := s.loop(ctx, res.Started.Add(cfg.duration))
	stopFaults()
	<-faultsDone // every toxic lifted, the store up
	if err := inj.lifted(); err != nil {
		res.fail("faults not lifted at the end: %v", err)
	}
	if loopErr != nil {
		res.fail("%v", loopErr)
	} else if err := s.ensureMounted(ctx); err != nil {
		res.fail("final mount: %v", err)
	} else if err := s.verifiedPass(); err != nil {
		res.fail("final verified pass: %v", err)
	}
	res.Loop = time.Since(res.Started).Seconds()
	if res.Pass {
		s.checkJobsExpired(res)
	}
	sm.take()
	stopBG()
	wg.Wait()
	for _, p := range led.alive() {
		p.kill()
	}
	s.checkDaemonLog(res)
	if err := r.stop(); err != nil {
		res.fail("stopping: %v", err)
	}

	res.Samples = sm.all()
	res.Faults = inj.snapshot()
	res.Activities = s.done
	res.Abandoned = s.abandoned
	r.mu.Lock()
	res.ProxyRestarts = r.proxyRestarts
	res.ownPIDs = append(res.ownPIDs, r.tp.Pid())
	r.mu.Unlock()
	for _, d := range r.races {
		res.RemountRaces = append(res.RemountRaces, d.Seconds())
	}
	res.Reads = led.totals()
	res.Judgement = judge(led.snapshot(), res.Faults, time.Now())
	res.Daemon = daemonTotals(res.Samples)
	res.Growth = growthChecks(res.Samples, cfg.warmup, cfg.bounds)
	res.verdicts()
	return res
}

// checkJobsExpired wants every job abandoned more than --job-timeout ago
// gone from the daemon, and no other job left but those.
func (s *soak) checkJobsExpired(res *result) {
	st, err := testenv.StatsErr(s.r.bin, s.r.mp)
	if err != nil {
		res.fail("dsmount stats: %v", err)
		return
	}
	recent := map[string]bool{}
	for _, a := range s.abandoned {
		if time.Since(a.At) < s.cfg.jobTimeout+jobExpirySlack {
			recent[a.Job] = true
		}
	}
	var stale []string
	for _, m := range st.Mounts {
		for _, j := range m.Jobs {
			if !recent[j.Name] {
				stale = append(stale, fmt.Sprintf("%s (idle %.0fs)", j.Name, j.IdleSeconds))
			}
		}
	}
	res.check("abandoned jobs expire", len(stale) == 0,
		fmt.Sprintf("jobs listed at the end: %d that may still be within --job-timeout %v; stale: %v", len(recent), s.cfg.jobTimeout, stale))
}

// checkDaemonLog fails on anything the daemons wrote that is not a JSON
// log record (a panic, a runtime error) and counts the records by level.
func (s *soak) checkDaemonLog(res *result) {
	levels := map[string]int{}
	var odd []string
	for _, d := range s.r.allDaemons() {
		for _, line := range strings.Split(d.Stderr(), "\n") {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			var rec struct {
				Level string `json:"level"`
			}
			if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &rec) != nil {
				if len(odd) < 5 {
					odd = append(odd, line)
				}
				levels["non-JSON"]++
				continue
			}
			levels[rec.Level]++
		}
	}
	res.DaemonLog = levels
	res.check("daemon wrote only log records", len(odd) == 0, fmt.Sprintf("lines by level %v; first odd lines: %q", levels, odd))
}

// daemonFigures are the daemons' own counters, summed over their lives
// (each life's last sample: at least what it counted).
type daemonFigures struct {
	Lives          int   `json:"lives"`
	VerifyFailures int64 `json:"verify_failures"`
}

func daemonTotals(samples []sample) daemonFigures {
	last := map[int]sample{}
	for _, s := range samples {
		if s.Up {
			last[s.PID] = s
		}
	}
	var f daemonFigures
	for _, s := range last {
		f.Lives++
		f.VerifyFailures += s.VerifyFailures
	}
	return f
}
