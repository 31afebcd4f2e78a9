package warm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
	"time"

	"github.com/dsmount/dsmount/bench/internal/cli"
	"github.com/dsmount/dsmount/bench/internal/measure"
	"github.com/dsmount/dsmount/test/testenv"
)

// rawChildArg, as the only argument after "warm", makes this program the
// raw-GET process: the reference pass runs in a process of its own,
// started for the pass, as the daemon is, so neither side starts with
// connections already open or a heap already grown. A fresh page on these VMs costs some 12 µs
// to fault in, and a heap of 60–100 MB is most of a second of CPU: a
// reference that kept its process from round to round paid that once, the
// daemon every round.
const rawChildArg = "raw-gets-child"

// rawJob is what the parent sends the raw-GET process on its stdin.
type rawJob struct {
	Endpoint, User, Pass, Bucket, Prefix string
	Names                                []string
	Sizes                                []int64
	Parallel                             int
	Profile                              string // CPU profile path, or ""
}

// rawAnswer is what the raw-GET process prints on its stdout.
type rawAnswer struct {
	Bytes int64
	Error string
}

func rawChildMain() error {
	var job rawJob
	if err := json.NewDecoder(os.Stdin).Decode(&job); err != nil {
		fmt.Fprintf(os.Stderr, "%s: read job: %v\n", rawChildArg, err)
		return cli.ExitCode(2)
	}
	if job.Profile != "" {
		if f, err := os.Create(job.Profile); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	client := testenv.NewS3Client(job.Endpoint, job.User, job.Pass)
	p, err := measure.RawGets(client, job.Bucket, job.Prefix, job.Names, job.Sizes, job.Parallel)
	ans := rawAnswer{Bytes: p.Bytes}
	if err != nil {
		ans.Error = err.Error()
	}
	return json.NewEncoder(os.Stdout).Encode(ans)
}

// rawGetsFresh runs job in a new process of this program and times it from
// its start to its exit, as warm is timed; procCPU is the process's CPU.
func rawGetsFresh(job rawJob) (bytesRead int64, elapsed time.Duration, procCPU float64, err error) {
	cmd, err := cli.Child("warm", rawChildArg)
	if err != nil {
		return 0, 0, 0, err
	}
	in, err := json.Marshal(job)
	if err != nil {
		return 0, 0, 0, err
	}
	var out, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &out, &stderr
	start := time.Now()
	runErr := cmd.Run()
	elapsed = time.Since(start)
	if runErr != nil {
		return 0, 0, 0, fmt.Errorf("raw GET process: %v: %s", runErr, stderr.Bytes())
	}
	procCPU = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	var ans rawAnswer
	if err := json.Unmarshal(out.Bytes(), &ans); err != nil {
		return 0, 0, 0, fmt.Errorf("raw GET process answered %q: %v", out.Bytes(), err)
	}
	if ans.Error != "" {
		return 0, 0, 0, fmt.Errorf("raw GETs: %s", ans.Error)
	}
	return ans.Bytes, elapsed, procCPU, nil
}
