package posix

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestFollowExternalSymlinks: with the opt-in, links leading outside are
// objects with their targets' bytes; links to directories are still not
// walked (one to an ancestor would loop).
func TestFollowExternalSymlinks(t *testing.T) {
	tr := newSymlinkTree(t)
	b := openTree(t, tr.root, false, Options{FollowExternalSymlinks: true})
	got := listAll(t, b)
	want := []string{"abs.bin", "chain.bin", "data/file.bin", "data/out.bin", "data/up.bin", "out-abs.bin", "out-rel.bin", "rel.bin"}
	if g := keys(got); strings.Join(g, "|") != strings.Join(want, "|") {
		t.Errorf("keys:\n got %q\nwant %q", g, want)
	}
	for _, k := range []string{"out-abs.bin", "out-rel.bin", "data/out.bin", "chain.bin"} {
		p := make([]byte, len(tr.secret))
		if n, err := b.ReadAt(context.Background(), got[k], p, 0); n != len(p) || err != nil || !bytes.Equal(p, tr.secret) {
			t.Errorf("ReadAt(%s) with FollowExternalSymlinks: %d, %v", k, n, err)
		}
	}
}
