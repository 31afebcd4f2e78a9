package test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// cliPrompt is how long a failing `dsmount mount` may take to give up. An
// unreachable endpoint costs the SDK's retries with backoff, hence not 1 s.
const cliPrompt = 30 * time.Second

// TestCLIErrors runs `dsmount mount` with bad input of each kind and wants:
// a non-zero exit, promptly; exactly one line on stderr, starting with
// "dsmount: "; nothing mounted; the mountpoint left as it was.
func TestCLIErrors(t *testing.T) {
	m := sharedMinIO(t)
	user, _ := m.Creds()
	localSrc := t.TempDir()
	if err := os.WriteFile(filepath.Join(localSrc, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	closedPort, err := testenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	s3 := func(extra ...string) []string { return append(m.MountArgs(), extra...) }

	// A running mount holding a cache dir (its process is the daemon of
	// that dir), for the "cache dir in use" and join cases.
	busyCache := t.TempDir()
	running := testenv.StartMount(t, testenv.MountConfig{
		Bin: dsmountBin, Source: localSrc, Mountpoint: t.TempDir(),
		Args: []string{"--cache-dir", busyCache},
	})

	type tc struct {
		name   string
		source string
		mp     func(t *testing.T) string // default: a fresh empty directory
		args   []string                  // default --cache-dir: a fresh directory
		env    []string                  // default: s3Env(m)
		argv   func(mp string) []string  // default: mount SOURCE MP ARGS
		want   string                    // a word the error line should contain (case-insensitive), "" for any
	}
	cases := []tc{
		{name: "missing bucket", source: "s3://no-such-bucket-dsmount/x", args: s3(), want: "bucket"},
		{name: "bad credentials", source: "s3://" + dataBucket + "/" + dataPrefix, args: s3(),
			env: s3Env(m, "AWS_SECRET_ACCESS_KEY=wrong-secret-key")},
		{name: "unknown access key", source: "s3://" + dataBucket + "/" + dataPrefix, args: s3(),
			env: s3Env(m, "AWS_ACCESS_KEY_ID=nobody-"+user)},
		{name: "unreachable endpoint", source: "s3://" + dataBucket + "/" + dataPrefix,
			args: []string{"--s3-endpoint", fmt.Sprintf("http://127.0.0.1:%d", closedPort[0]), "--s3-path-style"}},
		{name: "mountpoint missing", source: localSrc,
			mp: func(t *testing.T) string { return filepath.Join(t.TempDir(), "does-not-exist") }, want: "mountpoint"},
		{name: "mountpoint not empty", source: localSrc, want: "empty",
			mp: func(t *testing.T) string {
				d := t.TempDir()
				os.WriteFile(filepath.Join(d, "occupant"), []byte("x"), 0o644)
				return d
			}},
		{name: "mountpoint is a file", source: localSrc,
			mp: func(t *testing.T) string {
				f := filepath.Join(t.TempDir(), "file")
				os.WriteFile(f, []byte("x"), 0o644)
				return f
			}},
		// A second `dsmount mount` on a served cache dir joins the daemon
		// (see mount_joins_running_daemon); a second daemon is refused.
		{name: "cache dir in use", want: "in use",
			argv: func(string) []string { return []string{"daemon", "--cache-dir", busyCache} }},
		{name: "join with a different --chunk-size", source: localSrc, want: "chunk",
			args: []string{"--cache-dir", busyCache, "--chunk-size", "8M"}},
		{name: "malformed --cache-size", source: localSrc, args: []string{"--cache-size", "12Q"}, want: "cache-size"},
		{name: "empty source", source: "", want: "source is empty"},
		{name: "malformed --chunk-size", source: localSrc, args: []string{"--chunk-size", "banana"}, want: "chunk-size"},
		{name: "local source missing", source: filepath.Join(localSrc, "nope")},
		{name: "unsupported source scheme", source: "ftp://example.com/data"},
		{name: "zero --prefetch-lead", source: localSrc, args: []string{"--prefetch-lead", "0s"}, want: "prefetch-lead"},
		{name: "unknown flag", source: localSrc, args: []string{"--no-such-flag"}},
		{name: "bad --log-format", source: localSrc, args: []string{"--log-format", "xml"}},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			mp := t.TempDir()
			if c.mp != nil {
				mp = c.mp(t)
			}
			args := c.args
			if !hasFlag(args, "--cache-dir") {
				args = append(args, "--cache-dir", t.TempDir())
			}
			env := c.env
			if env == nil {
				env = s3Env(m)
			}
			before := dirState(mp)
			argv := append([]string{"mount", c.source, mp}, args...)
			if c.argv != nil {
				argv = c.argv(mp)
			}
			r := testenv.RunCLI(dsmountBin, env, 2*cliPrompt, argv...)
			if r.TimedOut {
				testenv.LazyUnmount(mp)
				t.Fatalf("dsmount was still running after %v (killed); stderr:\n%s", 2*cliPrompt, r.Stderr)
			}
			if mounted, _ := testenv.IsMounted(mp); mounted {
				testenv.LazyUnmount(mp)
				t.Errorf("exited %d but left %s mounted", r.ExitCode, mp)
			}
			if r.ExitCode == 0 {
				t.Errorf("exit code 0, want non-zero; stderr:\n%s", r.Stderr)
			}
			if r.Duration > cliPrompt {
				t.Errorf("took %v to fail, want under %v", r.Duration.Round(time.Millisecond), cliPrompt)
			}
			lines := strings.Split(strings.TrimRight(r.Stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "dsmount: ") {
				t.Errorf("stderr is %d lines, want exactly one line starting with \"dsmount: \":\n%s", len(lines), r.Stderr)
			} else if c.want != "" && !strings.Contains(strings.ToLower(lines[0]), c.want) {
				t.Errorf("error line %q does not mention %q", lines[0], c.want)
			}
			if after := dirState(mp); after != before {
				t.Errorf("mountpoint changed: before %s, after %s", before, after)
			}
			t.Logf("exit %d after %v: %s", r.ExitCode, r.Duration.Round(time.Millisecond), strings.TrimSpace(r.Stderr))
		})
	}

	t.Run("unmount_not_mounted", func(t *testing.T) {
		r := testenv.RunCLI(dsmountBin, nil, cliPrompt, "unmount", t.TempDir())
		lines := strings.Split(strings.TrimRight(r.Stderr, "\n"), "\n")
		if r.ExitCode == 0 || len(lines) != 1 || !strings.HasPrefix(lines[0], "dsmount: ") {
			t.Errorf("dsmount unmount of a plain directory: exit %d, stderr %q; want non-zero and one \"dsmount: \" line", r.ExitCode, r.Stderr)
		}
		t.Logf("exit %d: %s", r.ExitCode, strings.TrimSpace(r.Stderr))
	})

	t.Run("mount_joins_running_daemon", func(t *testing.T) {
		mp := t.TempDir()
		j := testenv.JoinMount(t, dsmountBin, nil, localSrc, mp, cliPrompt, "--cache-dir", busyCache)
		if j.DaemonPID != running.Pid() {
			t.Errorf("the join names daemon_pid %d; the daemon of %s is pid %d", j.DaemonPID, busyCache, running.Pid())
		}
		if j.Result.Duration > cliPrompt {
			t.Errorf("the join took %v", j.Result.Duration)
		}
		got, err := os.ReadFile(filepath.Join(mp, "a.txt"))
		if err != nil || !bytes.Equal(got, []byte("a\n")) {
			t.Errorf("reading through the joined mount: %q, %v", got, err)
		}
		testenv.Unmount(t, dsmountBin, mp)
		if running.Exited() {
			t.Fatalf("the daemon exited (%v) when the joined mount was unmounted", running.ExitState())
		}
	})

	// The mount whose cache dir the other process wanted is unharmed.
	got, err := os.ReadFile(filepath.Join(running.Dir(), "a.txt"))
	if err != nil || !bytes.Equal(got, []byte("a\n")) {
		t.Errorf("the mount holding the busy cache dir: read %q, %v", got, err)
	}
	running.Stop()
}

func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// dirState describes a path for before/after comparison.
func dirState(p string) string {
	st, err := os.Lstat(p)
	if err != nil {
		return "absent"
	}
	if !st.IsDir() {
		return fmt.Sprintf("file %d bytes", st.Size())
	}
	ents, _ := os.ReadDir(p)
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	return fmt.Sprintf("dir %q", n)
}
