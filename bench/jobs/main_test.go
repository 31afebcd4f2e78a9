package jobs

import (
	"strconv"
	"strings"
	"testing"

	"github.com/dsmount/dsmount/bench/internal/cli"
)

// FuzzParseList: a flag's list gives values or an error, never a panic,
// and a list it accepts has one value per comma-separated field.
func FuzzParseList(f *testing.F) {
	for _, s := range []string{"2,4", "0.25,0.5", "on,off", "", ",", "on, off", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fields := len(strings.Split(s, ","))
		if v, err := cli.ParseList(s, strconv.Atoi); err == nil && len(v) != fields {
			t.Fatalf("cli.ParseList(%q) = %v: want %d values", s, v, fields)
		}
		if v, err := cli.ParseList(s, cli.ParseOnOff); err == nil && len(v) != fields {
			t.Fatalf("cli.ParseList(%q, on/off) = %v: want %d values", s, v, fields)
		}
	})
}

func TestParseOnOff(t *testing.T) {
	if v, err := cli.ParseList("on, off", cli.ParseOnOff); err != nil || len(v) != 2 || !v[0] || v[1] {
		t.Errorf("on, off: %v, %v", v, err)
	}
	if _, err := cli.ParseList("on,maybe", cli.ParseOnOff); err == nil {
		t.Error("on,maybe accepted")
	}
}
