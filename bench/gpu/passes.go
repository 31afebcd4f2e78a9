package gpu

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/dsmount/dsmount/bench/internal/benchenv"
	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/test/testenv"
)

// bench is one run: the images, the Python server, the mounts.
type bench struct {
	t          *testenv.ProgramT
	cfg        config
	repo, work string
	start      time.Time
	src        string   // the local images
	paths      []string // their paths under src
	drop       *dropper
	py         *server
	bin        string // dsmount, once needed
	cached     *mountInfo
	epochs     int // epoch numbers handed out: each pass reads its own order
	res        *results
}

// mountInfo is a dsmount mount of the images.
type mountInfo struct {
	dir, cacheDir string
	m             *testenv.Mount
}

// dsmountPasses are the passes that read through the warmed mount.
var dsmountPasses = []string{passDisk, passDeclared, passPageCache}

func (b *bench) has(p string) bool { return slices.Contains(b.cfg.passes, p) }

// sweep runs the ceiling, then per worker count the local and cached-mount
// passes (the local one first at even positions, last at odd ones, so
// neither always follows the other), then the minio passes.
func (b *bench) sweep() {
	if b.has(passCeiling) {
		b.ceiling()
	}
	mounted := slices.ContainsFunc(b.cfg.passes, func(p string) bool { return slices.Contains(dsmountPasses, p) })
	if mounted {
		if reason := b.mountCached(); reason != "" {
			for _, p := range dsmountPasses {
				if b.has(p) {
					b.skip(p, 0, reason)
				}
			}
			mounted = false
		}
	}
	for i, w := range b.cfg.workers {
		order := []string{passLocal, passDisk, passDeclared, passPageCache}
		if i%2 == 1 {
			order = []string{passDisk, passDeclared, passPageCache, passLocal}
		}
		for _, p := range order {
			if b.has(p) && (p == passLocal || mounted) {
				b.pass(p, w)
			}
		}
	}
	if b.has(passMinIO) {
		b.minio()
	}
	if b.cfg.check {
		b.checkEpoch()
	}
	if b.cached != nil {
		if err := b.cached.m.StopErr(); err != nil {
			cli.Logf("stopping the mount: %v", err)
		}
	}
}

// left says whether a pass of workers may start before the deadline: it
// needs about its window, its warm-up and a few seconds of start-up.
func (b *bench) left(workers int) bool {
	if b.cfg.deadline == 0 {
		return true
	}
	need := time.Duration((b.cfg.seconds+5)*float64(time.Second)) + time.Duration(workers)*200*time.Millisecond
	return time.Since(b.start)+need <= b.cfg.deadline
}

func (b *bench) skip(p string, workers int, reason string) {
	cli.Logf("%s, %d workers: skipped: %s", p, workers, reason)
	b.res.Skipped = append(b.res.Skipped, skipped{Pass: p, Workers: workers, Reason: reason})
	b.save()
}

func (b *bench) ceiling() {
	if !b.left(0) {
		b.skip(passCeiling, 0, "past --deadline")
		return
	}
	// Warm-up: cuDNN's autotuning of every layer's algorithms for this
	// shape, which the data passes then reuse.
	r, err := b.py.call(map[string]any{"op": "ceiling", "seconds": max(b.cfg.seconds, 1), "warmup": 10}, 10*time.Minute)
	row := passRow{Pass: passCeiling, Title: passTitle[passCeiling]}
	if err != nil {
		row.Error = err.Error()
	} else {
		row.Images, row.Seconds, row.Rate = r.Images, r.Seconds, r.Rate
	}
	b.record(row)
}

