package posix

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsmount/dsmount/backend"
)

// symlinkTree is a source root with links that stay inside it and links
// that lead out, to a directory beside it.
type symlinkTree struct {
	root, outside string
	inside        []byte // root/data/file.bin
	secret        []byte // outside/secret.bin, the same size
}

func newSymlinkTree(t *testing.T) symlinkTree {
	t.Helper()
	parent := t.TempDir()
	tr := symlinkTree{
		root: filepath.Join(parent, "root"), outside: filepath.Join(parent, "outside"),
		inside: bytes.Repeat([]byte("in"), 500), secret: bytes.Repeat([]byte("XX"), 500),
	}
	write(t, tr.root, "data/file.bin", tr.inside)
	write(t, tr.outside, "secret.bin", tr.secret)
	write(t, tr.outside, "dir/x.bin", tr.secret)
	for link, target := range map[string]string{
		"rel.bin":      "data/file.bin",
		"data/up.bin":  "../data/file.bin",
		"abs.bin":      filepath.Join(tr.root, "data/file.bin"), // absolute, but inside
		"out-abs.bin":  filepath.Join(tr.outside, "secret.bin"),
		"out-rel.bin":  "../outside/secret.bin",
		"data/out.bin": "../../outside/secret.bin",
		"outdir":       tr.outside, // a directory outside
		"chain.bin":    "out-rel.bin",
	} {
		must(t, os.Symlink(target, filepath.Join(tr.root, filepath.FromSlash(link))))
	}
	return tr
}

// both runs fn with openat2 and with the fallback for kernels without it.
func both(t *testing.T, fn func(t *testing.T, fallback bool)) {
	for _, fallback := range []bool{false, true} {
		name := "openat2"
		if fallback {
			name = "fallback"
		}
		t.Run(name, func(t *testing.T) { fn(t, fallback) })
	}
}

func openTree(t *testing.T, root string, fallback bool, opts Options) *Backend {
	t.Helper()
	b, err := New(root, opts)
	must(t, err)
	t.Cleanup(func() { b.Close() })
	if fallback {
		b.noOpenat2.Store(true)
	}
	return b
}

// TestSymlinksStayInside: links that resolve inside the root (relative,
// through "..", absolute) are objects with their target's bytes; links that
// lead outside, to a file or a directory, are skipped with a warning, and a
// read or stat through one fails with ErrPermission without the outside
// file's bytes.
func TestSymlinksStayInside(t *testing.T) {
	both(t, func(t *testing.T, fallback bool) {
		tr := newSymlinkTree(t)
		var logs bytes.Buffer
		b := openTree(t, tr.root, fallback, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		ctx := context.Background()
		got := listAll(t, b)
		want := []string{"abs.bin", "data/file.bin", "data/up.bin", "rel.bin"}
		if g := keys(got); strings.Join(g, "|") != strings.Join(want, "|") {
			t.Errorf("keys:\n got %q\nwant %q", g, want)
		}
		for _, k := range []string{"abs.bin", "data/up.bin", "rel.bin"} {
			p := make([]byte, len(tr.inside))
			if n, err := b.ReadAt(ctx, got[k], p, 0); n != len(p) || err != nil || !bytes.Equal(p, tr.inside) {
				t.Errorf("ReadAt(%s), a link inside the root: %d, %v", k, n, err)
			}
			if st, err := b.Stat(ctx, k); err != nil || st != got[k] {
				t.Errorf("Stat(%s) = %+v, %v; List gave %+v", k, st, err, got[k])
			}
		}
		for _, k := range []string{"out-abs.bin", "out-rel.bin", "data/out.bin", "chain.bin"} {
			if !strings.Contains(logs.String(), k) {
				t.Errorf("no warning names the skipped link %s:\n%s", k, logs.String())
			}
		}
		// Directory links are never walked, followed or not: no warning.
		if strings.Contains(logs.String(), "outdir") {
			t.Errorf("a warning names the directory link outdir:\n%s", logs.String())
		}

		// Reads of keys List would never give, but a stale listing or a
		// crafted request might.
		lie := got["data/file.bin"]
		for _, k := range []string{"out-abs.bin", "out-rel.bin", "data/out.bin", "chain.bin", "outdir/secret.bin", "outdir/dir/x.bin"} {
			obj := lie
			obj.Key = k
			p := make([]byte, len(tr.secret))
			n, err := b.ReadAt(ctx, obj, p, 0)
			mustKind(t, err, backend.ErrPermission)
			if n != 0 || bytes.Contains(p, []byte("XX")) {
				t.Errorf("ReadAt(%s) returned %d bytes of the outside file", k, n)
			}
			_, err = b.Stat(ctx, k)
			mustKind(t, err, backend.ErrPermission)
		}
	})
}

// TestSymlinkRetargetedOutside: a link listed while it pointed inside and
// turned outside afterwards must not be read through: ErrPermission, not the
// outside file (not even opened, to check its version).
func TestSymlinkRetargetedOutside(t *testing.T) {
	both(t, func(t *testing.T, fallback bool) {
		tr := newSymlinkTree(t)
		b := openTree(t, tr.root, fallback, Options{})
		obj := listAll(t, b)["rel.bin"]
		link := filepath.Join(tr.root, "rel.bin")
		must(t, os.Remove(link))
		must(t, os.Symlink(filepath.Join(tr.outside, "secret.bin"), link))
		p := make([]byte, len(tr.secret))
		n, err := b.ReadAt(context.Background(), obj, p, 0)
		mustKind(t, err, backend.ErrPermission)
		if n != 0 || bytes.Contains(p, []byte("XX")) {
			t.Errorf("ReadAt through the retargeted link returned %d bytes of the outside file", n)
		}
	})
}

// TestSymlinkWarningsBounded: a tree with many links leading out warns about
// a few by name and counts the rest, rather than logging a line per link.
func TestSymlinkWarningsBounded(t *testing.T) {
	tr := newSymlinkTree(t)
	for i := range 3 * maxLinkWarnings {
		must(t, os.Symlink(filepath.Join(tr.outside, "secret.bin"), filepath.Join(tr.root, "data", "many-"+string(rune('a'+i%26))+strings.Repeat("x", i/26)+".bin")))
	}
	var logs bytes.Buffer
	b := openTree(t, tr.root, false, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	listAll(t, b)
	lines := strings.Count(logs.String(), "\n")
	if lines > maxLinkWarnings+1 {
		t.Errorf("%d warning lines for %d links leading out, want at most %d:\n%s", lines, 3*maxLinkWarnings+4, maxLinkWarnings+1, logs.String())
	}
	if !strings.Contains(logs.String(), "count=") {
		t.Errorf("no summary count of the links not named:\n%s", logs.String())
	}
}

// TestCloseReleasesRoot: the Backend holds the root open; after Close its
// calls fail instead of resolving names against a reused descriptor.
func TestCloseReleasesRoot(t *testing.T) {
	tr := newSymlinkTree(t)
	b, err := New(tr.root)
	must(t, err)
	obj := listAll(t, b)["data/file.bin"]
	must(t, b.Close())
	f, err := os.Open(tr.outside) // likely to take the descriptor number Close freed
	must(t, err)
	defer f.Close()
	_, err = b.ReadAt(context.Background(), obj, make([]byte, 10), 0)
	mustKind(t, err, backend.ErrUnavailable)
}
