package daemon

import (
	"testing"
	"unicode/utf8"
)

// TestLabelValue: every value comes out valid UTF-8, the usual ones
// unchanged, and distinct inputs stay distinct, including the ones an
// escape could confuse (a raw 0xff byte and the text `\xff`).
func TestLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"/mnt/data":      "/mnt/data",
		"/mnt/données":   "/mnt/données",
		"/mnt/a\xff":     `/mnt/a\xff`,
		`/mnt/a\xff`:     `/mnt/a\\xff`,
		"/mnt/a\\\xff":   `/mnt/a\\\xff`,
		`/mnt/back\sl`:   `/mnt/back\\sl`,
		"/mnt/\xc3":      `/mnt/\xc3`,
		"/mnt/\xe2\x82":  `/mnt/\xe2\x82`,
		"/mnt/\xe2\x82x": `/mnt/\xe2\x82x`,
	} {
		if got := labelValue(in); got != want {
			t.Errorf("labelValue(%q) = %q, want %q", in, got, want)
		}
	}
	seen := map[string]string{}
	for _, in := range []string{"a\xff", `a\xff`, `a\\xff`, "a\\\xff", "a\xc3\xbf", "a", `a\`, "a\\\\", "\xff\xfe", `\xff\xfe`} {
		out := labelValue(in)
		if !utf8.ValidString(out) {
			t.Errorf("labelValue(%q) = %q is not UTF-8", in, out)
		}
		if prev, dup := seen[out]; dup {
			t.Errorf("labelValue(%q) = labelValue(%q) = %q", in, prev, out)
		}
		seen[out] = in
	}
}
