package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsmount/dsmount/cache"
	dsfs "github.com/dsmount/dsmount/fs"
	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/internal/daemon"
	"github.com/dsmount/dsmount/internal/units"
	"github.com/dsmount/dsmount/readahead"
)

type mountFlags struct {
	cacheDir         string
	cacheSize        string
	chunkSize        string
	policy           string
	jobTimeout       time.Duration
	prefetchParallel int
	prefetchLead     time.Duration
	s3Endpoint       string
	s3PathStyle      bool
	anonymous        bool
	refresh          bool
	allowOther       bool
	fastPath         string
	metricsAddr      string
	logFormat        string
	logLevel         string

	// Local sources: serve symlinks that lead outside the source.
	followExternalSymlinks bool

	profile, region string // s3:// sources: AWS profile and region
	background      bool   // --daemon: return once the mount serves
	mkdir           bool   // make a missing mountpoint
	options         []string
}

func newMountCmd() *cobra.Command {
	var f mountFlags
	cmd := &cobra.Command{
		Use:   "mount SOURCE MOUNTPOINT",
		Short: "Mount SOURCE read-only at MOUNTPOINT (joins the cache dir's daemon, or becomes it)",
		Long: `Mount SOURCE read-only at MOUNTPOINT.

If a dsmount daemon already serves --cache-dir, the mount is added to it
and this command returns once the mount serves reads; the mount stays
until 'dsmount unmount MOUNTPOINT' (or umount). Otherwise this process
becomes that daemon, in the foreground: it serves this mount and any
joined later, unmounts everything on SIGINT/SIGTERM, and exits when its
last mount is unmounted. With --daemon (-d) the daemon goes to the
background instead, logging to <cache-dir>/dsmount.log, and this command
returns once the mount serves reads, or fails with the reason.

mount(8) and /etc/fstab mount it as type fuse.dsmount, with every flag
as an -o option (cache_dir=/nvme/dsmount,cache_size=500G,allow_other):
  mount -t fuse.dsmount s3://bucket/prefix /mnt/data -o cache_dir=/nvme/dsmount
  s3://bucket/prefix  /mnt/data  fuse.dsmount  cache_dir=/nvme/dsmount,_netdev,nofail  0 0

Every flag can also come from the environment as DSMOUNT_<FLAG>
(DSMOUNT_CACHE_DIR, DSMOUNT_CACHE_SIZE, ...); a flag or option given
wins.

SOURCE is s3://BUCKET[/PREFIX] or a local directory. S3 credentials, region
and endpoint come from the standard AWS configuration (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_PROFILE, AWS_REGION, AWS_ENDPOINT_URL_S3, ...),
or --profile and --region; --s3-endpoint and --s3-path-style serve
S3-compatible stores such as MinIO. A mount that joins a running daemon is
read with this shell's credentials: its AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) if set, else its --profile
(resolved by the daemon from the same user's AWS files), else the
daemon's own.

The first mount of a source lists it and keeps the listing in the cache;
later mounts reuse it (--refresh lists again, picking up changed objects).`,
		Example: `  dsmount mount s3://my-datasets/imagenet /mnt/imagenet --cache-dir /nvme/dsmount --cache-size 500G
  dsmount mount -d /nfs/datasets/coco /mnt/coco && dsmount warm /mnt/coco/val
  dsmount mount s3://bucket/prefix /mnt/data --s3-endpoint http://127.0.0.1:9000 --s3-path-style`,
		Args: mountArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ready := readinessFromEnv()
			err := runMount(cmd.Context(), cmd, args[0], args[1], f, &ready)
			if err != nil {
				ready.failed(err)
			}
			return err
		},
	}
	addMountFlags(cmd, &f)
	return cmd
}

// mountArgs wants SOURCE and MOUNTPOINT. A lone MOUNTPOINT is what a
// dsmount@ unit runs when its settings file gave no DSMOUNT_SOURCE (an
// empty ${DSMOUNT_SOURCE} expands to no word): the error names the file.
func mountArgs(c *cobra.Command, args []string) error {
	if len(args) == 1 && filepath.IsAbs(args[0]) && os.Getenv("DSMOUNT_SOURCE") == "" && os.Getenv("INVOCATION_ID") != "" {
		return usagef("no SOURCE for %s: a dsmount@ unit takes it from DSMOUNT_SOURCE in /etc/dsmount%s.env", args[0], filepath.Clean(args[0]))
	}
	return exactArgs(2, "SOURCE and MOUNTPOINT")(c, args)
}

