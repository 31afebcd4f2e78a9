package test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// TestCLIEndpointCredentials gives `dsmount mount` an endpoint URL with a
// user and password in it, on the command line and in the AWS environment,
// for a store where the mount would otherwise work. It must be refused
// promptly (exit 2, a failure of the source like any other bad endpoint),
// with one line on stderr that never shows the password, and nothing
// mounted: a mounted source would carry the password into /proc/mounts.
func TestCLIEndpointCredentials(t *testing.T) {
	m := testenv.StartMinIO(t) // a server of its own: no shared dataset needed
	const bucket = "creds"
	m.CreateBucket(bucket)
	m.PutObject(bucket, "a.txt", []byte("a\n"))
	withCreds := "http://dsuser:secretpw@" + m.Addr()

	for _, c := range []struct {
		name string
		args []string
		env  []string
	}{
		{"flag", []string{"--s3-endpoint", withCreds}, s3Env(m)},
		{"AWS_ENDPOINT_URL_S3", nil, s3Env(m, "AWS_ENDPOINT_URL_S3="+withCreds)},
		{"AWS_ENDPOINT_URL", nil, s3Env(m, "AWS_ENDPOINT_URL="+withCreds)},
	} {
		t.Run(c.name, func(t *testing.T) {
			mp := t.TempDir()
			argv := append([]string{"mount", "s3://" + bucket, mp, "--cache-dir", t.TempDir(), "--s3-path-style"}, c.args...)
			r := testenv.RunCLI(dsmountBin, c.env, cliPrompt, argv...)
			if mounted, _ := testenv.IsMounted(mp); mounted {
				if info, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(info), "secretpw") {
					t.Errorf("the password is in /proc/self/mountinfo")
				}
				testenv.LazyUnmount(mp)
				t.Errorf("%s was mounted (exit %d, timed out %v)", mp, r.ExitCode, r.TimedOut)
			}
			if r.ExitCode != 2 {
				t.Errorf("exit code %d, want 2; stderr:\n%s", r.ExitCode, r.Stderr)
			}
			if strings.Contains(r.Stdout+r.Stderr, "secretpw") {
				t.Errorf("the password is in dsmount's output:\n%s%s", r.Stdout, r.Stderr)
			}
			lines := strings.Split(strings.TrimRight(r.Stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "dsmount: ") || !strings.Contains(lines[0], "credentials in the endpoint URL are not accepted") {
				t.Errorf("stderr is not one \"dsmount: \" line saying credentials in the endpoint URL are not accepted:\n%s", r.Stderr)
			}
			if r.Duration > cliPrompt/2 {
				t.Errorf("took %v to refuse", r.Duration.Round(time.Millisecond))
			}
			t.Logf("exit %d after %v: %s", r.ExitCode, r.Duration.Round(time.Millisecond), strings.TrimSpace(r.Stderr))
		})
	}
}
