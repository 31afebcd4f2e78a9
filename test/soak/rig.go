package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

const (
	bucket = "soak"
	prefix = "data"
	proxy  = "s3" // the toxiproxy proxy in front of MinIO
)

// rig is what the soak runs on: the dataset and its checksums, MinIO
// behind toxiproxy, and the dsmount daemon with one mount. The daemon is
// replaced after a kill -9; mu guards it.
type rig struct {
	log  *slog.Logger
	pt   testenv.T
	base string // every file of the run is under it
	bin  string // dsmount
	self string // this program, run as the readers

	paths     []string // the dataset, '/'-separated, relative
	sizes     map[string]int64
	sumsFile  string // "SIZE CRC32C PATH" lines, for the readers
	dataBytes int64
	cacheSize int64

	minio       *testenv.MinIO
	tp          *testenv.Toxiproxy // replaced when it wedges (proxyctl.go); mu
	proxyAddr   string             // the proxy's address, 127.0.0.1:PORT
	upstream    string             // MinIO's address, behind the proxy
	endpoint    string             // http://proxyAddr
	cacheDir    string
	mp          string
	metricsAddr string
	jobTimeout  time.Duration

	fastPath string // the mount's, from dsmount stats
	// races are the waits of remounts the daemon refused at first
	// because it still held the mountpoint (see mount).
	races []time.Duration

	mu      sync.Mutex
	daemon  *testenv.Daemon
	daemons []*testenv.Daemon // every one started
	gen     int               // how many daemons have been started
	// proxyRestarts counts toxiproxy servers replaced (proxyctl.go).
	proxyRestarts int
}

// setUp makes the dataset, starts MinIO and toxiproxy, uploads the
// dataset, starts the daemon and mounts.
func setUp(ctx context.Context, cfg config, pt *testenv.ProgramT, log *slog.Logger) (*rig, error) {
	r := &rig{log: log, pt: pt, jobTimeout: cfg.jobTimeout}
	r.cacheDir, r.mp = pt.TempDir(), pt.TempDir()
	r.base = filepath.Dir(r.cacheDir)
	var err error
	if r.self, err = os.Executable(); err != nil {
		return nil, err
	}
	if r.bin = os.Getenv("DSMOUNT_BIN"); r.bin == "" {
		t0 := time.Now()
		if r.bin, err = testenv.BuildDsmount(pt.TempDir()); err != nil {
			return nil, err
		}
		log.Info("built dsmount", "bin", r.bin, "took", time.Since(t0).Round(time.Millisecond))
	}

	src := pt.TempDir()
	spec := testenv.DatasetSpec{Seed: cfg.seed, SmallFiles: cfg.files, SmallMin: 40_000, SmallMax: 160_000,
		FilesPerDir: 200, MaxDepth: 3, OddNames: true}
	for i := range cfg.largeFiles {
		// 2-12 MB, not chunk multiples: several 4 MiB chunks each.
		spec.LargeFiles = append(spec.LargeFiles, int64(2_000_000+(i*7_919_113)%10_000_000))
	}
	t0 := time.Now()
	if r.paths, err = testenv.GenerateDatasetErr(src, spec); err != nil {
		return nil, fmt.Errorf("generating the dataset: %w", err)
	}
	if err := r.writeSums(src); err != nil {
		return nil, err
	}
	r.cacheSize = int64(float64(r.dataBytes) * cfg.cacheFrac)
	log.Info("dataset", "files", len(r.paths), "MB", r.dataBytes/1e6, "cache_size_MB", r.cacheSize/1e6, "took", time.Since(t0).Round(time.Millisecond))

	r.minio = testenv.StartMinIO(pt)
	r.minio.CreateBucket(bucket)
	t0 = time.Now()
	if err := r.minio.UploadDirErr(ctx, bucket, prefix, src, 16); err != nil {
		return nil, fmt.Errorf("uploading the dataset: %w", err)
	}
	log.Info("uploaded", "took", time.Since(t0).Round(time.Millisecond))
	if err := os.RemoveAll(src); err != nil { // the checksums are all the readers need
		return nil, err
	}
	r.tp = testenv.StartToxiproxy(pt)
	r.upstream = r.minio.Addr()
	r.proxyAddr = r.tp.AddProxy(proxy, r.upstream)
	r.endpoint = "http://" + r.proxyAddr
	ports, err := testenv.FreePorts(1)
	if err != nil {
		return nil, err
	}
	r.metricsAddr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	if err := r.startDaemon(); err != nil {
		return nil, err
	}
	if err := r.mount(); err != nil {
		return nil, err
	}
	return r, nil
}

