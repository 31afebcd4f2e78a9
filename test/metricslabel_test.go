package test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsmount/dsmount/test/testenv"
)

// TestMetricsOddMountpoint mounts at a directory whose name is not UTF-8
// (byte 0xff) with /metrics on. Prometheus label values must be UTF-8: the
// scrape must still answer 200, twice, with the mount's series under its
// mountpoint escaped (the byte as \xff), and the daemon must keep serving.
func TestMetricsOddMountpoint(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	mp := filepath.Join(parent, "mnt\xff")
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	ports, err := testenv.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	d := testenv.StartMount(t, testenv.MountConfig{
		Bin: dsmountBin, Source: src, Mountpoint: mp,
		Args: []string{"--cache-dir", t.TempDir(), "--metrics-addr", addr},
	})
	if got, err := os.ReadFile(filepath.Join(mp, "a.txt")); err != nil || !bytes.Equal(got, []byte("a\n")) {
		t.Fatalf("read through the mount: %q, %v", got, err)
	}

	label := parent + `/mnt\xff` // parent is a temp dir: valid UTF-8, no backslash
	for i := 1; i <= 2; i++ {
		code, samples, err := testenv.ScrapeMetrics("http://" + addr + "/metrics")
		if err != nil || code != 200 {
			t.Fatalf("scrape %d: status %d, %v (daemon exited: %v)", i, code, err, d.Exited())
		}
		if v, n := testenv.PromFind(samples, "dsmount_mount_reads_total", "mount", label); n != 1 || v < 1 {
			t.Errorf("scrape %d: dsmount_mount_reads_total{mount=%q} = %v (%d series), want one series of at least 1 read", i, label, v, n)
		}
	}
	if d.Exited() {
		t.Fatalf("the daemon exited: %v", d.ExitState())
	}
	if got, err := os.ReadFile(filepath.Join(mp, "a.txt")); err != nil || !bytes.Equal(got, []byte("a\n")) {
		t.Errorf("read through the mount after the scrapes: %q, %v", got, err)
	}
	d.NoErrorLogs()
	d.Stop()
}
