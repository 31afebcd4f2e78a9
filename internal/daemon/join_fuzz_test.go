package daemon

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"testing"
)

// FuzzHeldEnd: whatever a daemon's socket sends as a held mount's last
// line, the client neither panics nor takes it for an unmount unless it
// says exactly that; anything else is ErrDaemonGone.
func FuzzHeldEnd(f *testing.F) {
	for _, s := range []string{`{"ended":"unmounted"}` + "\n", `{"ended":"daemon_exiting"}` + "\n", "", "{", `{"ended":1}`, `{"ended":"unmounted"`, "null\n", `{"error":"x"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		c1, c2 := net.Pipe()
		defer c1.Close()
		go func() {
			c2.Write([]byte(line))
			c2.Close()
		}()
		h := &Held{conn: c1, r: bufio.NewReader(c1), pid: 1, mountpoint: "/mnt/x"}
		err := h.readEnded()
		if err == nil {
			first, _, _ := strings.Cut(line, "\n")
			if !strings.Contains(first, `"unmounted"`) {
				t.Fatalf("line %q taken for an unmount", line)
			}
			return
		}
		if !errors.Is(err, ErrDaemonGone) {
			t.Fatalf("line %q: %v, want ErrDaemonGone", line, err)
		}
	})
}