// mountCached mounts the local images with a fresh cache and fills it with
// `dsmount warm`; it returns why not, or "".
func (b *bench) mountCached() string {
	if !b.res.Probe.FuseOK {
		return b.res.Probe.FuseNote
	}
	m, reason := b.mountSource(b.src, "cached", nil, nil)
	if reason != "" {
		return reason
	}
	t0 := time.Now()
	// Not testenv.Warm: a failed warm skips the mount's passes, not the
	// local ones.
	res := testenv.RunCLI(b.bin, nil, 10*time.Minute, "warm", m.dir, "--json")
	var rep testenv.WarmReport
	if res.ExitCode != 0 {
		return fmt.Sprintf("dsmount warm: exit %d: %s", res.ExitCode, oneLine(res.Stderr))
	}
	if err := testenv.DecodeJSONObject(res.Stdout, &rep); err != nil {
		return fmt.Sprintf("dsmount warm --json: %v", err)
	}
	if rep.CacheFull || rep.ChunksNotCached > 0 {
		return fmt.Sprintf("dsmount warm left %d chunks uncached (cache full: %v): %s", rep.ChunksNotCached, rep.CacheFull, oneLine(res.Stderr))
	}
	b.res.WarmSeconds = time.Since(t0).Seconds()
	cli.Logf("mount %s: warmed %d files, %.1f MB, in %v", m.dir, rep.Files, float64(rep.Bytes)/1e6, cli.Since(t0))
	b.cached = m
	b.drop.add(m.cacheDir)
	b.drop.add(m.dir)
	return ""
}

// mountSource starts `dsmount mount SOURCE` on a new mountpoint with a
// fresh cache directory (big enough for every image); it returns why not,
// or "".
func (b *bench) mountSource(source, name string, env, args []string) (*mountInfo, string) {
	bin, err := b.dsmountBin()
	if err != nil {
		return nil, err.Error()
	}
	dir := filepath.Join(b.work, name)
	mi := &mountInfo{dir: filepath.Join(dir, "mnt"), cacheDir: filepath.Join(dir, "cache")}
	for _, d := range []string{mi.dir, mi.cacheDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			b.t.Fatalf("%v", err)
		}
	}
	size := fmt.Sprint(2*b.res.Bytes + 1<<30)
	mi.m, err = testenv.TryStartMount(b.t, testenv.MountConfig{Bin: bin, Source: source, Mountpoint: mi.dir, Env: env,
		Args: append([]string{"--cache-dir", mi.cacheDir, "--cache-size", size}, args...)})
	if err != nil {
		return nil, fmt.Sprintf("dsmount mount %s: %v", source, err)
	}
	return mi, ""
}

// pass runs pass p with workers: drops the page cache (or, for
// pagecache, reads every image through the mount first), then one
// command to the server.
func (b *bench) pass(p string, workers int) {
	if !b.left(workers) {
		b.skip(p, workers, "past --deadline")
		return
	}
	root := b.src
	if p != passLocal {
		root = b.cached.dir
	}
	row := passRow{Pass: p, Title: passTitle[p], Workers: workers}
	var err error
	if p == passPageCache {
		t0 := time.Now()
		err = testenv.ReadAllShuffled(root, b.paths, 16, int64(b.epochs), func(string, []byte) error { return nil })
		row.Note = fmt.Sprintf("every image read through the mount first (%v)", cli.Since(t0))
	} else {
		err = b.drop.drop()
	}
	if err != nil {
		row.Error = err.Error()
		b.record(row)
		return
	}
	row.Residency = residency(root, b.paths, 32)
	b.run(&row, root, p == passDeclared)
	b.record(row)
}

// run sends one pass over root to the server and fills row with its
// answer; for a mount, with what the daemon read from its source.
func (b *bench) run(row *passRow, root string, declare bool) {
	var st0 int64
	mounted := root != b.src
	if mounted {
		st0 = b.sourceBytes(root)
	}
	b.epochs++
	warmup := b.cfg.warmup
	if warmup < 0 {
		warmup = max(1, row.Workers)
	}
	r, err := b.py.call(map[string]any{"op": "pass", "root": root, "workers": row.Workers, "epoch": b.epochs, "declare": declare,
		"seconds": b.cfg.seconds, "warmup": warmup}, b.passTimeout())
	if err != nil {
		row.Error = err.Error()
		return
	}
	row.Images, row.Seconds, row.Rate, row.WaitShare, row.Batches, row.Warmup = r.Images, r.Seconds, r.Rate, r.WaitShare, r.Batches, r.Warmup
	row.Consumed, row.OrderOK = r.Consumed, r.OrderOK
	if !r.OrderOK {
		row.Error = "the staged batches' images are not the sampler's order"
	}
	if mounted {
		row.SourceBytes = b.sourceBytes(root) - st0
	}
}

