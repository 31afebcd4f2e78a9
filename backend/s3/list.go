package s3

import (
	"context"
	"strings"
	"sync"

	"github.com/dsmount/dsmount/backend"
)

// Listing a large prefix page by page is a walk of round trips: 1.28M keys
// are 1,281 pages of 1,000, each a full round trip to the store (over a
// minute at 50 ms). The store answers many listings at once, so List walks
// the tree in parallel:
//
//   - A prefix is first listed with Delimiter "/": its own objects come
//     back, and its subdirectories as CommonPrefixes.
//   - A prefix with few subdirectories (up to the parallelism) lists each
//     of them the same way, recursively.
//   - A prefix with more (ImageNet's train/ has 1,000) splits its key range
//     at subdirectory boundaries into groups and lists each group's range
//     flat (no delimiter, StartAfter the group's first subdirectory,
//     stopping at the next group's): a page then carries 1,000 keys
//     whatever the subdirectories hold, where a listing per subdirectory
//     would cost a round trip for each, even for a directory of one file.
//
// A flat prefix of a million keys with no '/' in them is still one
// sequential walk: nothing says where to split it.

// defaultListParallel is how many listings run at once.
const defaultListParallel = 32

// listGroupsPerWorker sets how finely a split prefix is cut: several groups
// per worker, so one group of unusually large directories doesn't leave
// the others idle at the end.
const listGroupsPerWorker = 4

// listTask is one listing: a prefix listed with the delimiter (to == ""
// and !flat), or the flat key range [from, to) of prefix ("" to: the end
// of the prefix).
type listTask struct {
	prefix   string
	flat     bool
	from, to string
}

// lister runs one List: its tasks, their workers and the caller's fn.
type lister struct {
	b        *Backend
	ctx      context.Context
	cancel   context.CancelFunc
	parallel int

	fnMu sync.Mutex // fn is called by one worker at a time
	fn   func(backend.Object) error

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []listTask
	running int   // tasks being worked on
	err     error // the first failure; ends the walk
}

// List calls fn for every object under the prefix, with keys relative to it,
// listing parts of the prefix in parallel (see above); fn is never called
// concurrently. Directory markers ("dir/") are passed through; the prefix's
// own marker, whose relative key would be empty, is not.
func (b *Backend) List(ctx context.Context, fn func(backend.Object) error) error {
	if b.conns.isClosed() {
		return backend.Wrap("list", b.id, backend.ErrUnavailable, errClosed{})
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l := &lister{b: b, ctx: ctx, cancel: cancel, fn: fn, parallel: b.listParallel}
	if l.parallel <= 0 {
		l.parallel = defaultListParallel
	}
	l.cond = sync.NewCond(&l.mu)
	l.queue = []listTask{{prefix: b.prefix}}
	var wg sync.WaitGroup
	for range l.parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.work()
		}()
	}
	wg.Wait()
	return l.err
}

// work runs tasks until none is left and none is running (nothing more can
// come), or the walk failed. Its page decoder keeps its buffers from one
// page and task to the next.
func (l *lister) work() {
	dec := new(pageDecoder)
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		for len(l.queue) == 0 && l.running > 0 && l.err == nil {
			l.cond.Wait()
		}
		if l.err != nil || len(l.queue) == 0 {
			l.cond.Broadcast()
			return
		}
		t := l.queue[len(l.queue)-1]
		l.queue = l.queue[:len(l.queue)-1]
		l.running++
		l.mu.Unlock()
		more, err := l.run(t, dec)
		l.mu.Lock()
		l.running--
		if err != nil && l.err == nil {
			l.err = err
			l.cancel()
		}
		l.queue = append(l.queue, more...)
		l.cond.Broadcast()
	}
}

// run lists one task and returns the tasks it found.
func (l *lister) run(t listTask, dec *pageDecoder) ([]listTask, error) {
	if t.flat {
		return nil, l.listRange(t, dec)
	}
	var subdirs []string
	err := l.pages(dec, listQuery{prefix: t.prefix, delimiter: "/"}, func(page *listPage) error {
		if err := l.emit(page.objs, ""); err != nil {
			return err
		}
		subdirs = append(subdirs, page.prefixes...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return splitSubdirs(t.prefix, subdirs, l.parallel), nil
}

// splitSubdirs makes the tasks that list the subdirectories of prefix
// (sorted, as the store lists them): one delimited listing each when they
// are few, else flat ranges of several.
func splitSubdirs(prefix string, subdirs []string, parallel int) []listTask {
	if len(subdirs) <= parallel {
		tasks := make([]listTask, len(subdirs))
		for i, d := range subdirs {
			tasks[i] = listTask{prefix: d}
		}
		return tasks
	}
	groups := min(len(subdirs), parallel*listGroupsPerWorker)
	tasks := make([]listTask, 0, groups)
	for g := range groups {
		first := g * len(subdirs) / groups
		t := listTask{prefix: prefix, flat: true, from: subdirs[first]}
		if g+1 < groups {
			t.to = subdirs[(g+1)*len(subdirs)/groups]
		}
		tasks = append(tasks, t)
	}
	return tasks
}

// listRange lists the keys of t.prefix in [t.from, t.to) without a
// delimiter. StartAfter is exclusive and a key equal to from may exist
// (a directory marker), so the listing starts just before from (from
// without its final '/').
func (l *lister) listRange(t listTask, dec *pageDecoder) error {
	q := listQuery{prefix: t.prefix, startAfter: strings.TrimSuffix(t.from, "/")}
	err := l.pages(dec, q, func(page *listPage) error {
		// Keys before from, and the prefix's own objects (keys with no
		// '/' after the prefix), which its delimited listing passed on,
		// are not the range's.
		objs := page.objs[:0]
		for _, o := range page.objs {
			if o.key >= t.from && strings.HasPrefix(o.key, t.prefix) && strings.IndexByte(o.key[len(t.prefix):], '/') >= 0 {
				objs = append(objs, o)
			}
		}
		return l.emit(objs, t.to)
	})
	if err == errRangeEnd {
		return nil
	}
	return err
}

// errRangeEnd stops a range's listing at its end.
var errRangeEnd = rangeEnd{}

type rangeEnd struct{}

func (rangeEnd) Error() string { return "end of the listed range" }

// emit passes objs to fn in order, up to (not including) the first key >=
// to (when to is set), where it returns errRangeEnd.
func (l *lister) emit(objs []listObject, to string) error {
	l.fnMu.Lock()
	defer l.fnMu.Unlock()
	for i := range objs {
		o := &objs[i]
		if to != "" && o.key >= to {
			return errRangeEnd
		}
		key := strings.TrimPrefix(o.key, l.b.prefix)
		if key == "" {
			continue
		}
		err := l.fn(backend.Object{
			Key:     key,
			Size:    o.size,
			ModTime: o.modTime,
			Version: l.b.versionOf(&o.etag, &o.modTime),
		})
		if err != nil {
			return err
		}
	}
	return nil
}
