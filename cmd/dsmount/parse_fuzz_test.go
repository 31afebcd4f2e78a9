package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"512": 512, "4M": 4 << 20, "1.5G": 3 << 29, "200GiB": 200 << 30, " 2k ": 2048, "1TB": 1 << 40, "0": 0} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "-1", "1X", "NaN", "Inf", "1e30", "4 M M", "0x10"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

// FuzzParseSize: a size gives a byte count or a one-line error, never a
// panic; an accepted one is not negative, and its count reads back as
// itself.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"512", "4M", "1.5G", "200GiB", "", "-1", "1e18T", "NaN", "9223372036854775807", "1kb", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseSize(s)
		if err != nil {
			if v != 0 || strings.Contains(err.Error(), "\n") {
				t.Fatalf("parseSize(%q) = %d, %q: want 0 and a one-line error", s, v, err)
			}
			return
		}
		if v < 0 {
			t.Fatalf("parseSize(%q) = %d", s, v)
		}
		if back, err := parseSize(fmt.Sprint(v)); err != nil || back != v {
			t.Fatalf("parseSize(%q) = %d, which reads back as %d, %v", s, v, back, err)
		}
	})
}

// FuzzReadOrderFile: a path list file (an order, a warm list) gives its
// non-blank lines, without line ends, made relative to the mount when
// they name a path inside it; never a panic.
func FuzzReadOrderFile(f *testing.F) {
	for _, s := range []string{"a/b.jpg\nc.jpg\n", "\r\n\n  \n", "/mnt/x/a.jpg\r\n/mnt/x/b\n/mnt/xy/c\n", "/mnt/x/\n/mnt/x//mnt/x/a\n/mnt/x/./b\n", "../../etc/passwd\n", "a\x00b\n", strings.Repeat("x", 70000) + "\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name := filepath.Join(t.TempDir(), "order.txt")
		if err := os.WriteFile(name, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		const root = "/mnt/x"
		paths, err := readOrderFile(name, "--order", root)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a multi-line error: %q", err)
			}
			return
		}
		lines := strings.Count(s, "\n") + 1
		if len(paths) > lines {
			t.Fatalf("%d paths from %d lines", len(paths), lines)
		}
		for _, p := range paths {
			if p == "" || strings.ContainsAny(p, "\n") || strings.HasSuffix(p, "\r") {
				t.Fatalf("path %q from %q", p, s)
			}
			if filepath.IsAbs(p) && strings.HasPrefix(filepath.Clean(p), root+"/") {
				t.Fatalf("path %q inside the mount was not made relative", p)
			}
		}
	})
}

// FuzzDecodeMountRequest: a line on the daemon's socket gives a request
// the daemon can mount from (a source, a clean absolute mountpoint, a known
// fast path, sizes not negative) or a one-line error; never a panic.
func FuzzDecodeMountRequest(f *testing.F) {
	for _, s := range []string{
		`{"source":"s3://b/p","mountpoint":"/mnt/x"}`,
		`{"source":"/data","mountpoint":"/mnt/x/../y","fast_path":"no-open","cache_size":1024}`,
		`{"source":"s3://b","mountpoint":"rel"}`, `{"source":"data/x","mountpoint":"/m"}`, `{"source":"","mountpoint":"/m"}`, `{"source":"a","mountpoint":"/m","fast_path":"warp"}`,
		`{"source":"a","mountpoint":"/m","cache_size":-1}`, `{"source":"a\u0000","mountpoint":"/m"}`, `[]`, `{`, "", "\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := decodeMountRequest(line)
		if err != nil {
			if strings.Contains(err.Error(), "\n") || r != (mountRequest{}) {
				t.Fatalf("decodeMountRequest(%q) = %+v, %q: want a zero request and a one-line error", line, r, err)
			}
			return
		}
		if r.Source == "" || (!strings.Contains(r.Source, "://") && !filepath.IsAbs(r.Source)) || !filepath.IsAbs(r.Mountpoint) || filepath.Clean(r.Mountpoint) != r.Mountpoint ||
			r.CacheSize < 0 || r.ChunkSize < 0 || strings.ContainsRune(r.Source+r.Mountpoint, 0) {
			t.Fatalf("decodeMountRequest(%q) accepted %+v", line, r)
		}
	})
}
