package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// activityTimeout bounds one activity (an epoch, a warm, a churn round):
// past it the soak fails, something is stuck.
const activityTimeout = 5 * time.Minute

// soak is the work loop's state.
type soak struct {
	cfg      config
	r        *rig
	log      *slog.Logger
	led      *ledger
	inj      *injector
	rng      *rand.Rand
	orderTmp string // the readers' order files

	cycle     int
	done      map[string]int // activities completed, by name
	abandoned []abandoned    // jobs left to expire
}

// abandoned is a job nobody ended: its reader exited or was killed at At.
type abandoned struct {
	Job string    `json:"job"`
	At  time.Time `json:"at"`
	How string    `json:"how"`
}

// loop runs the activities in turn until deadline, restarting the daemon
// and remounting whenever it is found dead or unmounted. It returns an
// error only when the soak can't go on.
func (s *soak) loop(ctx context.Context, deadline time.Time) error {
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{{"epoch", s.epoch}, {"warm", s.warm}, {"churn", s.churn}, {"epoch", s.epoch}, {"remount", s.remount}}
	for i := 0; time.Now().Before(deadline); {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.ensureMounted(ctx); err != nil {
			return err
		}
		st := steps[i%len(steps)]
		i++
		if err := st.fn(ctx); err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
		s.done[st.name]++
	}
	return nil
}

// ensureMounted restarts a dead daemon and mounts again if the mount is
// gone; after a restart it runs a verified pass over every file.
func (s *soak) ensureMounted(ctx context.Context) error {
	restarted := false
	if !s.r.alive() {
		if err := testenv.LazyUnmount(s.r.mp); err != nil {
			return err
		}
		var err error
		for attempt := 0; attempt < 3; attempt++ {
			start := time.Now()
			if err = s.r.startDaemon(); err == nil {
				break
			}
			s.led.opError("daemon start", start, err)
		}
		if err != nil {
			return fmt.Errorf("restarting the daemon: %w", err)
		}
		restarted = true
		s.done["restart"]++
	}
	if ok, _ := testenv.IsMounted(s.r.mp); !ok || restarted {
		// A store fault may be on (a mount of a known source lists nothing,
		// but it may check the bucket): try for a while.
		giveUp := time.Now().Add(2 * time.Minute)
		for {
			start := time.Now()
			err := s.r.mount()
			if err == nil {
				break
			}
			s.led.opError("mount", start, err)
			if time.Now().After(giveUp) || ctx.Err() != nil {
				return fmt.Errorf("mounting: %w", err)
			}
			if !s.r.alive() {
				return s.ensureMounted(ctx)
			}
			sleepCtx(ctx, 2*time.Second)
		}
	}
	s.inj.endKill()
	if restarted {
		return s.verifiedPass()
	}
	return nil
}

// verifiedPass reads every file once, with every reader, undeclared.
func (s *soak) verifiedPass() error {
	p, err := startReader(s.r.self, s.readerFlags("pass", 1, 1, false, false), s.led)
	if err != nil {
		return err
	}
	if _, err := p.wait(activityTimeout); err != nil {
		return err
	}
	s.done["verified pass"]++
	return nil
}

func (s *soak) readerFlags(job string, epochs int, frac float64, declare, end bool) readerFlags {
	return readerFlags{mp: s.r.mp, bin: s.r.bin, sums: s.r.sumsFile, job: job, tmp: s.orderTmp,
		epochs: epochs, epoch0: 2 * s.cycle, workers: s.cfg.workers * s.cfg.jobs, seed: s.rng.Uint64(), frac: frac,
		declare: declare, end: end}
}

