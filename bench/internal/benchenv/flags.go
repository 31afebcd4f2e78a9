package benchenv

import (
	"flag"

	"github.com/dsmount/dsmount/test/testenv"
)

// Dataset is the read benchmarks' small files: --files of --file-size
// bytes each.
type Dataset struct{ Files, FileSize int }

// AddFlags adds --files and --file-size to fs.
func (d *Dataset) AddFlags(fs *flag.FlagSet) {
	fs.IntVar(&d.Files, "files", 10000, "number of small files")
	fs.IntVar(&d.FileSize, "file-size", 110_000, "size of each small file in bytes")
}

// Spec is the dataset's files, 500 to a directory, two levels deep; seed
// makes each benchmark's bytes its own.
func (d Dataset) Spec(seed uint64) testenv.DatasetSpec {
	return testenv.DatasetSpec{Seed: seed, SmallFiles: d.Files, SmallMin: d.FileSize, SmallMax: d.FileSize, FilesPerDir: 500, MaxDepth: 2}
}

// Proxy is what toxiproxy adds to every answer of the store, as a remote
// S3's latency.
type Proxy struct{ Latency, Jitter int }

// AddFlags adds --latency and --jitter (default jitter ms) to fs.
func (p *Proxy) AddFlags(fs *flag.FlagSet, jitter int) {
	fs.IntVar(&p.Latency, "latency", 20, "ms the proxy adds to every answer")
	fs.IntVar(&p.Jitter, "jitter", jitter, "± ms of jitter on --latency")
}

// IsolateFlag adds --isolate-backend to fs (StartStore's isolate).
func IsolateFlag(fs *flag.FlagSet, isolate *bool) {
	fs.BoolVar(isolate, "isolate-backend", false, "the store and toxiproxy on CPU 0, everything else (this program, the daemons, the commands) on the other CPUs: a remote store's CPU is not the node's")
}
