package fs

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// primer lists, through the mount itself, the directories of the files a
// job declares. The kernel asks for a listing with READDIRPLUS and keeps
// every entry of the answer as if it had looked the name up (dirHandle
// fills them in), so a loader's first open of a declared file costs no
// LOOKUP round trip: on a busy node that round trip was most of what a
// cached read waited for. It runs in the background, after the declaration
// has been answered, so neither the declaring job nor its readers wait for
// it; a reader that gets to a file first just looks it up.
//
// The daemon reading its own mount is safe: the listing waits on FUSE
// requests that the server's other goroutines answer, and no request
// handler ever waits on the primer.
//
// Locking: mu guards queue, listed and running. One goroutine at a time
// works the queue; stop cancels it and waits.
type primer struct {
	root string // the mountpoint
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	queue   []string             // directories to list, relative to root
	listed  map[string]time.Time // directory → when it was queued; the kernel keeps entries kernelTimeout
	running bool
	done    int64 // directories listed
}

func newPrimer(root string, log *slog.Logger) *primer {
	ctx, cancel := context.WithCancel(context.Background())
	return &primer{root: root, log: log, ctx: ctx, cancel: cancel, listed: make(map[string]time.Time)}
}

// add queues the directories not listed within the kernel's entry timeout,
// and returns how many it queued.
func (p *primer) add(dirs []string) int {
	if p == nil {
		return 0
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return 0
	}
	n := 0
	for _, d := range dirs {
		if t, ok := p.listed[d]; ok && now.Sub(t) < kernelTimeout/2 {
			continue
		}
		p.listed[d] = now
		p.queue = append(p.queue, d)
		n++
	}
	if n > 0 && !p.running {
		p.running = true
		p.wg.Add(1)
		go p.run()
	}
	return n
}

func (p *primer) run() {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		if len(p.queue) == 0 || p.ctx.Err() != nil {
			p.queue, p.running = nil, false
			p.mu.Unlock()
			return
		}
		d := p.queue[0]
		p.queue = p.queue[1:]
		p.mu.Unlock()
		err := listDir(filepath.Join(p.root, filepath.FromSlash(d)))
		p.mu.Lock()
		p.done++
		p.mu.Unlock()
		switch {
		case err == nil:
		case errors.Is(err, syscall.ENOTCONN), errors.Is(err, fs.ErrNotExist):
			// Unmounted under us: nothing more to list.
			p.cancel()
		default:
			p.log.Debug("listing a declared directory", "dir", d, "err", err)
		}
	}
}

// listed reports how many queued directories have been listed (or failed).
func (p *primer) listedCount() int64 {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// stop abandons what is queued and waits for the listing in progress: the
// mount can't be unmounted while the daemon holds a directory open in it.
func (p *primer) stop() {
	if p == nil {
		return
	}
	p.cancel()
	p.wg.Wait()
}

// listDir reads dir's names to the end, unsorted: the READDIRPLUS answers
// are the point, not the names.
func listDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Readdirnames(-1)
	return err
}
