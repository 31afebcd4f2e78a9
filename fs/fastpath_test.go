package fs

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsmount/dsmount/backend"
)

// TestChooseFastPath: auto picks passthrough when large files (from
// largeFile up) hold more than half the bytes, no-open otherwise; an
// explicit mode is kept.
func TestChooseFastPath(t *testing.T) {
	sizes := func(ss ...int64) *backend.Listing {
		l := &backend.Listing{}
		for i, s := range ss {
			l.Append(backend.Object{Key: fmt.Sprint("k", i), Size: s})
		}
		return l
	}
	for _, c := range []struct {
		name string
		l    *backend.Listing
		want FastPath
	}{
		{"empty", sizes(), FastPathNoOpen},
		{"empty files", sizes(0, 0, 0), FastPathNoOpen},
		{"small files", sizes(100, 4096, 1<<20, largeFile-1), FastPathNoOpen},
		{"one large file", sizes(largeFile), FastPathPassthrough},
		{"large files, most bytes", sizes(largeFile, 64<<20, 1000, 1000), FastPathPassthrough},
		{"large files, half the bytes", sizes(largeFile, largeFile-1, 1), FastPathNoOpen},
		{"large files, under half", sizes(largeFile, largeFile-1, largeFile-1), FastPathNoOpen},
	} {
		if got := chooseFastPath(c.l); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		for _, auto := range []FastPath{"", FastPathAuto} {
			if got := resolveFastPath(auto, c.l); got != c.want {
				t.Errorf("%s: %q resolves to %q, want %q", c.name, auto, got, c.want)
			}
		}
		for _, p := range []FastPath{FastPathNoOpen, FastPathPassthrough, FastPathOff} {
			if got := resolveFastPath(p, c.l); got != p {
				t.Errorf("%s: %q resolves to %q", c.name, p, got)
			}
		}
	}
	for _, s := range []string{"auto", "no-open", "passthrough", "off"} {
		if p, err := ParseFastPath(s); err != nil || string(p) != s {
			t.Errorf("ParseFastPath(%q): %q, %v", s, p, err)
		}
	}
	if _, err := ParseFastPath("warp"); err == nil {
		t.Error("ParseFastPath took warp")
	}
}

// fastPathFiles: small files, one of several chunks, one in a directory.
var fastPathFiles = map[string]int{"a": 100, "b": 3*testChunk + 7, "d/c": 5000}

// TestFastPathNoOpen: on a no-open mount, the first OPEN reaches the
// daemon (answered ENOSYS) and no other does, however many opens follow;
// a second pass is served by the kernel alone (no READ); every byte is
// right.
func TestFastPathNoOpen(t *testing.T) {
	s := newStore(fastPathFiles)
	sv := serve(t, s, s.listing(), func(c *Config) { c.FastPath = FastPathNoOpen })
	if got := sv.m.FastPathMode(); got != FastPathNoOpen {
		t.Fatalf("FastPathMode after Serve: %q", got)
	}
	passes(t, sv, s, 1)
}

// TestFastPathAutoSmallFiles: auto on a dataset of small files serves
// no-open.
func TestFastPathAutoSmallFiles(t *testing.T) {
	s := newStore(fastPathFiles)
	sv := serve(t, s, s.listing(), nil)
	if got := sv.m.FastPathMode(); got != FastPathNoOpen {
		t.Fatalf("auto over small files: %q, want no-open", got)
	}
	passes(t, sv, s, 1)
}

// TestFastPathOff: with the fast path off, every open reaches the daemon,
// and a file's pages are kept across opens (FOPEN_KEEP_CACHE): a second
// pass makes no READ either.
func TestFastPathOff(t *testing.T) {
	s := newStore(fastPathFiles)
	sv := serve(t, s, s.listing(), func(c *Config) { c.FastPath = FastPathOff })
	if got := sv.m.FastPathMode(); got != FastPathOff {
		t.Fatalf("FastPathMode after Serve: %q", got)
	}
	passes(t, sv, s, 2*int64(len(fastPathFiles)))
}