// addMountFlags adds mount's flags: the cache's and daemon's, and the
// mount's own.
func addMountFlags(cmd *cobra.Command, f *mountFlags) {
	addCacheFlags(cmd, f)
	fl := cmd.Flags()
	fl.StringVar(&f.s3Endpoint, "s3-endpoint", "", "S3 endpoint URL for S3-compatible stores, e.g. http://127.0.0.1:9000")
	fl.BoolVar(&f.s3PathStyle, "s3-path-style", false, "address buckets as ENDPOINT/BUCKET instead of BUCKET.ENDPOINT")
	fl.BoolVar(&f.anonymous, "anonymous", false, "read a public bucket without credentials")
	fl.BoolVar(&f.followExternalSymlinks, "follow-external-symlinks", false, "local sources: serve symlinks that lead outside SOURCE (by default they are skipped, and reads through them fail)")
	fl.BoolVar(&f.refresh, "refresh", false, "list the source again instead of using the stored listing")
	fl.BoolVar(&f.allowOther, "allow-other", false, "let users other than the mounting one read the mount")
	fl.StringVar(&f.profile, "profile", "", "s3:// sources: the AWS profile to use (default: AWS_PROFILE, or the default profile)")
	fl.StringVar(&f.region, "region", "", "s3:// sources: the bucket's region (default: AWS_REGION or the profile's; a bucket elsewhere is followed)")
	fl.BoolVar(&f.mkdir, "mkdir", false, "make MOUNTPOINT (and its parents) if it does not exist")
	fl.BoolVarP(&f.background, "daemon", "d", false, "run in the background: return once the mount serves reads (the daemon logs to <cache-dir>/dsmount.log)")
	fl.StringArrayVarP(&f.options, "options", "o", nil, optionsHelp)
	fl.StringVar(&f.fastPath, "fast-path", string(dsfs.FastPathAuto), "how hot reads skip the daemon: no-open (small files: served from the kernel's page cache), passthrough (large files: the kernel reads the cache file; Linux >= 6.9, root), off, or auto (from the dataset's file sizes)")
}

// addCacheFlags adds the flags of the cache and daemon, shared by mount and
// daemon.
func addCacheFlags(cmd *cobra.Command, f *mountFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.cacheDir, "cache-dir", defaultCacheDir(), "cache directory (one dsmount daemon per directory; owned by the daemon's user, writable by it alone)")
	fl.StringVar(&f.cacheSize, "cache-size", "", "most bytes of data to keep, e.g. 200G (default: 80% of the cache filesystem's free space at start, less 32 MiB)")
	fl.StringVar(&f.chunkSize, "chunk-size", "4M", "unit of fetching and caching; a smaller object is one chunk")
	fl.StringVar(&f.policy, "cache-policy", daemon.PolicyOrder, "what to keep when the cache is full: order (what declared orders need soonest; fill-and-hold while none is declared), fill-and-hold (keep what is cached, stream the rest) or lru")
	fl.DurationVar(&f.jobTimeout, "job-timeout", readahead.DefaultJobTimeout, "forget a job with a declared order after this long without reads")
	fl.IntVar(&f.prefetchParallel, "prefetch-parallel", readahead.DefaultParallel, "most prefetch fetches in flight for declared orders, all jobs together")
	fl.DurationVar(&f.prefetchLead, "prefetch-lead", readahead.DefaultLead, "keep at least this much of each declared job's reading fetched ahead, at its read rate (bounded by 1 GiB per job)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at HOST:PORT/metrics (\":PORT\" means 127.0.0.1:PORT; off by default)")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format on stderr: text or json")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
}

// defaultCacheDir is $XDG_CACHE_HOME/dsmount, else ~/.cache/dsmount with
// the home directory from $HOME or, where it is unset (a service), the
// user database; "" if neither says. Never a path under a shared
// directory such as /tmp: another user could make it first, with links
// in it (see cache.ErrNotPrivate).
func defaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "dsmount")
	}
	if u, err := user.Current(); err == nil && u.HomeDir != "" {
		if st, err := os.Stat(u.HomeDir); err == nil && st.IsDir() {
			return filepath.Join(u.HomeDir, ".cache", "dsmount")
		}
	}
	return ""
}

// mountPlan is the validated command line.
type mountPlan struct {
	source, mountpoint, cacheDir string
	capacity, chunkSize          int64
	detachedDead                 bool // a dead FUSE mount at the mountpoint was detached
}