// epoch runs --jobs declared jobs over the whole dataset, two epochs
// each, their orders declared with the next, ended when done.
func (s *soak) epoch(ctx context.Context) error {
	s.cycle++
	var procs []*readerProc
	for j := range s.cfg.jobs {
		f := s.readerFlags(fmt.Sprintf("train-%d", j), 2, 1, true, true)
		f.workers = s.cfg.workers
		p, err := startReader(s.r.self, f, s.led)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	return waitAll(procs)
}

func waitAll(procs []*readerProc) error {
	var first error
	for _, p := range procs {
		if _, err := p.wait(activityTimeout); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// warm runs `dsmount warm` over one top-level directory and large/.
func (s *soak) warm(ctx context.Context) error {
	tops := map[string]bool{}
	for _, p := range s.r.paths {
		if i := strings.IndexByte(p, '/'); i > 0 {
			tops[p[:i]] = true
		}
	}
	var dirs []string
	for d := range tops {
		if d != "large" {
			dirs = append(dirs, d)
		}
	}
	sort.Strings(dirs)
	args := []string{"warm", "--json", filepath.Join(s.r.mp, "large")}
	if len(dirs) > 0 {
		args = append(args, filepath.Join(s.r.mp, dirs[s.rng.IntN(len(dirs))]))
	}
	start := time.Now()
	res := testenv.RunCLI(s.r.bin, nil, activityTimeout, args...)
	if res.TimedOut {
		return fmt.Errorf("dsmount warm ran over %v", activityTimeout)
	}
	if res.ExitCode != 0 {
		s.led.opError("warm", start, fmt.Errorf("dsmount %s: exit %d: %s", strings.Join(args, " "), res.ExitCode, lastLine(res.Stderr)))
		return nil
	}
	var rep testenv.WarmReport
	if err := testenv.DecodeJSONObject(res.Stdout, &rep); err != nil {
		return err
	}
	s.log.Info("warm", "dirs", args[2:], "files", rep.Files, "chunks_fetched", rep.ChunksFetched,
		"already_cached", rep.ChunksAlreadyCached, "not_cached", rep.ChunksNotCached, "took", res.Duration.Round(time.Millisecond))
	return nil
}

// churn declares three short jobs over a quarter of the dataset each: one
// ends its job when done, one leaves it to expire, and one is killed (-9)
// a third of the way through its epoch.
func (s *soak) churn(ctx context.Context) error {
	s.cycle++
	name := func(what string) string { return fmt.Sprintf("churn-%d-%s", s.cycle, what) }
	var procs []*readerProc
	for _, kind := range []string{"ended", "left", "killed"} {
		f := s.readerFlags(name(kind), 1, 0.25, true, kind == "ended")
		f.workers = s.cfg.workers
		p, err := startReader(s.r.self, f, s.led)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	victim := procs[2]
	third := int64(len(s.r.paths) / 4 / 3)
	err := testenv.WaitFor(activityTimeout, 20*time.Millisecond, "the churn job's reader a third through", func() (bool, error) {
		return victim.files.Load() >= third || isDone(victim), nil
	})
	if err != nil {
		return err
	}
	how := "killed (-9) mid-epoch"
	if isDone(victim) {
		how = "exited before the kill"
	} else {
		victim.kill()
	}
	s.abandoned = append(s.abandoned, abandoned{Job: victim.job, At: time.Now(), How: how})
	if err := waitAll(procs[:2]); err != nil {
		return err
	}
	s.abandoned = append(s.abandoned, abandoned{Job: procs[1].job, At: time.Now(), How: "its reader exited without ending it"})
	return nil
}

func isDone(p *readerProc) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// remount unmounts and mounts again; nothing of the old mount may stay.
func (s *soak) remount(ctx context.Context) error {
	start := time.Now()
	if err := s.r.unmount(); err != nil {
		s.led.opError("unmount", start, err)
		return nil
	}
	if extra, err := testenv.MountPointsUnder(s.r.base); err != nil || len(extra) > 0 {
		return fmt.Errorf("after the unmount, mounts under the run's directory: %v (%v)", extra, err)
	}
	start = time.Now()
	if err := s.r.mount(); err != nil {
		s.led.opError("mount", start, err)
		return nil
	}
	if extra, err := s.r.mountsLeft(); err != nil || len(extra) > 0 {
		return fmt.Errorf("after the remount, other mounts under the run's directory: %v (%v)", extra, err)
	}
	return nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