// writeSums writes every file's size and CRC-32C, read from the source,
// to r.sumsFile.
func (r *rig) writeSums(src string) error {
	sizes, crcs, err := testenv.Checksums(src, r.paths, 4)
	if err != nil {
		return fmt.Errorf("checksums of the dataset: %w", err)
	}
	r.sizes = sizes
	var b strings.Builder
	for _, p := range r.paths {
		if strings.ContainsAny(p, "\n\r") {
			return fmt.Errorf("dataset path %q has a line break", p)
		}
		fmt.Fprintf(&b, "%d %08x %s\n", sizes[p], crcs[p], p)
		r.dataBytes += sizes[p]
	}
	r.sumsFile = filepath.Join(r.pt.TempDir(), "sums")
	return os.WriteFile(r.sumsFile, []byte(b.String()), 0o644)
}

// startDaemon starts a `dsmount daemon` on the cache dir.
func (r *rig) startDaemon() error {
	d, err := testenv.TryStartDaemon(r.pt, testenv.DaemonConfig{
		Bin: r.bin,
		Args: []string{"--cache-dir", r.cacheDir, "--cache-size", fmt.Sprint(r.cacheSize),
			"--job-timeout", r.jobTimeout.String(), "--metrics-addr", r.metricsAddr},
		Env: r.minio.Env(),
	})
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.daemon = d
	r.daemons = append(r.daemons, d)
	r.gen++
	gen := r.gen
	r.mu.Unlock()
	r.log.Info("daemon started", "pid", d.Pid(), "generation", gen)
	return nil
}

// current is the daemon now (perhaps dead) and its generation.
func (r *rig) current() (*testenv.Daemon, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.daemon, r.gen
}

// allDaemons lists every daemon started, the dead ones too.
func (r *rig) allDaemons() []*testenv.Daemon {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*testenv.Daemon(nil), r.daemons...)
}

// alive reports whether the current daemon runs.
func (r *rig) alive() bool {
	d, _ := r.current()
	return d != nil && !d.Exited()
}

// kill SIGKILLs the current daemon and returns its pid, or fails if it is
// not running.
func (r *rig) kill() (int, error) {
	d, _ := r.current()
	if d == nil || d.Exited() {
		return 0, errors.New("the daemon is not running")
	}
	d.Kill()
	return d.Pid(), nil
}

// mount joins the mount to the daemon. Right after an unmount the daemon
// may still hold the old mount (it forgets it only once the mount's
// fetches in flight have ended) and refuse the mountpoint as "already
// mounted by this daemon": mount then tries again until it is let in, and
// counts the wait (r.races).
func (r *rig) mount() error {
	join := func() error {
		_, err := testenv.TryJoinMount(r.pt, r.bin, nil, "s3://"+bucket+"/"+prefix, r.mp, 2*time.Minute,
			"--cache-dir", r.cacheDir, "--s3-endpoint", r.endpoint, "--s3-path-style")
		return err
	}
	err := join()
	if err != nil && strings.Contains(err.Error(), "already mounted by this daemon") {
		start := time.Now()
		err = testenv.WaitFor(2*time.Minute, 100*time.Millisecond, "the daemon letting the mountpoint in again", func() (bool, error) {
			err := join()
			if err != nil && strings.Contains(err.Error(), "already mounted by this daemon") {
				return false, nil
			}
			return err == nil, err
		})
		r.races = append(r.races, time.Since(start))
		r.log.Warn("remount refused as already mounted after the unmount", "waited", time.Since(start).Round(time.Millisecond), "err", err)
	}
	if err == nil && r.fastPath == "" {
		st, err := testenv.StatsErr(r.bin, r.mp)
		if err != nil {
			return err
		}
		r.fastPath = st.Mount.FastPath
		r.log.Info("mounted", "fast_path", r.fastPath)
	}
	return err
}

// unmount runs `dsmount unmount` and wants the mount gone.
func (r *rig) unmount() error {
	res := testenv.RunCLI(r.bin, nil, time.Minute, "unmount", r.mp)
	if res.ExitCode != 0 {
		return fmt.Errorf("dsmount unmount: exit %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	if ok, _ := testenv.IsMounted(r.mp); ok {
		return errors.New("dsmount unmount exited 0 but the mount is still there")
	}
	return nil
}

// mountsLeft lists the mounts under the run's directory other than the
// one mountpoint.
func (r *rig) mountsLeft() ([]string, error) {
	mps, err := testenv.MountPointsUnder(r.base)
	if err != nil {
		return nil, err
	}
	var extra []string
	for _, mp := range mps {
		if mp != r.mp {
			extra = append(extra, mp)
		}
	}
	return extra, nil
}

// stop unmounts and stops the daemon with SIGTERM (it must exit 0).
func (r *rig) stop() error {
	var errs []error
	if r.alive() {
		if ok, _ := testenv.IsMounted(r.mp); ok {
			if err := r.unmount(); err != nil {
				errs = append(errs, err)
			}
		}
		d, _ := r.current()
		if err := d.StopErr(); err != nil {
			errs = append(errs, fmt.Errorf("stopping the daemon: %w", err))
		}
	}
	if err := testenv.LazyUnmount(r.mp); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