// passTimeout bounds a pass's answer: a server that hangs (a DataLoader
// stuck) is killed rather than eating the deadline of everything after it.
func (b *bench) passTimeout() time.Duration {
	if b.cfg.seconds == 0 {
		return 30 * time.Minute // whole epochs: as long as the dataset takes
	}
	return 2*time.Minute + time.Duration(10*b.cfg.seconds*float64(time.Second))
}

// sourceBytes is what the mount at root has read from its source so far
// (-1 if unknown).
func (b *bench) sourceBytes(root string) int64 {
	s, err := testenv.StatsErr(b.bin, root)
	if err != nil {
		return -1
	}
	return s.Mount.BytesFromBackend
}

// minio runs, per --minio-workers, a cold declared pass on a fresh mount
// of the images in MinIO behind toxiproxy; with a local pass of the same
// workers first where the sweep had none.
func (b *bench) minio() {
	// Both must run here: a binary built elsewhere against a newer glibc
	// exits at once, and StartStore would end the whole run.
	for _, c := range [][]string{{testenv.MinIOBinary(), "--version"}, {testenv.ToxiproxyBinary(), "-version"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, c[0], c[1]).CombinedOutput()
		cancel()
		if err != nil {
			b.skip(passMinIO, 0, fmt.Sprintf("%s %s: %v: %s (set DSMOUNT_MINIO and DSMOUNT_TOXIPROXY)", c[0], c[1], err, oneLine(string(out))))
			return
		}
	}
	if !b.res.Probe.FuseOK {
		b.skip(passMinIO, 0, b.res.Probe.FuseNote)
		return
	}
	if !b.left(b.cfg.minioWorkers[0] + 100) { // the upload: some 15 s
		b.skip(passMinIO, 0, "past --deadline")
		return
	}
	t0 := time.Now()
	store := benchenv.StartStore(b.t, "bench", false)
	store.Upload(b.t, "bench", "imagenet", b.src, 64)
	proxy := store.AddProxy("minio", b.cfg.Proxy)
	cli.Logf("minio: %d images uploaded, MinIO behind toxiproxy (+%d ms ± %d), in %v", len(b.paths), b.cfg.Latency, b.cfg.Jitter, cli.Since(t0))
	for i, w := range b.cfg.minioWorkers {
		if !slices.Contains(b.cfg.workers, w) || !b.has(passLocal) {
			b.pass(passLocal, w)
		}
		if !b.left(w) {
			b.skip(passMinIO, w, "past --deadline")
			continue
		}
		m, reason := b.mountSource("s3://bench/imagenet", fmt.Sprintf("minio%d", i), store.MinIO.Env(),
			[]string{"--s3-endpoint", "http://" + proxy, "--s3-path-style"})
		if reason != "" {
			b.skip(passMinIO, w, reason)
			continue
		}
		row := passRow{Pass: passMinIO, Title: fmt.Sprintf("%s (+%d ms)", passTitle[passMinIO], b.cfg.Latency), Workers: w}
		if err := b.drop.drop(); err != nil {
			row.Error = err.Error()
		} else {
			b.run(&row, m.dir, true)
		}
		b.record(row)
		if err := m.m.StopErr(); err != nil {
			cli.Logf("stopping the minio mount: %v", err)
		}
	}
}

// checkEpoch runs one whole declared epoch on the cached mount with 2
// workers and keeps the staged order beside the sampler's in the results.
func (b *bench) checkEpoch() {
	if b.cached == nil {
		b.skip("check", 2, "no cached mount")
		return
	}
	b.epochs++
	r, err := b.py.call(map[string]any{"op": "pass", "root": b.cached.dir, "workers": 2, "epoch": b.epochs, "declare": true,
		"seconds": 0, "warmup": 0, "orders": true}, 10*time.Minute)
	if err != nil {
		b.t.Fatalf("check epoch: %v", err)
	}
	b.res.Check = &checkResult{Dataset: r.Dataset, Consumed: r.Consumed, OrderOK: r.OrderOK, Staged: r.Staged, Sampler: r.Sampler}
	cli.Logf("check epoch: %d of %d images staged, in the sampler's order: %v", r.Consumed, r.Dataset, r.OrderOK)
	b.save()
}
