package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
