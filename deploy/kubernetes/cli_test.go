package kubernetes

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dsmount/dsmount/internal/units"
)

// TestCommandLineIsTheCLIs checks the DaemonSet's dsmount command line and
// DSMOUNT_* environment against `dsmount mount --help` of this checkout:
// every flag exists, every DSMOUNT_<FLAG> names one, and each value parses
// as the flag's type.
func TestCommandLineIsTheCLIs(t *testing.T) {
	m := loadManifests(t)
	_, c := m.theDaemonSet(t)
	flags := mountFlags(t)

	args := dsmountArgs(t, c)
	given, bare, positional := splitArgs(args[1:])
	if len(positional) != 2 {
		t.Errorf("args %q: want SOURCE and MOUNTPOINT", args)
	}
	for name, value := range given {
		typ, ok := flags[name]
		switch {
		case !ok:
			t.Errorf("args: %s is no flag of dsmount mount", dashed(name))
			continue
		case bare[name] && typ != "bool":
			t.Errorf("args: %s takes a %s: write %s=VALUE", dashed(name), typ, dashed(name))
			continue
		case bare[name]:
			continue
		}
		if err := checkValue(name, typ, value); err != nil {
			t.Errorf("args: %s: %v", dashed(name), err)
		}
	}

	// In the foreground: the container's main process must stay the daemon
	// (mount --daemon would detach it and return, ending the container).
	if _, ok := given["daemon"]; ok || given["d"] != "" || bare["d"] {
		t.Error("args: --daemon/-d: the container's main process must be the daemon, in the foreground")
	}
	if v, ok := envValue(c, "DSMOUNT_DAEMON"); ok && v != "false" {
		t.Errorf("env DSMOUNT_DAEMON=%q: the container's main process must be the daemon, in the foreground", v)
	}

	var n int
	for _, e := range c.Env {
		rest, ok := strings.CutPrefix(e.Name, "DSMOUNT_")
		if !ok {
			continue
		}
		n++
		name := strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
		typ, ok := flags[name]
		if !ok || strings.ToUpper(strings.ReplaceAll(name, "-", "_")) != rest {
			t.Errorf("env %s names no flag of dsmount mount (--%s)", e.Name, name)
			continue
		}
		if _, ok := given[name]; ok {
			t.Errorf("env %s and --%s are both given", e.Name, name)
		}
		if e.ValueFrom != nil {
			continue
		}
		if err := checkValue(name, typ, e.Value); err != nil {
			t.Errorf("env %s=%q: %v", e.Name, e.Value, err)
		}
	}
	if n == 0 {
		t.Error("no DSMOUNT_* environment")
	}
}

// dashed is a flag as written: -x for a shorthand, --name otherwise.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// checkValue parses a flag's value as dsmount would.
func checkValue(name, typ, value string) error {
	var err error
	switch {
	case typ == "bool":
		_, err = strconv.ParseBool(value)
	case typ == "int":
		_, err = strconv.Atoi(value)
	case typ == "duration":
		_, err = time.ParseDuration(value)
	case name == "cache-size" || name == "chunk-size":
		_, err = units.ParseSize(value)
	case name == "metrics-addr":
		_, _, err = net.SplitHostPort(value)
	}
	return err
}

// flagLine is a flag in cobra's help: "  -h, --name type   usage" (no type
// for a boolean; at least two spaces before the usage).
var flagLine = regexp.MustCompile(`^\s+(?:-(\w), )?--([a-z0-9][a-z0-9-]*)(?: (\w+))?(?:\s|$)`)

// mountFlags are the flags of `dsmount mount`, by name and shorthand,
// with their type ("bool" for a switch), read from the help of a dsmount built from this
// checkout ($DSMOUNT_BIN instead, when set).
func mountFlags(t *testing.T) map[string]string {
	t.Helper()
	bin := os.Getenv("DSMOUNT_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "dsmount")
		start := time.Now()
		out, err := exec.Command("go", "build", "-o", bin, "github.com/dsmount/dsmount/cmd/dsmount").CombinedOutput()
		if err != nil {
			t.Fatalf("go build ./cmd/dsmount: %v\n%s", err, out)
		}
		t.Logf("built dsmount in %v", time.Since(start).Round(time.Millisecond))
	}
	out, err := exec.Command(bin, "mount", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("dsmount mount --help: %v\n%s", err, out)
	}
	flags := map[string]string{}
	for line := range strings.SplitSeq(string(out), "\n") {
		if g := flagLine.FindStringSubmatch(line); g != nil {
			typ := g[3]
			if typ == "" {
				typ = "bool"
			}
			flags[g[2]] = typ
			if g[1] != "" {
				flags[g[1]] = typ // the shorthand
			}
		}
	}
	// The help must have been read: these flags are the ones the
	// DaemonSet leans on.
	for _, f := range []string{"cache-dir", "cache-size", "metrics-addr", "allow-other"} {
		if _, ok := flags[f]; !ok {
			t.Fatalf("dsmount mount --help lists no --%s (parsed %v):\n%s", f, flags, out)
		}
	}
	return flags
}

// TestStrictDecodingCatchesMistakes shows that the decoding above fails on
// the mistakes it is there for, made to the real DaemonSet: a misspelt
// field, a field in the wrong case, a duplicate key, a wrongly typed value
// and an unknown kind.
func TestStrictDecodingCatchesMistakes(t *testing.T) {
	orig, err := os.ReadFile("daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeDocs("daemonset.yaml", orig); err != nil {
		t.Fatalf("the original: %v", err)
	}
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"misspelt field", "mountPropagation: Bidirectional", "mountPropogation: Bidirectional", `unknown field "spec.template.spec.containers[0].volumeMounts[2].mountPropogation"`},
		{"field in the wrong case", "mountPropagation: Bidirectional", "MountPropagation: Bidirectional", `unknown field "spec.template.spec.containers[0].volumeMounts[2].MountPropagation"`},
		{"misspelt field in a hostPath", "type: CharDevice", "typ: CharDevice", `unknown field "spec.template.spec.volumes[0].hostPath.typ"`},
		{"duplicate key", "privileged: true", "privileged: true\n            privileged: false", `"privileged" already set`},
		{"wrong type", "privileged: true", "privileged: yes please", "cannot unmarshal string"},
		{"bad quantity", "memory: 4Gi", "memory: 4 GiB", "quantities must match the regular expression"},
		{"unknown kind", "kind: DaemonSet", "kind: DeamonSet", `no kind "DeamonSet" is registered`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad, ok := replaceOutsideComments(orig, tc.old, tc.new)
			if !ok {
				t.Fatalf("daemonset.yaml no longer holds %q outside comments: update this case", tc.old)
			}
			_, err := decodeDocs("daemonset.yaml", bad)
			if err == nil {
				t.Fatalf("%q → %q decoded without error", tc.old, tc.new)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to mention %q", err, tc.want)
			}
			t.Logf("%q → %q: %v", tc.old, tc.new, err)
		})
	}
	// A kind the scheme knows but this test doesn't check fails too.
	m := &manifests{namespaces: map[string]*corev1.Namespace{}}
	objs, err := decodeDocs("service.yaml", []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.sort(objs[0]); err == nil {
		t.Error("a Service was accepted without checks")
	}
}

// replaceOutsideComments replaces the first occurrence of old on a line
// that is not a comment.
func replaceOutsideComments(data []byte, old, repl string) ([]byte, bool) {
	lines := strings.SplitAfter(string(data), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") && strings.Contains(l, old) {
			lines[i] = strings.Replace(l, old, repl, 1)
			return []byte(strings.Join(lines, "")), true
		}
	}
	return nil, false
}
