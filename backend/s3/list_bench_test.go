package s3

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/test/testenv"
)

// BenchmarkList lists a generated store of ImageNet's layout through the
// SDK's ListObjectsV2 and through the listing made without it (listraw.go),
// reporting the client's CPU and wall time per key. The store runs in a
// child process (TestMain serves it), so the CPU this process uses is the
// client's alone.
//
//	go test ./backend/s3 -run '^$' -bench BenchmarkList -benchtime 5x
//
// DSMOUNT_BENCH_LIST_KEYS overrides the key count (default 128,000 in 100
// directories).
func BenchmarkList(b *testing.B) {
	n := 128_000
	if s := os.Getenv("DSMOUNT_BENCH_LIST_KEYS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			b.Fatalf("DSMOUNT_BENCH_LIST_KEYS: %v", err)
		}
		n = v
	}
	endpoint := startGenS3Child(b, n, 100)
	isolateEnv(b)
	for _, mode := range []string{"sdk", "raw"} {
		b.Run(mode, func(b *testing.B) {
			be, err := New(context.Background(), "s3://bench", Options{Endpoint: endpoint, PathStyle: true})
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			if mode == "sdk" {
				be.raw = nil
			} else if be.raw == nil {
				b.Fatal("no raw client: the listing would go through the SDK")
			}
			cpu0, t0 := selfCPU(), time.Now()
			b.ResetTimer()
			for range b.N {
				got := 0
				if err := be.List(context.Background(), func(backend.Object) error { got++; return nil }); err != nil {
					b.Fatal(err)
				}
				if got != n {
					b.Fatalf("listed %d keys, want %d", got, n)
				}
			}
			b.StopTimer()
			keys := float64(b.N * n)
			b.ReportMetric(float64(selfCPU()-cpu0)/keys, "cpu-ns/key")
			b.ReportMetric(float64(time.Since(t0))/keys, "wall-ns/key")
		})
	}
}

// selfCPU is the user and system CPU this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// genS3ChildEnv asks the test binary, run as a child, to serve a generated
// store ("keys,dirs") in the child (see TestMain).
const genS3ChildEnv = "DSMOUNT_TEST_GENS3_CHILD"

// startGenS3Child runs the test binary as a generated S3 store (bucket
// "bench") until the benchmark ends, and returns its endpoint.
func startGenS3Child(tb testing.TB, keys, dirs int) string {
	tb.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%d", genS3ChildEnv, keys, dirs))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close() // the child serves until its stdin closes
		cmd.Wait()
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if ep, ok := strings.CutPrefix(sc.Text(), "endpoint "); ok {
			go func() {
				for sc.Scan() {
				}
			}()
			return ep
		}
	}
	tb.Fatalf("generated S3 child gave no endpoint: %v", sc.Err())
	return ""
}

// TestMain serves as BenchmarkList's store when the test binary runs as
// its child (genS3ChildEnv set), reads as TestStarvedReader's child
// (starveChildEnv set), and runs the tests otherwise: a test function
// for a child would show as skipped in every normal run.
func TestMain(m *testing.M) {
	if spec := os.Getenv(genS3ChildEnv); spec != "" {
		os.Exit(serveGenS3Child(spec))
	}
	if endpoint := os.Getenv(starveChildEnv); endpoint != "" {
		os.Exit(runStarveChild(endpoint))
	}
	os.Exit(m.Run())
}

func serveGenS3Child(spec string) int {
	var keys, dirs int
	if _, err := fmt.Sscanf(spec, "%d,%d", &keys, &dirs); err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: %v\n", genS3ChildEnv, spec, err)
		return 2
	}
	g, err := testenv.ServeGenS3("bench", keys, dirs, 1024)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer g.Close()
	fmt.Printf("endpoint %s\n", g.Endpoint())
	os.Stdin.Read(make([]byte, 1)) // EOF when the parent is done
	return 0
}
