package pipeline

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/test/testenv"
)

// The systems the pipeline reads the images through, by their names in
// the tables.
const (
	sysLocal      = "local"
	sysDeclared   = "dsmount, declared"
	sysUndeclared = "dsmount, not declared"
	sysRclone     = "rclone, full VFS cache"
	sysS3fs       = "s3fs, with its cache"
)

// systemFlags are --systems' names for the systems, in the tables' order.
var systemFlags = []struct{ flag, name string }{
	{"local", sysLocal},
	{"declared", sysDeclared},
	{"undeclared", sysUndeclared},
	{"rclone", sysRclone},
	{"s3fs", sysS3fs},
}

// inSeries says whether sys runs the half-cache epoch series.
func inSeries(sys string) bool { return sys == sysDeclared || sys == sysUndeclared || sys == sysRclone }

// bench is what every run shares: the images, the store behind its proxy
// and the dsmount binary.
type bench struct {
	t          *testenv.ProgramT
	cfg        config
	repo, work string
	src        string // the local copy of the images
	images     int64  // how many
	bytes      int64  // their bytes
	bin        string // dsmount
	mc         *testenv.MinIO
	proxy      string // host:port of toxiproxy's listener in front of MinIO
	runs       int    // mounts and cgroups made so far, for their names
	// The pipeline's own memory peaks (need), once measured.
	needAnon, needMapped int64
	needDone             bool
}

// mount is one system's tree of the images, and how to take it down.
type mount struct {
	sys, dir string
	pid      int              // the FUSE daemon (0 for the local copy)
	stop     func() error     // unmount and wait for the daemon to exit
	stats    func() *dsmStats // dsmount's own counters, nil for the others
	note     func() string    // nil, or a line about the daemon's cache
}

// dsmStats are the counters of `dsmount stats` the series reads.
type dsmStats struct{ fromCache, fromBackend int64 }

// mount brings sys up over the images on a fresh, empty cache directory
// of cacheBytes (0: big enough for everything).
func (b *bench) mount(sys string, cacheBytes int64) *mount {
	if sys == sysLocal {
		return &mount{sys: sys, dir: b.src, stop: func() error { return nil }}
	}
	b.runs++
	dir := filepath.Join(b.work, fmt.Sprintf("run%02d", b.runs))
	mp, cacheDir := filepath.Join(dir, "mnt"), filepath.Join(dir, "cache")
	for _, d := range []string{mp, cacheDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			b.t.Fatalf("%v", err)
		}
	}
	var m *mount
	switch sys {
	case sysDeclared, sysUndeclared:
		m = b.mountDsmount(mp, cacheDir, cacheBytes)
	case sysRclone:
		m = b.mountRclone(dir, mp, cacheDir, cacheBytes)
	case sysS3fs:
		if cacheBytes > 0 {
			b.t.Fatalf("s3fs has no cache size bound to run the half-cache series with")
		}
		m = b.mountS3fs(dir, mp, cacheDir)
	default:
		b.t.Fatalf("unknown system %q", sys)
	}
	m.sys = sys
	return m
}

// mountDsmount is `dsmount mount s3://bench/caltech MP --cache-dir DIR
// --cache-size BYTES --s3-endpoint http://PROXY --s3-path-style`.
func (b *bench) mountDsmount(mp, cacheDir string, cacheBytes int64) *mount {
	size := "20G"
	if cacheBytes > 0 {
		size = fmt.Sprint(cacheBytes)
	}
	dm := testenv.StartMount(b.t, testenv.MountConfig{Bin: b.bin, Source: "s3://bench/caltech", Mountpoint: mp, Env: b.mc.Env(),
		Args: []string{"--cache-dir", cacheDir, "--cache-size", size, "--s3-endpoint", "http://" + b.proxy, "--s3-path-style"}})
	return &mount{dir: mp, pid: dm.Pid(), stop: dm.StopErr,
		stats: func() *dsmStats {
			s, err := testenv.StatsErr(b.bin, mp)
			if err != nil {
				cli.Logf("dsmount stats: %v", err)
				return nil
			}
			return &dsmStats{fromCache: s.Mount.BytesFromCache, fromBackend: s.Mount.BytesFromBackend}
		}}
}

// rcloneConf is the remote "bench": MinIO through the proxy. The
// credentials are in a file of this run's temporary directory, mode 0600,
// not on a command line.
func (b *bench) rcloneConf(dir string) string {
	user, pass := b.mc.Creds()
	conf := filepath.Join(dir, "rclone.conf")
	body := fmt.Sprintf("[bench]\ntype = s3\nprovider = Minio\nenv_auth = false\naccess_key_id = %s\nsecret_access_key = %s\nregion = %s\nendpoint = http://%s\nforce_path_style = true\n",
		user, pass, testenv.MinIORegion, b.proxy)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		b.t.Fatalf("%v", err)
	}
	return conf
}