// planCache validates the cache flags.
func planCache(f mountFlags) (daemon.Settings, error) {
	p, err := planCacheFields(f)
	return p.settings(f), err
}

// settings are what a daemon started for this plan needs.
func (p mountPlan) settings(f mountFlags) daemon.Settings {
	return daemon.Settings{Dir: p.cacheDir, Capacity: p.capacity, ChunkSize: p.chunkSize, Policy: f.policy, JobTimeout: f.jobTimeout, PrefetchParallel: f.prefetchParallel, PrefetchLead: f.prefetchLead}
}

func planMount(source, mountpoint string, f mountFlags) (mountPlan, error) {
	p, err := planCacheFields(f)
	if err != nil {
		return p, err
	}
	p.source = source
	if _, err := dsfs.ParseFastPath(f.fastPath); err != nil {
		return p, flagErrorf("fast-path", "%w", err)
	}
	if p.mountpoint, p.detachedDead, err = checkMountpoint(mountpoint, f.mkdir); err != nil {
		return p, err
	}
	if strings.HasPrefix(p.cacheDir+"/", p.mountpoint+"/") {
		return p, usagef("--cache-dir %s is inside the mountpoint", p.cacheDir)
	}
	return p, nil
}

func planCacheFields(f mountFlags) (mountPlan, error) {
	var p mountPlan
	var err error
	if f.cacheDir == "" {
		return p, usagef("no cache directory: $HOME and $XDG_CACHE_HOME are unset and this user has no home directory; pass --cache-dir")
	}
	if f.cacheSize != "" {
		if p.capacity, err = units.ParseSize(f.cacheSize); err != nil {
			return p, flagErrorf("cache-size", "%w", err)
		}
		if p.capacity == 0 {
			return p, flagErrorf("cache-size", "must be more than 0")
		}
	}
	if p.chunkSize, err = units.ParseSize(f.chunkSize); err != nil {
		return p, flagErrorf("chunk-size", "%w", err)
	}
	if p.chunkSize < 64<<10 || p.chunkSize > 256<<20 {
		return p, flagErrorf("chunk-size", "%s is outside 64K..256M", f.chunkSize)
	}
	if _, ok := cache.PolicyByName(f.policy); !ok && f.policy != daemon.PolicyOrder {
		return p, flagErrorf("cache-policy", "unknown policy %q (want order, fill-and-hold or lru)", f.policy)
	}
	if f.jobTimeout <= 0 {
		return p, flagErrorf("job-timeout", "must be positive, got %s", f.jobTimeout)
	}
	if f.prefetchParallel < 1 || f.prefetchParallel > 1024 {
		return p, flagErrorf("prefetch-parallel", "%d is outside 1..1024", f.prefetchParallel)
	}
	if f.prefetchLead <= 0 || f.prefetchLead > time.Hour {
		return p, flagErrorf("prefetch-lead", "%s is outside (0, 1h]", f.prefetchLead)
	}
	if f.metricsAddr != "" {
		if _, err := daemon.MetricsListenAddr(f.metricsAddr); err != nil {
			return p, usageError{err}
		}
	}
	if p.cacheDir, err = filepath.Abs(f.cacheDir); err != nil {
		return p, flagErrorf("cache-dir", "%w", err)
	}
	return p, nil
}

// checkMountpoint wants an existing, empty directory, made (with its
// parents) if mkdir says so. A dead FUSE mount there (its daemon was
// killed: every access fails with ENOTCONN) is detached first, and
// detached says so: nothing can be served from it, and it would hold the
// place until someone ran umount -l.
func checkMountpoint(dir string, mkdir bool) (abs string, detached bool, err error) {
	abs, err = filepath.Abs(dir)
	if err != nil {
		return "", false, usagef("mountpoint %s: %w", dir, err)
	}
	// statfs asks the filesystem itself: a dead mount's root may still
	// stat from the kernel's cached attributes (kept for an hour).
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(abs, &sfs); errors.Is(err, syscall.ENOTCONN) {
		if err := syscall.Unmount(abs, syscall.MNT_DETACH); err != nil {
			return "", false, fmt.Errorf("mountpoint %s is a dead FUSE mount that could not be detached (umount -l it): %w", abs, err)
		}
		detached = true
	}
	if mkdir {
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return "", detached, fmt.Errorf("--mkdir: %w", err)
		}
	}
	d, err := os.Open(abs)
	if errors.Is(err, os.ErrNotExist) {
		return "", detached, usagef("mountpoint %s does not exist (--mkdir makes it)", abs)
	}
	if err != nil {
		return "", detached, fmt.Errorf("mountpoint %s: %w", abs, err)
	}
	defer d.Close()
	if st, err := d.Stat(); err != nil || !st.IsDir() {
		return "", detached, usagef("mountpoint %s is not a directory", abs)
	}
	names, err := d.Readdirnames(1)
	if err != nil && err != io.EOF {
		return "", detached, fmt.Errorf("mountpoint %s: %w", abs, err)
	}
	if len(names) > 0 {
		return "", detached, usagef("mountpoint %s is not empty", abs)
	}
	return abs, detached, nil
}

