package units

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"512": 512, "4M": 4 << 20, "1.5G": 3 << 29, "200GiB": 200 << 30, " 2k ": 2048, "1TB": 1 << 40, "0": 0} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "-1", "1X", "NaN", "Inf", "1e30", "4 M M", "0x10"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
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
		v, err := ParseSize(s)
		if err != nil {
			if v != 0 || strings.Contains(err.Error(), "\n") {
				t.Fatalf("ParseSize(%q) = %d, %q: want 0 and a one-line error", s, v, err)
			}
			return
		}
		if v < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, v)
		}
		if back, err := ParseSize(fmt.Sprint(v)); err != nil || back != v {
			t.Fatalf("ParseSize(%q) = %d, which reads back as %d, %v", s, v, back, err)
		}
	})
}