// rcloneArgs is the rclone mount command line (after "rclone"). With
// cacheBytes > 0 the VFS cache is bounded and checked every second (the
// default, a minute, would let it grow past the bound for a whole epoch).
//
// --vfs-fast-fingerprint and --use-server-modtime are rclone's documented
// flags for S3: without them every open asks S3 for the object's
// modification time (a HEAD, +latency) to validate the cached copy.
// --dir-cache-time 1h keeps the listing for the whole run, as dsmount
// keeps its.
func rcloneArgs(conf, mp, cacheDir string, cacheBytes int64) []string {
	args := []string{"mount", "bench:bench/caltech", mp, "--config", conf, "--cache-dir", cacheDir,
		"--vfs-cache-mode", "full", "--read-only", "--dir-cache-time", "1h",
		"--vfs-fast-fingerprint", "--use-server-modtime", "--log-level", "NOTICE"}
	if cacheBytes > 0 {
		// rclone reads a bare number as KiB; "B" makes it bytes.
		args = append(args, "--vfs-cache-max-size", fmt.Sprintf("%dB", cacheBytes), "--vfs-cache-poll-interval", "1s")
	}
	return args
}

func (b *bench) mountRclone(dir, mp, cacheDir string, cacheBytes int64) *mount {
	args := rcloneArgs(b.rcloneConf(dir), mp, cacheDir, cacheBytes)
	p, err := testenv.StartFuseProc(b.t, "rclone mount", mp, time.Minute, "rclone", args, toolEnv())
	if err != nil {
		b.t.Fatalf("%v", err)
	}
	return &mount{dir: mp, pid: p.Pid(), stop: p.Stop, note: func() string { return cacheNote(cacheDir) }}
}

// s3fsArgs is the s3fs command line: in the foreground (-f), read-only,
// with its cache of whole objects in cacheDir.
func s3fsArgs(passwd, proxy, mp, cacheDir string) []string {
	return []string{"bench:/caltech", mp, "-f", "-o", strings.Join([]string{
		"url=http://" + proxy, "use_path_request_style", "endpoint=" + testenv.MinIORegion,
		"passwd_file=" + passwd, "use_cache=" + cacheDir, "ro"}, ",")}
}

func (b *bench) mountS3fs(dir, mp, cacheDir string) *mount {
	user, pass := b.mc.Creds()
	passwd := filepath.Join(dir, "s3fs.passwd")
	if err := os.WriteFile(passwd, []byte(user+":"+pass+"\n"), 0o600); err != nil {
		b.t.Fatalf("%v", err)
	}
	p, err := testenv.StartFuseProc(b.t, "s3fs", mp, time.Minute, "s3fs", s3fsArgs(passwd, b.proxy, mp, cacheDir), toolEnv())
	if err != nil {
		b.t.Fatalf("%v", err)
	}
	return &mount{dir: mp, pid: p.Pid(), stop: p.Stop, note: func() string { return cacheNote(cacheDir) }}
}

// toolEnv is the environment of rclone and s3fs: this one without AWS_*
// and RCLONE_* variables, so that only their configuration here speaks
// (rclone's AWS SDK refuses AWS_CA_BUNDLE with its own HTTP transport, and
// plain http needs no CA).
func toolEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "RCLONE_") {
			env = append(env, kv)
		}
	}
	return env
}

// cacheNote says how many bytes of files a cache directory holds.
func cacheNote(dir string) string {
	var n, files int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n += info.Size()
			files++
		}
		return nil
	})
	return fmt.Sprintf("cache dir holds %d files, %.1f MB", files, float64(n)/1e6)
}

// cpusOf is the CPUs pid may run on, as /proc/PID/status lists them.
func cpusOf(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// ensureTools installs, with apt-get, the Debian packages that the chosen
// systems and outputs need and this machine lacks: Python's torch,
// torchvision and Pillow always, rclone and s3fs for their systems,
// matplotlib for the plot.
func ensureTools(cfg config) error {
	var pkgs []string
	if exec.Command(python, "-c", "import torch, torchvision, PIL").Run() != nil {
		pkgs = append(pkgs, "python3-torch", "python3-torchvision", "python3-pil")
	}
	for _, s := range cfg.systems {
		for _, tool := range []struct{ sys, bin string }{{sysRclone, "rclone"}, {sysS3fs, "s3fs"}} {
			if s == tool.sys {
				if _, err := exec.LookPath(tool.bin); err != nil {
					pkgs = append(pkgs, tool.bin)
				}
			}
		}
	}
	if cfg.plot != "" && exec.Command(python, "-c", "import matplotlib").Run() != nil {
		pkgs = append(pkgs, "python3-matplotlib")
	}
	if len(pkgs) == 0 {
		return nil
	}
	cli.Logf("installing %s with apt-get", strings.Join(pkgs, ", "))
	for _, args := range [][]string{{"update", "-q"}, append([]string{"install", "-y", "-q"}, pkgs...)} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %v: %s", strings.Join(args, " "), err, lastLines(string(out), 5))
		}
	}
	return exec.Command(python, "-c", "import torch, torchvision, PIL").Run()
}
