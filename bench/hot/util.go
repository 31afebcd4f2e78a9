package hot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dsmount/dsmount/bench/internal/measure"
	"github.com/dsmount/dsmount/test/testenv"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// verifyTree reads every path under mnt (shuffled, `readers` in parallel)
// and compares its size and CRC-32C with the source's.
func verifyTree(mnt string, paths []string, readers int, seed int64, sizes map[string]int64, crcs map[string]uint32) (time.Duration, error) {
	start := time.Now()
	err := testenv.ReadAllShuffled(mnt, paths, readers, seed, func(p string, data []byte) error {
		if int64(len(data)) != sizes[p] {
			return fmt.Errorf("%s through the mount: %d bytes, the source has %d", p, len(data), sizes[p])
		}
		if c := crc32.Checksum(data, castagnoli); c != crcs[p] {
			return fmt.Errorf("%s through the mount: CRC-32C %08x, the source's is %08x", p, c, crcs[p])
		}
		return nil
	})
	return time.Since(start), err
}

// lsLR runs `ls -lR root` (LC_ALL=C) writing to out and returns its wall
// time.
func lsLR(root string, out io.Writer) (time.Duration, error) { return measure.Ls(out, "-lR", root) }

// lsShape is `ls -lR` output reduced to what a mount must reproduce of its
// source: each directory's path below root, and per entry its type, name
// and (regular files) size; modes, owners, link counts and times dropped.
func lsShape(out, root string) []string {
	var shape []string
	for _, line := range strings.Split(out, "\n") {
		switch {
		case line == "", strings.HasPrefix(line, "total "):
			continue
		case strings.HasSuffix(line, ":") && strings.HasPrefix(line, root):
			shape = append(shape, "dir "+strings.TrimPrefix(line, root))
		default:
			f := strings.Fields(line)
			if len(f) < 9 {
				shape = append(shape, line)
				continue
			}
			// mode links owner group size month day time name...; a
			// directory's size is the filesystem's business.
			size := f[4]
			if f[0][0] != '-' {
				size = "-"
			}
			shape = append(shape, f[0][:1]+" "+size+" "+strings.Join(f[8:], " "))
		}
	}
	return shape
}

// scriptRate runs cmd, python/tests/bench_loader.py or bench_open.py over
// root, checks from the JSON it prints that it read every file (items of
// them, bytes in all) and returns its rate: samples or files per second.
// Any failure ends the program.
func scriptRate(t *testenv.ProgramT, cmd *exec.Cmd, root string, items, bytesIn int64) float64 {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", strings.Join(cmd.Args, " "), err, stdout.String(), stderr.String())
	}
	script := filepath.Base(cmd.Args[1])
	var res struct {
		Samples int64   `json:"samples"` // bench_loader.py's items
		Files   int64   `json:"files"`   // bench_open.py's
		Bytes   int64   `json:"bytes"`
		Seconds float64 `json:"seconds"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); err != nil {
		t.Fatalf("%s: %v: %q", script, err, stdout.String())
	}
	if n := res.Samples + res.Files; n != items || res.Bytes != bytesIn {
		t.Fatalf("%s over %s: %d files / %d bytes, want %d / %d", script, root, n, res.Bytes, items, bytesIn)
	}
	return float64(res.Samples+res.Files) / res.Seconds
}

// statsJSON runs `dsmount stats MOUNTPOINT --json` and decodes it loosely.
func statsJSON(bin, mnt string) (map[string]any, error) {
	r := testenv.RunCLI(bin, nil, 30*time.Second, "stats", mnt, "--json")
	if r.ExitCode != 0 {
		return nil, fmt.Errorf("dsmount stats %s --json: exit %d: %s%s", mnt, r.ExitCode, r.Stdout, r.Stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.Stdout)), &m); err != nil {
		return nil, fmt.Errorf("dsmount stats --json: %v: %q", err, r.Stdout)
	}
	return m, nil
}

// mountEntry is this mount's object in stats: the "mounts" entry whose
// mountpoint is mnt, else "mount".
func mountEntry(stats map[string]any, mnt string) map[string]any {
	if ms, ok := stats["mounts"].([]any); ok {
		for _, e := range ms {
			if o, ok := e.(map[string]any); ok && o["mountpoint"] == mnt {
				return o
			}
		}
	}
	o, _ := stats["mount"].(map[string]any)
	return o
}

// fastPathOf is the "fast_path" stats reports for the mount ("" if absent).
func fastPathOf(stats map[string]any, mnt string) string {
	if o := mountEntry(stats, mnt); o != nil {
		if v, ok := o["fast_path"]; ok {
			return fmt.Sprint(v)
		}
	}
	if v, ok := stats["fast_path"]; ok {
		return fmt.Sprint(v)
	}
	return ""
}

func num(o map[string]any, key string) int64 {
	if o == nil {
		return -1
	}
	if f, ok := o[key].(float64); ok {
		return int64(f)
	}
	return -1
}

// shellQuote quotes s for a POSIX shell if it needs it.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	if strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r == '=' || r == ':' || r == ',' ||
			(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func writeList(path string, paths []string) error {
	return os.WriteFile(path, []byte(strings.Join(paths, "\n")+"\n"), 0o644)
}

// epochRate reads every file of order under root once, readers at a time
// (testenv.ReadAllInOrder), and returns the files/s; the bytes read must
// add up to want. what names the pass in a failure.
func epochRate(t testenv.T, what, root string, order []string, readers int, want int64) float64 {
	var n atomic.Int64
	start := time.Now()
	err := testenv.ReadAllInOrder(root, order, readers, func(_ string, data []byte) error {
		n.Add(int64(len(data)))
		return nil
	})
	el := time.Since(start)
	if err != nil {
		t.Fatalf("%s over %s: %v", what, root, err)
	}
	if n.Load() != want {
		t.Fatalf("%s over %s read %d bytes; the files hold %d", what, root, n.Load(), want)
	}
	return float64(len(order)) / el.Seconds()
}
