package scale

import (
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"--objects", "20000", "--dirs", "20", "--skip", "ls, order-py", "--mount-arg", "--chunk-size=1M"})
	if err != nil {
		t.Fatal(err)
	}
	if c.objects != 20000 || c.dirs != 20 || !c.skip["ls"] || !c.skip["order-py"] || len(c.skip) != 2 || c.mountArgs[0] != "--chunk-size=1M" {
		t.Fatalf("%+v", c)
	}
	if c.size != 1024 || c.Latency != 20 || c.parallel != 32 || c.subset != 0.05 || c.readers != 8 {
		t.Fatalf("defaults: %+v", c)
	}
	for _, bad := range [][]string{{"--skip", "nope"}, {"--dirs", "0"}, {"--objects", "5", "--dirs", "6"}, {"--subset", "0.9"}, {"extra"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParseSkip: --skip's list gives known steps or an error, never a
// panic.
func FuzzParseSkip(f *testing.F) {
	for _, s := range []string{"", "ls", "ls,find", " warm , epoch ", ",,", "nope", "ls,nope"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseSkip(s)
		if err != nil {
			return
		}
		for k := range m {
			if !strings.Contains(","+strings.Join(steps, ",")+",", ","+k+",") {
				t.Fatalf("parseSkip(%q) kept unknown step %q", s, k)
			}
		}
	})
}

func TestTable(t *testing.T) {
	rows := []row{
		{step: "c. `find | wc -l`", figure: "1.00 s", ref: "0.50 s", ratio: fmtRatio(time.Second, time.Second/2), target: "≤ 3× local", result: passMiss(true)},
		{step: "h. remount", figure: fmtDur(1500 * time.Millisecond), target: "≤ 1 s", result: passMiss(false)},
	}
	got := table(rows)
	want := "| Step | Figure | Reference | Ratio | Target | Result |\n|---|---|---|---|---|---|\n" +
		"| c. `find \\| wc -l` | 1.00 s | 0.50 s | 2.00× | ≤ 3× local | PASS |\n" +
		"| h. remount | 1.50 s | – | – | ≤ 1 s | MISS |\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	for d, want := range map[time.Duration]string{12 * time.Millisecond: "12.0 ms", 1234 * time.Millisecond: "1.23 s", 75 * time.Second: "75.0 s"} {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%v) = %q, want %q", d, got, want)
		}
	}
	if fmtMB(-1) != "?" || fmtMB(300e6) != "300.0 MB" {
		t.Error("fmtMB")
	}
}
