package nodes

import (
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags(nil)
	if err != nil || c.files != 10000 || c.batch != 64 || c.epochs != 3 || len(c.layouts) != 3 || c.layouts[1] != (layout{4, 2}) ||
		len(c.locality) != 2 || !c.locality[0] || c.locality[1] || c.Latency != 20 {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	c, err = parseFlags([]string{"--layouts", "2x1, 16x4", "--locality", "on", "--batch", "32", "--isolate-backend"})
	if err != nil || len(c.layouts) != 2 || c.layouts[1] != (layout{16, 4}) || c.layouts[1].ranks() != 64 || len(c.locality) != 1 || !c.isolate {
		t.Fatalf("got %+v, %v", c, err)
	}
	for _, bad := range [][]string{{"--layouts", "4"}, {"--layouts", "0x1"}, {"--layouts", "4x0"}, {"--layouts", "9x8"}, {"--layouts", "ax1"},
		{"--locality", "maybe"}, {"--batch", "0"}, {"--epochs", "0"}, {"--files", "-1"}, {"--workers", "-1"}, {"--rank-memory", "1000"},
		{"--page-cache", "-1"}, {"--latency", "-1"}, {"extra"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q: no error", bad)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error of more than one line: %v", bad, err)
		}
	}
}

func FuzzParseFlags(f *testing.F) {
	f.Add("--layouts", "4x1,4x2")
	f.Add("--locality", "on,off")
	f.Add("--batch", "7")
	f.Fuzz(func(t *testing.T, a, b string) {
		c, err := parseFlags([]string{a, b})
		if err != nil {
			return
		}
		if c.files < 1 || c.meanSize < 2 || c.batch < 1 || c.epochs < 1 || c.workers < 0 || len(c.layouts) == 0 || len(c.locality) == 0 {
			t.Fatalf("%q %q accepted as %+v", a, b, c)
		}
		for _, l := range c.layouts {
			if l.nodes < 1 || l.perNode < 1 || l.ranks() > 64 {
				t.Fatalf("%q %q: layout %v accepted", a, b, l)
			}
		}
	})
}
