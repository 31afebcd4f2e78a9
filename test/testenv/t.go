// Package testenv is the harness for dsmount's integration tests and
// benchmarks: a real MinIO server (StartMinIO), deterministic datasets
// (GenerateDataset), a running dsmount daemon (StartMount / BuildDsmount), and
// helpers that read a tree through a mount and compare every byte with the
// source (ReadAllShuffled, CompareFile, CompareTree).
//
// Helpers that can fail take a T, which *testing.T and *testing.B satisfy. A
// program that is not a test (a benchmark driver) can use NewProgramT.
package testenv

import (
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// T is the subset of testing.TB the helpers need. Every testing.TB is a T.
type T interface {
	Helper()
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
	Failed() bool
	Cleanup(func())
	TempDir() string
}

// ProgramT is a T for programs outside `go test`: Fatalf logs, runs the
// registered cleanups (so MinIO and mounts are torn down) and exits 1.
// Call Close when the program is done.
type ProgramT struct {
	mu       sync.Mutex
	cleanups []func()
	tmp      string
	failed   bool
	name     string
}

// NewProgramT returns a ProgramT whose TempDir lives under os.TempDir().
func NewProgramT(name string) *ProgramT { return &ProgramT{name: name} }

func (p *ProgramT) Helper()                         {}
func (p *ProgramT) Logf(format string, args ...any) { log.Printf(format, args...) }
func (p *ProgramT) Failed() bool                    { p.mu.Lock(); defer p.mu.Unlock(); return p.failed }

func (p *ProgramT) Fatalf(format string, args ...any) {
	p.mu.Lock()
	p.failed = true
	p.mu.Unlock()
	log.Printf("FATAL: "+format, args...)
	p.Close()
	os.Exit(1)
}

func (p *ProgramT) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, f)
}

// TempDir returns a new directory, removed by Close.
func (p *ProgramT) TempDir() string {
	p.mu.Lock()
	if p.tmp == "" {
		d, err := os.MkdirTemp("", p.name+"-")
		if err != nil {
			p.mu.Unlock()
			p.Fatalf("TempDir: %v", err)
		}
		p.tmp = d
		p.cleanups = append([]func(){func() { os.RemoveAll(d) }}, p.cleanups...)
	}
	base := p.tmp
	p.mu.Unlock()
	d, err := os.MkdirTemp(base, "")
	if err != nil {
		p.Fatalf("TempDir: %v", err)
	}
	return d
}

// Close runs the cleanups, last registered first. It is safe to call twice.
func (p *ProgramT) Close() {
	for {
		p.mu.Lock()
		n := len(p.cleanups)
		if n == 0 {
			p.mu.Unlock()
			return
		}
		f := p.cleanups[n-1]
		p.cleanups = p.cleanups[:n-1]
		p.mu.Unlock()
		func() {
			defer func() {
				if r := recover(); r != nil {
					log.Printf("cleanup panicked: %v", r)
				}
			}()
			f()
		}()
	}
}

// CloseOnSignal makes an interrupt (SIGINT, SIGTERM) run the cleanups
// and exit 130, so a benchmark stopped by hand leaves no mount, MinIO or
// cgroup behind. The program's main goroutine may be in the middle of a
// run: cleanups stop its daemons and servers under it. It returns the
// function that stops listening (call it before Close).
func (p *ProgramT) CloseOnSignal() (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			log.Printf("%v: cleaning up", sig)
			p.Close()
			os.Exit(130)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

var _ T = (*ProgramT)(nil)

// errorf is fmt.Errorf; kept short for the many call sites.
func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
