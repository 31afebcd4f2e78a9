package main

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsmount/dsmount/cache"
	dsfs "github.com/dsmount/dsmount/fs"
	"github.com/dsmount/dsmount/internal/daemon"
)

// oneLineErr fails t unless err is one non-empty line.
func oneLineErr(t *testing.T, what string, err error) {
	t.Helper()
	if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\n\r") {
		t.Fatalf("%s: error %q, want one line", what, msg)
	}
}

// FuzzMountFlags: the values of mount's (and the daemon's) flags that
// take more than a word (sizes, durations, counts, names of policies,
// fast paths, log levels and formats, the metrics address) are parsed by
// the flag set, then checked by planMount, newLogger and
// daemon.MetricsListenAddr: whatever they are, the command is refused with a
// one-line usage error, or gets what it can run with (a cache of more
// than 0 bytes or the default, a chunk of 64 KiB..256 MiB, a job timeout
// above 0, a prefetch lead in (0, 1h], 1..1024 prefetches, a known
// policy and fast path, a logger, an address with a host).
func FuzzMountFlags(f *testing.F) {
	mountpoint, cacheDir := f.TempDir(), f.TempDir()
	f.Add("200G", "4M", "10m", "1s", "64", "order", "auto", "info", "text", "")
	f.Add("", "64K", "1ns", "1h", "1", "lru", "no-open", "debug", "json", ":9100")
	f.Add("1.5T", "256M", "2562047h47m16.854775807s", "1h0m0.000000001s", "1024", "fill-and-hold", "passthrough", "WARN", "text", "[::1]:9100")
	f.Add("0", "63K", "0s", "0", "0", "LRU", "warp", "loud", "xml", "localhost")
	f.Add("-1", "1e30", "-5m", "-1ns", "1025", "", "", "", "", "::1:9100")
	f.Add("NaN", "4 M", "1e3s", "9223372036854775807ns", "0x10", "order\x00", "off\n", "info+1", "json\n", "host:port:x")
	f.Fuzz(func(t *testing.T, cacheSize, chunkSize, jobTimeout, lead, parallel, policy, fastPath, logLevel, logFormat, metricsAddr string) {
		cmd := &cobra.Command{Use: "mount"}
		var fl mountFlags
		addMountFlags(cmd, &fl)
		for _, kv := range [][2]string{
			{"cache-dir", cacheDir}, {"cache-size", cacheSize}, {"chunk-size", chunkSize}, {"job-timeout", jobTimeout}, {"prefetch-lead", lead},
			{"prefetch-parallel", parallel}, {"cache-policy", policy}, {"fast-path", fastPath}, {"log-level", logLevel}, {"log-format", logFormat},
		} {
			if err := cmd.Flags().Set(kv[0], kv[1]); err != nil {
				oneLineErr(t, "--"+kv[0]+" "+kv[1], err)
				return
			}
		}
		if log, err := newLogger(fl.logFormat, fl.logLevel); err != nil {
			oneLineErr(t, "newLogger", err)
			if !errors.As(err, new(usageError)) {
				t.Fatalf("newLogger(%q, %q): %v is not a usage error", fl.logFormat, fl.logLevel, err)
			}
		} else if log == nil {
			t.Fatal("newLogger gave no logger and no error")
		}
		if metricsAddr != "" {
			if addr, err := daemon.MetricsListenAddr(metricsAddr); err != nil {
				oneLineErr(t, "MetricsListenAddr", err)
			} else if host, _, err := net.SplitHostPort(addr); err != nil || host == "" {
				t.Fatalf("--metrics-addr %q listens at %q", metricsAddr, addr)
			}
		}
		p, err := planMount("/data", mountpoint, fl)
		if err != nil {
			oneLineErr(t, "planMount", err)
			if !errors.As(err, new(usageError)) {
				t.Fatalf("planMount: %v is not a usage error", err)
			}
			return
		}
		_, policyKnown := cache.PolicyByName(fl.policy)
		_, fastPathErr := dsfs.ParseFastPath(fl.fastPath)
		switch {
		case p.capacity < 0 || (p.capacity == 0 && fl.cacheSize != ""):
			t.Fatalf("--cache-size %q: capacity %d", cacheSize, p.capacity)
		case p.chunkSize < 64<<10 || p.chunkSize > 256<<20:
			t.Fatalf("--chunk-size %q: %d", chunkSize, p.chunkSize)
		case fl.jobTimeout <= 0:
			t.Fatalf("--job-timeout %q: %v", jobTimeout, fl.jobTimeout)
		case fl.prefetchLead <= 0 || fl.prefetchLead > time.Hour:
			t.Fatalf("--prefetch-lead %q: %v", lead, fl.prefetchLead)
		case fl.prefetchParallel < 1 || fl.prefetchParallel > 1024:
			t.Fatalf("--prefetch-parallel %q: %d", parallel, fl.prefetchParallel)
		case !policyKnown && fl.policy != daemon.PolicyOrder:
			t.Fatalf("--cache-policy %q accepted", policy)
		case fastPathErr != nil:
			t.Fatalf("--fast-path %q accepted: %v", fastPath, fastPathErr)
		case p.mountpoint != mountpoint || p.cacheDir != cacheDir:
			t.Fatalf("plan %+v", p)
		}
	})
}