// passes reads every file through sv twice, checking the bytes, and that
// the daemon saw wantOpens OPENs, READs in the first pass and none in the
// second.
func passes(t *testing.T, sv *served, s *store, wantOpens int64) {
	t.Helper()
	for k, n := range fastPathFiles {
		sv.checkFile(t, k, payload(k, n))
	}
	cold := sv.m.reads.Load()
	if cold == 0 {
		t.Fatal("the first pass made no READ")
	}
	for k, n := range fastPathFiles {
		sv.checkFile(t, k, payload(k, n))
	}
	if hot := sv.m.reads.Load(); hot != cold {
		t.Errorf("the second pass made %d READs; want none (the kernel keeps the pages)", hot-cold)
	}
	if got := sv.m.opens.Load(); got != wantOpens {
		t.Errorf("%d OPENs reached the daemon in %d opens; want %d", got, 2*len(fastPathFiles), wantOpens)
	}
}

// TestFastPathPassthrough: a passthrough mount where the kernel allows it
// (Linux >= 6.9, CAP_SYS_ADMIN) hands a wholly cached file to the kernel,
// which reads it with no READ to the daemon, and serves a file not
// cached through the page cache; where the probe fails, the mount says
// so in its log and serves everything through the page cache. The bytes
// are right either way.
func TestFastPathPassthrough(t *testing.T) {
	s := newStore(map[string]int{"cached": 3*testChunk + 10, "cold": 2*testChunk + 5})
	sv := serve(t, s, s.listing(), func(c *Config) { c.FastPath = FastPathPassthrough })
	warmObject(t, sv.src, s.objs["cached"])
	switch mode := sv.m.FastPathMode(); mode {
	case FastPathPassthrough:
		sv.checkFile(t, "cached", payload("cached", 3*testChunk+10))
		if n := sv.m.reads.Load(); n != 0 {
			t.Errorf("a passthrough open of a cached file made %d READs; want none", n)
		}
		sv.checkFile(t, "cold", payload("cold", 2*testChunk+5))
		if sv.m.reads.Load() == 0 {
			t.Error("a file not cached was read with no READ: passthrough of a partial cache file?")
		}
	case FastPathOff:
		if !strings.Contains(sv.log.String(), "passthrough is not available") {
			t.Errorf("passthrough fell back to off without a word; log:\n%s", sv.log)
		}
		t.Log("this kernel can't do passthrough here; the mount said so")
		sv.checkFile(t, "cached", payload("cached", 3*testChunk+10))
		sv.checkFile(t, "cold", payload("cold", 2*testChunk+5))
	default:
		t.Fatalf("FastPathMode after Serve: %q", mode)
	}
	if got := sv.m.opens.Load(); got != 2 {
		t.Errorf("%d OPENs reached the daemon; want 2", got)
	}
}

// cacheDirElsewhere is the real cache, but for the directory it names:
// one where the passthrough probe can't make its backing file.
type cacheDirElsewhere struct {
	Cache
	dir string
}

func (c cacheDirElsewhere) Dir() string { return c.dir }

// TestFastPathPassthroughProbeFails: when the probe at Serve fails, the
// mount falls back to off, says why, and serves a wholly cached file
// through the page cache (its READs reach the daemon), bytes right.
func TestFastPathPassthroughProbeFails(t *testing.T) {
	s := newStore(map[string]int{"cached": 3*testChunk + 10})
	missing := filepath.Join(t.TempDir(), "missing")
	sv := serve(t, s, s.listing(), func(c *Config) {
		c.FastPath = FastPathPassthrough
		c.Cache = cacheDirElsewhere{Cache: c.Cache, dir: missing}
	})
	if got := sv.m.FastPathMode(); got != FastPathOff {
		t.Fatalf("FastPathMode after a failed probe: %q, want off", got)
	}
	if log := sv.log.String(); !strings.Contains(log, "passthrough is not available") || !strings.Contains(log, "missing") {
		t.Errorf("the fallback's log doesn't say why:\n%s", log)
	}
	warmObject(t, sv.src, s.objs["cached"])
	sv.checkFile(t, "cached", payload("cached", 3*testChunk+10))
	if sv.m.reads.Load() == 0 {
		t.Error("a cached file was read with no READ on a mount whose passthrough is off")
	}
}
