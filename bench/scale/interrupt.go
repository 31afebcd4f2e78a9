package scale

import (
	"errors"
	"log"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/dsmount/dsmount/test/testenv"
)

// errInterrupted is what a guarded write returns once the run is ending.
var errInterrupted = errors.New("interrupted")

// ending makes the program end exactly once, its cleanups run first,
// whichever asks: the end of the run, a fatal error, or an interrupt
// (SIGINT, SIGTERM). An interrupt arrives while the main goroutine is
// still writing into the work dir (the local tree, the order lists): were
// the work dir removed under it, it would create parts of it again.
// Those writes run in guard, and ending waits for the one in progress
// and lets no other start.
type ending struct {
	t       *testenv.ProgramT
	mu      sync.RWMutex
	stopped bool
	once    sync.Once
}

func newEnding(t *testenv.ProgramT) *ending {
	en := &ending{t: t}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sig
		log.Printf("%v: cleaning up", s)
		en.exit(130)
	}()
	return en
}

// guard runs f unless the program is ending, and keeps it from ending
// (from its cleanups starting) until f returns.
func (en *ending) guard(f func() error) error {
	en.mu.RLock()
	defer en.mu.RUnlock()
	if en.stopped {
		return errInterrupted
	}
	return f()
}

// stopping reports whether the program is ending: steps not begun yet
// are left out.
func (en *ending) stopping() bool {
	en.mu.RLock()
	defer en.mu.RUnlock()
	return en.stopped
}

// exit runs the cleanups (mounts, daemons, the S3 server, toxiproxy, the
// work dir) and exits with code. A second caller waits for the first's
// exit.
func (en *ending) exit(code int) {
	en.once.Do(func() {
		en.mu.Lock()
		en.stopped = true
		en.mu.Unlock()
		en.t.Close()
		os.Exit(code)
	})
	select {}
}

// benchT is the testenv.T of the program: a fatal error ends it through
// ending, so it never races an interrupt's cleanups.
type benchT struct {
	*testenv.ProgramT
	en *ending
}

func (t *benchT) Fatalf(format string, args ...any) {
	log.Printf("FATAL: "+format, args...)
	t.en.exit(1)
}

var _ testenv.T = (*benchT)(nil)
