package jobs

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dsmount/dsmount/test/testenv"
)

// readerArg, as the first argument after "jobs", makes this program a
// job's reader process.
const readerArg = "reader"

// A job is a reader process (this program, run as "jobs reader"), alive for
// all its epochs like a training process. It talks to the parent in lines:
//
//	parent: epoch E LIST NEXT LOG   child: ready (after declaring E, and the
//	                                next epoch's order NEXT unless it is -)
//	parent: go                 child: done SECONDS  (LOG written)
//	parent: quit, or EOF       child exits
//
// LIST holds the epoch's paths in order, relative to the mount; LOG gets
// one line per read, "POSITION START_UNIX_NS", for the oracle.

func readerMain(args []string) int {
	fs := flag.NewFlagSet("reader", flag.ContinueOnError)
	mp := fs.String("mp", "", "the mount")
	bin := fs.String("bin", "", "the dsmount binary (declarations)")
	job := fs.String("job", "", "the job's name")
	workers := fs.Int("workers", 4, "reading goroutines")
	declare := fs.String("declare", "none", "none, pid or anonymous")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<16), 1<<20)
	var paths []string
	var logPath string
	for in.Scan() {
		f := strings.Fields(in.Text())
		switch {
		case len(f) == 5 && f[0] == "epoch":
			data, err := os.ReadFile(f[2])
			if err != nil {
				fmt.Printf("error %v\n", err)
				return 1
			}
			paths = strings.Split(strings.TrimSpace(string(data)), "\n")
			logPath = f[4]
			if *declare != "none" {
				args := []string{"order", *mp, "--job", *job, "--epoch", f[1], f[2]}
				if f[3] != "-" {
					args = append(args, "--next", f[3])
				}
				if *declare == "pid" {
					args = append(args, "--pid", strconv.Itoa(os.Getpid()))
				}
				if out, err := exec.Command(*bin, args...).CombinedOutput(); err != nil {
					fmt.Printf("error declaring: %v: %s\n", err, strings.ReplaceAll(string(out), "\n", " "))
					return 1
				}
			}
			fmt.Println("ready")
		case len(f) == 1 && f[0] == "go":
			secs, err := readEpoch(*mp, paths, *workers, logPath)
			if err != nil {
				fmt.Printf("error %v\n", err)
				return 1
			}
			fmt.Printf("done %.3f\n", secs)
		case len(f) == 1 && f[0] == "quit":
			return 0
		default:
			fmt.Printf("error unknown command %q\n", in.Text())
			return 1
		}
	}
	return 0
}

// readEpoch reads every path through mp with workers goroutines taking the
// next in order, logs each read's position and start, and returns the
// epoch's seconds.
func readEpoch(mp string, paths []string, workers int, logPath string) (float64, error) {
	starts := make([]int64, len(paths))
	t0 := time.Now()
	err := testenv.Parallel(len(paths), workers, func() func(int) error {
		return func(i int) error {
			starts[i] = time.Now().UnixNano()
			_, err := os.ReadFile(filepath.Join(mp, paths[i]))
			return err
		}
	})
	secs := time.Since(t0).Seconds()
	if err != nil {
		return 0, err
	}
	var b strings.Builder
	for i, s := range starts {
		fmt.Fprintf(&b, "%d %d\n", i, s)
	}
	return secs, os.WriteFile(logPath, []byte(b.String()), 0o644)
}
