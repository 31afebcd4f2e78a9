package main

import (
	"bytes"
	"strings"
	"testing"
)

// The dispatch alone: none of these starts a benchmark.
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr string // substrings expected
		stderrOneLine  bool
	}{
		{args: []string{"--help"}, code: 0, stdout: "order "},
		{args: []string{"help"}, code: 0, stdout: "scale "},
		{args: nil, code: 2, stderr: "usage: go run ./bench SUBCOMMAND"},
		{args: []string{"nope"}, code: 1, stderr: `bench: unknown subcommand "nope"`, stderrOneLine: true},
		// The flag set prints these to os.Stderr itself, usage included.
		{args: []string{"order", "--help"}, code: 0},
		{args: []string{"order", "--no-such-flag"}, code: 2},
		{args: []string{"order", "--skip-small", "--skip-large"}, code: 2, stderr: "bench order: --skip-small and --skip-large: nothing to measure", stderrOneLine: true},
		{args: []string{"store", "--pace", "2"}, code: 2, stderr: "bench store: ", stderrOneLine: true},
		{args: []string{"jobs", "--declare", "maybe"}, code: 2, stderr: "bench jobs: --declare", stderrOneLine: true},
		{args: []string{"pipeline", "--workers", "two"}, code: 2, stderr: "bench pipeline: --workers", stderrOneLine: true},
		{args: []string{"scale", "--skip", "nope"}, code: 2, stderr: "bench scale: --skip", stderrOneLine: true},
		{args: []string{"gpu", "--workers", "1,x"}, code: 2, stderr: "bench gpu: --workers", stderrOneLine: true},
		{args: []string{"gpu", "--passes", "local,nfs"}, code: 2, stderr: `bench gpu: --passes: unknown pass "nfs"`, stderrOneLine: true},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
				tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
		}
		if tc.stderrOneLine && strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%q: stderr is not one line: %q", tc.args, stderr.String())
		}
	}
}

// Every subcommand's --help works, and --help lists each once.
func TestHelp(t *testing.T) {
	var list bytes.Buffer
	run([]string{"--help"}, &list, &list)
	for _, s := range subcommands() {
		if n := strings.Count(list.String(), "\n  "+s.name+" "); n != 1 {
			t.Errorf("--help lists %s %d times:\n%s", s.name, n, list.String())
		}
		var stdout, stderr bytes.Buffer
		if code := run([]string{s.name, "--help"}, &stdout, &stderr); code != 0 {
			t.Errorf("%s --help: exit %d: %s", s.name, code, stderr.String())
		}
	}
}
