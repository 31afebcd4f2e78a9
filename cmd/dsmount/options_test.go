package main

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/dsmount/dsmount/internal/version"
)

func mountCmdForTest() (*cobra.Command, *mountFlags) {
	cmd := &cobra.Command{Use: "mount"}
	var f mountFlags
	addMountFlags(cmd, &f)
	return cmd, &f
}

// TestMountOptions: every flag is an option ('_' or '-'), a boolean may be
// bare, the options mount(8), fstab and systemd add are ignored, and
// anything else is a one-line usage error that sets nothing.
func TestMountOptions(t *testing.T) {
	cmd, f := mountCmdForTest()
	err := applyMountOptions(cmd, []string{"cache_dir=/nvme/c,cache-size=500G,allow_other,s3_path_style=false", "defaults,rw,_netdev,nofail,x-systemd.automount,x-systemd.requires=a.service,noatime,comment=x,fast_path=off"})
	if err != nil {
		t.Fatal(err)
	}
	if f.cacheDir != "/nvme/c" || f.cacheSize != "500G" || !f.allowOther || f.s3PathStyle || f.fastPath != "off" {
		t.Fatalf("flags after the options: %+v", *f)
	}
	for _, c := range []struct{ opts, want string }{
		{"bogus=1", `unknown mount option "bogus"`},
		{"cache_size", "mount option cache_size needs a value"},
		{"allow_other=maybe", "mount option allow_other"},
		{"options=x", `unknown mount option "options"`},
		{"help", `unknown mount option "help"`},
	} {
		cmd, f := mountCmdForTest()
		before := *f
		err := applyMountOptions(cmd, []string{c.opts})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") || !errors.As(err, new(usageError)) {
			t.Errorf("-o %s: %v, want a one-line usage error with %q", c.opts, err, c.want)
		}
		if !slices.Equal(f.options, before.options) || f.cacheSize != before.cacheSize {
			t.Errorf("-o %s changed the flags", c.opts)
		}
	}
	cmd, _ = mountCmdForTest()
	cmd.Flags().Set("cache-dir", "/a")
	if err := applyMountOptions(cmd, []string{"cache_dir=/b"}); err == nil || !strings.Contains(err.Error(), "both") {
		t.Errorf("--cache-dir and -o cache_dir: %v", err)
	}
}

// FuzzMountOptions: whatever -o says, the options set flags of mount (and
// only by their names) or give a one-line usage error; never a panic.
func FuzzMountOptions(f *testing.F) {
	for _, s := range []string{"cache_dir=/x,allow_other", "_netdev,nofail,x-systemd.automount", "=,=,", "cache_size", "a=b=c", ",,", "allow_other=1,allow-other=0", "\x00=\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, opts string) {
		cmd, _ := mountCmdForTest()
		set, err := parseMountOptions(cmd, []string{opts})
		if err != nil {
			if strings.Contains(err.Error(), "\n") || !errors.As(err, new(usageError)) {
				t.Fatalf("-o %q: %v: want a one-line usage error", opts, err)
			}
			return
		}
		for _, kv := range set {
			if cmd.Flags().Lookup(kv[0]) == nil || kv[0] == "options" {
				t.Fatalf("-o %q set %q, not a flag of mount", opts, kv[0])
			}
		}
		if err := applyMountOptions(cmd, []string{opts}); err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("-o %q: a multi-line error %q", opts, err)
		}
	})
}

// TestEnvConfig: DSMOUNT_<FLAG> sets a flag the command line left unset;
// a flag given wins; a bad value is a usage error naming the variable.
func TestEnvConfig(t *testing.T) {
	env := map[string]string{"DSMOUNT_CACHE_SIZE": "2G", "DSMOUNT_ALLOW_OTHER": "true", "DSMOUNT_CACHE_DIR": "/from/env", "DSMOUNT_SOURCE": "s3://not/a/flag"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cmd, f := mountCmdForTest()
	cmd.Flags().Set("cache-dir", "/from/flag")
	if err := applyEnv(cmd, lookup); err != nil {
		t.Fatal(err)
	}
	if f.cacheSize != "2G" || !f.allowOther || f.cacheDir != "/from/flag" {
		t.Fatalf("after the environment: %+v", *f)
	}
	env = map[string]string{"DSMOUNT_JOB_TIMEOUT": "soon"}
	cmd, _ = mountCmdForTest()
	if err := applyEnv(cmd, lookup); err == nil || !strings.Contains(err.Error(), "DSMOUNT_JOB_TIMEOUT") || !errors.As(err, new(usageError)) {
		t.Errorf("a bad DSMOUNT_JOB_TIMEOUT: %v", err)
	}
}

// TestFuseHelperArgs: mount.fuse3's `dsmount SOURCE MOUNTPOINT -o OPTS` is
// a background mount; commands, flags and typos are left alone.
func TestFuseHelperArgs(t *testing.T) {
	isCommand := func(s string) bool { return s == "mount" || s == "warm" }
	for _, c := range []struct{ in, want []string }{
		{[]string{"s3://b/p", "/mnt/x", "-o", "rw,cache_dir=/c"}, []string{"mount", "--daemon", "s3://b/p", "/mnt/x", "-o", "rw,cache_dir=/c"}},
		{[]string{"/data/coco", "/mnt/coco"}, []string{"mount", "--daemon", "/data/coco", "/mnt/coco"}},
		{[]string{"mount", "/a", "/b"}, []string{"mount", "/a", "/b"}},
		{[]string{"mout", "/a", "/b"}, []string{"mout", "/a", "/b"}},
		{[]string{"--version"}, []string{"--version"}},
		{[]string{"/a"}, []string{"/a"}},
		{[]string{"/a", "-o", "x"}, []string{"/a", "-o", "x"}},
	} {
		if got := fuseHelperArgs(c.in, isCommand); !slices.Equal(got, c.want) {
			t.Errorf("fuseHelperArgs(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestEnvCredentials: a joining S3 mount carries this shell's static keys,
// and nothing else does.
func TestEnvCredentials(t *testing.T) {
	keys := map[string]string{"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "tok"}
	lookup := func(k string) (string, bool) { v, ok := keys[k]; return v, ok }
	if c := envCredentials("s3://b/p", false, lookup); c == nil || c.AccessKeyID != "id" || c.SecretAccessKey != "secret" || c.SessionToken != "tok" {
		t.Errorf("credentials %+v", c)
	}
	if envCredentials("/data", false, lookup) != nil || envCredentials("s3://b", true, lookup) != nil {
		t.Error("credentials for a local or anonymous source")
	}
	none := func(string) (string, bool) { return "", false }
	if envCredentials("s3://b", false, none) != nil {
		t.Error("credentials from an empty environment")
	}
}

// TestVersionFlag: dsmount --version prints the build's version.
func TestVersionFlag(t *testing.T) {
	root := newRootCmd()
	var out strings.Builder
	root.SetOut(&out)
	root.SetArgs([]string{"--version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(out.String()), "dsmount version "+version.String(); got != want {
		t.Errorf("--version printed %q, want %q", got, want)
	}
}
