package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"time"
)

var ddOut = regexp.MustCompile(`(?m)^(\d+) bytes.* copied, ([0-9.]+(?:e[-+]?\d+)?) s,`)

// DD runs `dd if=file of=/dev/null bs=1M` (LC_ALL=C) and returns the bytes
// and seconds dd reports (its own clock, without the process start) and
// the command's wall time.
func DD(file string) (n int64, seconds float64, wall time.Duration, err error) {
	cmd := exec.Command("dd", "if="+file, "of=/dev/null", "bs=1M")
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall = time.Since(start)
	if err != nil {
		return 0, 0, wall, fmt.Errorf("dd if=%s: %v: %s", file, err, out)
	}
	m := ddOut.FindSubmatch(out)
	if m == nil {
		return 0, 0, wall, fmt.Errorf("dd if=%s: cannot parse %q", file, out)
	}
	n, _ = strconv.ParseInt(string(m[1]), 10, 64)
	seconds, _ = strconv.ParseFloat(string(m[2]), 64)
	return n, seconds, wall, nil
}
