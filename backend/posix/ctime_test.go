package posix

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsmount/dsmount/backend"
)

// TestReadAtInPlaceRewriteKeepingMtime: a rewrite in place at the same size
// with the mtime put back (rsync --inplace -t, or os.Chtimes after writing)
// keeps size, mtime and inode; only the ctime tells, and a read of the
// listed version must fail rather than return the new bytes.
func TestReadAtInPlaceRewriteKeepingMtime(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "f")
	write(t, root, "f", []byte("version one"))
	b, err := New(root)
	must(t, err)
	ctx := context.Background()
	old := listAll(t, b)["f"]
	before, err := os.Stat(path)
	must(t, err)

	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt([]byte("version two"), 0)
	must(t, err)
	must(t, f.Close())
	must(t, os.Chtimes(path, time.Time{}, before.ModTime()))
	if after, err := os.Stat(path); err != nil || !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
		t.Fatalf("the rewrite did not keep size and mtime: %v, %v", after, err)
	}

	p := make([]byte, 11)
	n, err := b.ReadAt(ctx, old, p, 0)
	mustKind(t, err, backend.ErrChanged)
	if n != 0 {
		t.Errorf("ReadAt of the listed version returned %d bytes (%q) with its error", n, p[:n])
	}
	cur, err := b.Stat(ctx, "f")
	must(t, err)
	if cur.Version == old.Version {
		t.Fatalf("the rewritten file kept version %q", cur.Version)
	}
	if n, err := b.ReadAt(ctx, cur, p, 0); n != 11 || err != nil || string(p) != "version two" {
		t.Errorf("ReadAt of the current version = %d, %v, %q", n, err, p)
	}
}
