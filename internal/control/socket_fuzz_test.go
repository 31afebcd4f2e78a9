package control

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzDecodeMountRequest: a line on the daemon's socket gives a request
// the daemon can mount from (a source, a clean absolute mountpoint, a
// version it speaks, sizes not negative) or a one-line error; never a
// panic.
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
		r, err := DecodeMountRequest(line)
		if err != nil {
			if strings.Contains(err.Error(), "\n") || r != (MountRequest{}) {
				t.Fatalf("DecodeMountRequest(%q) = %+v, %q: want a zero request and a one-line error", line, r, err)
			}
			return
		}
		if r.Source == "" || (!strings.Contains(r.Source, "://") && !filepath.IsAbs(r.Source)) || !filepath.IsAbs(r.Mountpoint) || filepath.Clean(r.Mountpoint) != r.Mountpoint ||
			r.CacheSize < 0 || r.ChunkSize < 0 || strings.ContainsRune(r.Source+r.Mountpoint, 0) {
			t.Fatalf("DecodeMountRequest(%q) accepted %+v", line, r)
		}
	})
}
