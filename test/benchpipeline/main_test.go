package main

import "testing"

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"--images", "300", "--classes", "10", "--workers", "1, 4", "--isolate-backend"})
	if err != nil || c.images != 300 || c.classes != 10 || len(c.workers) != 2 || c.workers[1] != 4 || !c.isolate {
		t.Fatalf("got %+v, %v", c, err)
	}
	for _, bad := range [][]string{{"--workers", "two"}, {"--workers", "-1"}, {"--images", "5", "--classes", "10"}, {"--batch", "0"}, {"extra"}, {"--latency", "-3"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzParseFlags(f *testing.F) {
	f.Add("--workers", "1,2,4,7")
	f.Add("--images", "10")
	f.Fuzz(func(t *testing.T, a, b string) {
		c, err := parseFlags([]string{a, b})
		if err == nil && (c.images < c.classes || c.classes < 1 || c.batch < 1 || len(c.workers) == 0) {
			t.Fatalf("%q %q accepted as %+v", a, b, c)
		}
	})
}