func runMount(ctx context.Context, cmd *cobra.Command, source, mountpoint string, f mountFlags, ready *readiness) error {
	log, err := newLogger(f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	p, err := planMount(source, mountpoint, f)
	if err != nil {
		return err
	}
	if p.detachedDead {
		log.Warn("detached a dead FUSE mount left at the mountpoint (its daemon was killed)", "mountpoint", p.mountpoint)
	}
	req := control.MountRequest{Source: p.source, Mountpoint: p.mountpoint, S3Endpoint: f.s3Endpoint, S3PathStyle: f.s3PathStyle,
		Anonymous: f.anonymous, Refresh: f.refresh, AllowOther: f.allowOther, FastPath: f.fastPath, FollowExternalSymlinks: f.followExternalSymlinks,
		Profile: f.profile, Region: f.region}
	if req.Source, err = normaliseSource(p.source); err != nil {
		return err
	}
	if err := daemon.CheckSource(req); err != nil {
		return usageError{err}
	}
	if cmd.Flags().Changed("cache-size") {
		req.CacheSize = p.capacity
	}
	if cmd.Flags().Changed("chunk-size") {
		req.ChunkSize = p.chunkSize
	}
	if cmd.Flags().Changed("cache-policy") {
		req.Policy = f.policy
	}
	// A systemd service's main process ($NOTIFY_SOCKET) stays in the
	// foreground holding its mount, which a daemon of its own scope
	// serves (instance.go): systemd tracks it, takes READY=1 from it
	// alone, and stopping it unmounts that mount and no other.
	serviceMain := os.Getenv("NOTIFY_SOCKET") != "" && !ready.child()
	if f.background && serviceMain {
		log.Warn("--daemon ignored: a systemd service's dsmount (Type=notify) stays in the foreground as the service's main process", "setting", flagOrigin(cmd, "daemon"))
		f.background = false
	}
	// Join the daemon of this cache dir if one runs, with this shell's
	// keys if it has any.
	joinReq := req
	joinReq.Credentials = envCredentials(req.Source, req.Anonymous, os.LookupEnv)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if serviceMain {
		joinReq.Hold = true
		return serveInstance(ctx, instance{cmd: cmd, plan: p, req: joinReq, log: log})
	}
	joinedDaemon := func(reply control.MountReply, err error) error {
		if err != nil {
			return joinError(joinReq, err)
		}
		ready.ready(reply.Files, reply.Dirs, reply.Pid)
		log.Info("mounted", "mountpoint", p.mountpoint, "source", p.source, "files", reply.Files, "dirs", reply.Dirs, "daemon_pid", reply.Pid,
			"credentials", credentialsSource(joinReq), "note", "served by the running daemon; 'dsmount unmount' to remove")
		return nil
	}
	if reply, _, joined, err := daemon.Join(p.cacheDir, joinReq); joined {
		return joinedDaemon(reply, err)
	}

	// A daemon started in the background never backgrounds again, whatever
	// its flags say.
	if f.background && !ready.child() {
		// A daemon still ending (its last mount just went) holds the
		// cache dir for a moment: join it if it answers, else try again.
		var res backgroundResult
		var joined *control.MountReply
		err := whileBusy(ctx, func() error {
			if reply, _, ok, err := daemon.Join(p.cacheDir, joinReq); ok {
				joined = &reply
				return err
			}
			var err error
			res, err = startInBackground(ctx, cmd, req.Source, p.mountpoint, p.cacheDir)
			return err
		})
		if joined != nil {
			return joinedDaemon(*joined, err)
		}
		if err != nil {
			return err
		}
		log.Info("mounted", "mountpoint", p.mountpoint, "source", p.source, "files", res.files, "dirs", res.dirs, "daemon_pid", res.pid,
			"log", filepath.Join(p.cacheDir, logName), "note", "the daemon runs in the background; 'dsmount unmount' or umount to remove")
		return nil
	}
	d, err := startDaemon(p.settings(f), f.metricsAddr, true, log)
	if errors.Is(err, cache.ErrInUse) {
		// Another dsmount holds the cache dir but didn't answer: it may be
		// starting (two mounts racing) — give its socket a moment.
		if reply, _, joined, jerr := daemon.WaitAndJoin(ctx, p.cacheDir, joinReq); joined {
			return joinedDaemon(reply, jerr)
		}
	}
	if err != nil {
		return err
	}
	m, err := d.AddMount(ctx, req)
	if err != nil {
		d.Close()
		return err
	}
	ready.ready(m.Files(), m.Dirs(), os.Getpid())
	notify(log, "READY=1\nSTATUS=serving "+p.mountpoint)
	d.Wait(ctx)
	notify(log, "STOPPING=1")
	d.Close()
	return nil
}

// joinError says, for a mount refused by a running daemon, whose
// credentials it was read with.
func joinError(req control.MountRequest, err error) error {
	if req.Credentials != nil {
		return fmt.Errorf("%w (a joining mount reads with this shell's AWS_ACCESS_KEY_ID, not the daemon's credentials)", err)
	}
	return err
}

// startDaemon starts the daemon of a cache dir.
func startDaemon(s daemon.Settings, metricsAddr string, exitWhenEmpty bool, log *slog.Logger) (*daemon.Daemon, error) {
	return daemon.Start(daemon.Config{Settings: s, MetricsAddr: metricsAddr, ExitWhenEmpty: exitWhenEmpty, Logger: log})
}

// normaliseSource makes a local source absolute, so a daemon started
// elsewhere resolves it the same way.
func normaliseSource(src string) (string, error) {
	if strings.TrimSpace(src) == "" {
		// filepath.Abs would make it the current directory.
		return "", usagef("the source is empty: give a directory or s3://bucket[/prefix]")
	}
	if strings.Contains(src, "://") {
		return src, nil
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return "", usagef("source %s: %w", src, err)
	}
	return abs, nil
}

func newDaemonCmd() *cobra.Command {
	var f mountFlags
	var exitWithLastMount bool
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run the dsmount daemon of a cache dir with no mounts yet (foreground)",
		Long: `Run the one dsmount process of a cache directory. 'dsmount mount' with the
same --cache-dir then adds its mount to this daemon over the socket
<cache-dir>/dsmount.sock (mode 0600) and returns; all mounts share one cache,
one capacity and one index, and a chunk wanted by several mounts is fetched
once. Without a running daemon, 'dsmount mount' becomes the daemon itself.
The daemon reads S3 credentials from its own environment. SIGINT/SIGTERM
unmounts everything and exits.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ready := readinessFromEnv()
			err := runDaemon(cmd, f, exitWithLastMount, &ready)
			if err != nil {
				ready.failed(err)
			}
			return err
		},
	}
	addCacheFlags(cmd, &f)
	cmd.Flags().BoolVar(&exitWithLastMount, exitWithLastMountFlag, false, "exit when the last mount is unmounted, or when no mount comes within 30 s (set for the daemon a systemd unit's mount starts)")
	cmd.Flags().MarkHidden(exitWithLastMountFlag)
	return cmd
}

// runDaemon runs `dsmount daemon`: in the foreground (dsmount-daemon.service),
// or started in the background for a unit's mount to join (ready).
func runDaemon(cmd *cobra.Command, f mountFlags, exitWithLastMount bool, ready *readiness) error {
	log, err := newLogger(f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	cf, err := planCache(f)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := daemon.Config{Settings: cf, MetricsAddr: f.metricsAddr, Logger: log}
	if exitWithLastMount {
		cfg.ExitWhenEmpty, cfg.EmptyGrace = true, bareDaemonGrace
	}
	d, err := daemon.Start(cfg)
	if err != nil {
		return err
	}
	ready.ready(0, 0, os.Getpid())
	used, capacity := d.CacheSize()
	log.Info("daemon ready", "cache_dir", cf.Dir, "socket", d.SocketPath(), "cache_used", used, "cache_capacity", capacity, "pid", os.Getpid())
	notify(log, "READY=1\nSTATUS=serving "+cf.Dir)
	d.Wait(ctx)
	notify(log, "STOPPING=1")
	d.Close()
	return nil
}

func newLogger(format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, flagErrorf("log-level", "unknown level %q (want debug, info, warn or error)", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, flagErrorf("log-format", "unknown format %q (want text or json)", format)
}
