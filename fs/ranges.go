package fs

import (
	"cmp"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/dsmount/dsmount/backend"
	"github.com/dsmount/dsmount/cache"
	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/readahead"
)

// Declared ranges: samples that are byte ranges of files.
//
// A job whose samples are windows of a token file, documents of an
// indexed dataset or records of an LMDB declares them as (file, offset,
// length), in the order it will read them (control's ranges payload). A
// range is a second kind of item in the same declared order as a file:
//
//   - Of a file the cache can hold, the item is the whole file (the range
//     (0, size)), fetched once and kept as any declared file is.
//   - Of a bigger file, the item is the range rounded out to whole pages,
//     as a cache object of its own (backend.RangeOf): prefetched in the
//     job's order, kept and evicted by its next use (the order policy),
//     pushed into the kernel's page cache ahead of the readers, and read
//     back by the file's READs that fall in it (rangeread.go). Ranges
//     next to each other in the order, of one file, whose pages touch or
//     overlap, are one item (up to rangeMergeMax).
//
// An item's Ref is a file's tree index, or rangeRef with the index of
// its range in the declaration's rangeObjects.

const (
	// rangeRef marks an Item's Ref as a range object's.
	rangeRef = 1 << 31
	// rangePage is what a range is rounded out to: the kernel's page, the
	// unit in which it keeps and asks for a file's bytes.
	rangePage = 4096
	// rangeMergeMax bounds the range object that consecutive declared
	// ranges are merged into.
	rangeMergeMax = 1 << 20
	// maxRangeLength bounds one declared range: a sample bigger than this
	// is a file's worth, and is read by the file's own readahead.
	maxRangeLength = 64 << 20
	// rangeReadaheadKB is the mount's kernel readahead while a job reads
	// declared ranges of a file bigger than the cache: a read of a page
	// that was not pushed asks the daemon for this much around it, from
	// the store, where the job wanted a few KiB.
	rangeReadaheadKB int32 = 4
)

// declaredRange is a range object of a declaration: n bytes of file (a
// tree index) from off.
type declaredRange struct {
	file uint32
	off  int64
	n    int64
}

// rangeObjects resolves the items of one declaration of ranges.
type rangeObjects struct {
	tree   *tree
	ranges []declaredRange
}

func (r *rangeObjects) Object(ref uint32) backend.Object {
	if ref&rangeRef == 0 {
		return r.tree.Object(ref)
	}
	d := r.ranges[ref&^rangeRef]
	return backend.RangeOf(r.tree.Object(d.file), d.off, d.n)
}

func (r *rangeObjects) Empty(ref uint32) bool {
	if ref&rangeRef == 0 {
		return r.tree.Empty(ref)
	}
	return false
}

// rangeSpan is a range object in the read path's index: the file's bytes
// [start, end) are object id.
type rangeSpan struct {
	start, end int64
	id         cache.ObjectID
}

// fileSpans are a file's declared range objects, by start; longest
// bounds how far before a read's offset one that covers it may start.
type fileSpans struct {
	spans   []rangeSpan
	longest int64
}

// rangeIndex is one job's declared range objects, current and next
// epoch's, by file.
type rangeIndex map[uint32]*fileSpans

// declaredRanges are the mount's jobs' range indexes. Reads of a mount
// with none pay one atomic load.
type declaredRanges struct {
	mu    sync.RWMutex
	jobs  map[string]rangeIndex // by jobRangesKey
	count atomic.Int32          // len(jobs)
}

func jobRangesKey(owner uint32, job string) string {
	return strconv.FormatUint(uint64(owner), 10) + "/" + job
}

// set makes idx job's (owner's) range index; nil forgets it.
func (d *declaredRanges) set(owner uint32, job string, idx rangeIndex) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := jobRangesKey(owner, job)
	if idx == nil {
		delete(d.jobs, k)
	} else {
		if d.jobs == nil {
			d.jobs = make(map[string]rangeIndex)
		}
		d.jobs[k] = idx
	}
	d.count.Store(int32(len(d.jobs)))
}

// of appends file's span lists, one per job that declared ranges of it.
func (d *declaredRanges) of(file uint32, out []*fileSpans) []*fileSpans {
	if d.count.Load() == 0 {
		return out
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, idx := range d.jobs {
		if fs := idx[file]; fs != nil {
			out = append(out, fs)
		}
	}
	return out
}

// errBadRange refuses a declaration of ranges: it changes nothing.
var errBadRange = errors.New("order")

// orderRanges serves an "order" request whose samples are ranges.
func (m *Mount) orderRanges(req control.Request, c Caller, emit func(control.Event)) {
	fail := func(err error) { emit(control.Event{Type: "error", Error: err.Error()}) }
	if len(req.Ranges) > readahead.MaxDeclared || len(req.NextRanges) > readahead.MaxDeclared {
		fail(fmt.Errorf("order: %w", readahead.ErrTooMany))
		return
	}
	if len(req.Ranges) == 0 {
		fail(fmt.Errorf("order: %w", readahead.ErrEmpty))
		return
	}
	files, err := m.rangeFiles(req.Paths)
	if err != nil {
		fail(err)
		return
	}
	objs := &rangeObjects{tree: m.tree, ranges: make([]declaredRange, 0, len(req.Ranges)+len(req.NextRanges))}
	cur, err := m.rangeItems(objs, files, req.Ranges, "")
	if err != nil {
		fail(err)
		return
	}
	next, err := m.rangeItems(objs, files, req.NextRanges, "next epoch's ")
	if err != nil {
		fail(err)
		return
	}
	pid, err := declaringPID(req, c)
	if err != nil {
		fail(err)
		return
	}
	got, err := m.ra.Declare(readahead.Declaration{Job: req.Job, Epoch: req.Epoch, Current: cur, Next: next, Objects: objs, Pusher: m, PushFetched: true, PID: pid,
		Owner: c.UID, Override: c.Privileged})
	if err != nil {
		fail(fmt.Errorf("order: job %q: %w", req.Job, err))
		return
	}
	idx := buildRangeIndex(objs, cur, next)
	m.ranges.set(c.UID, req.Job, idx)
	if len(idx) > 0 {
		m.boundReadahead(rangeReadaheadKB, "declared ranges of a file bigger than the cache")
	}
	res := &control.OrderResult{Job: req.Job, Epoch: req.Epoch, SkippedExamples: []string{},
		Declared: got.Current, NextDeclared: got.Next, Duplicates: got.Duplicates}
	m.log.Info("order declared", "job", req.Job, "epoch", req.Epoch, "ranges", len(req.Ranges), "items", got.Current,
		"next_ranges", len(req.NextRanges), "next_items", got.Next, "range_objects", len(objs.ranges), "duplicates", got.Duplicates)
	emit(control.Event{Type: "result", Order: res})
}

// rangeFiles resolves a declaration's files: every one must be a file of
// the mount.
func (m *Mount) rangeFiles(paths []string) ([]entry, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: ranges name no files", errBadRange)
	}
	files := make([]entry, len(paths))
	for i, p := range paths {
		e, ok := m.tree.lookup(p)
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: file %d of the ranges, %q, is not in this mount", errBadRange, i, p)
		case e.isDir():
			return nil, fmt.Errorf("%w: file %d of the ranges, %q, is a directory", errBadRange, i, p)
		}
		files[i] = e
	}
	return files, nil
}

// rangeItems turns declared ranges into items, adding range objects to
// objs: the whole file for a file the cache can hold, else the range's
// pages, merged with the previous item's where they touch. Any range
// outside its file refuses the whole declaration.
func (m *Mount) rangeItems(objs *rangeObjects, files []entry, ranges []control.Range, which string) ([]readahead.Item, error) {
	items := make([]readahead.Item, 0, len(ranges))
	wholeIDs := make(map[uint32]cache.ObjectID)
	parents := make([]backend.Object, len(files))
	for i, e := range files {
		parents[i] = m.tree.obj(e)
	}
	last := -1 // objs.ranges index of the previous item, if a range object
	for i, r := range ranges {
		if int(r.File) >= len(files) {
			return nil, fmt.Errorf("%w: %srange %d names file %d of %d", errBadRange, which, i, r.File, len(files))
		}
		e, obj := files[r.File], parents[r.File]
		switch {
		case r.Length == 0:
			return nil, fmt.Errorf("%w: %srange %d of %q has length 0", errBadRange, which, i, obj.Key)
		case r.Length > maxRangeLength:
			return nil, fmt.Errorf("%w: %srange %d of %q has %d bytes; a range may have at most %d", errBadRange, which, i, obj.Key, r.Length, maxRangeLength)
		case r.Offset > obj.Size-int64(r.Length):
			return nil, fmt.Errorf("%w: %srange %d (%d bytes at %d) is past the end of %q (%d bytes)", errBadRange, which, i, r.Length, r.Offset, obj.Key, obj.Size)
		}
		if !m.tooBigToCache(obj) {
			id, ok := wholeIDs[e.idx]
			if !ok {
				id = m.src.ObjectID(obj)
				wholeIDs[e.idx] = id
			}
			items = append(items, readahead.Item{Ref: e.idx, ID: id})
			last = -1
			continue
		}
		start := r.Offset &^ (rangePage - 1)
		end := min((r.Offset+int64(r.Length)+rangePage-1)&^(rangePage-1), obj.Size)
		if last >= 0 {
			prev := &objs.ranges[last]
			if prev.file == e.idx && start <= prev.off+prev.n && end >= prev.off && max(end, prev.off+prev.n)-min(start, prev.off) <= rangeMergeMax {
				lo, hi := min(start, prev.off), max(end, prev.off+prev.n)
				prev.off, prev.n = lo, hi-lo
				continue
			}
		}
		if len(objs.ranges) >= rangeRef {
			return nil, fmt.Errorf("order: %w", readahead.ErrTooMany)
		}
		objs.ranges = append(objs.ranges, declaredRange{file: e.idx, off: start, n: end - start})
		last = len(objs.ranges) - 1
		items = append(items, readahead.Item{Ref: rangeRef | uint32(last)})
	}
	m.rangeIDs(objs, items)
	return items, nil
}

// rangeIDs names the range objects of items (those with no ID yet), on
// every CPU: hashing a million keys is most of a declaration's time.
func (m *Mount) rangeIDs(objs *rangeObjects, items []readahead.Item) {
	const per = 16384
	parts := (len(items) + per - 1) / per
	workers := min(runtime.GOMAXPROCS(0), parts)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				p := int(next.Add(1)) - 1
				if p >= parts {
					return
				}
				for i := p * per; i < min((p+1)*per, len(items)); i++ {
					it := &items[i]
					if it.Ref&rangeRef == 0 {
						continue
					}
					d := objs.ranges[it.Ref&^rangeRef]
					it.ID = m.src.RangeID(objs.tree.Object(d.file), d.off, d.n)
				}
			}
		}()
	}
	wg.Wait()
}

// buildRangeIndex indexes the range objects of cur and next by file, for
// the file's READs.
func buildRangeIndex(objs *rangeObjects, cur, next []readahead.Item) rangeIndex {
	idx := make(rangeIndex)
	count := make(map[uint32]int)
	for _, items := range [][]readahead.Item{cur, next} {
		for _, it := range items {
			if it.Ref&rangeRef != 0 {
				count[objs.ranges[it.Ref&^rangeRef].file]++
			}
		}
	}
	for f, n := range count {
		idx[f] = &fileSpans{spans: make([]rangeSpan, 0, n)}
	}
	for _, items := range [][]readahead.Item{cur, next} {
		for _, it := range items {
			if it.Ref&rangeRef == 0 {
				continue
			}
			d := objs.ranges[it.Ref&^rangeRef]
			fs := idx[d.file]
			fs.spans = append(fs.spans, rangeSpan{start: d.off, end: d.off + d.n, id: it.ID})
			fs.longest = max(fs.longest, d.n)
		}
	}
	for _, fs := range idx {
		fs.spans = slices.Compact(sortSpans(fs.spans))
	}
	return idx
}

// sortSpans sorts spans by start, then end. A span starts at a page: for
// files under 16 TiB its page number and its index in spans make one
// uint64 key, and a million keys sort several times faster than the
// spans themselves.
func sortSpans(spans []rangeSpan) []rangeSpan {
	byStartEnd := func(a, b rangeSpan) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.end, b.end))
	}
	if len(spans) < 1024 || len(spans) >= 1<<32 || spans[len(spans)-1].start>>12 >= 1<<32 {
		slices.SortFunc(spans, byStartEnd)
		return spans
	}
	keys := make([]uint64, len(spans))
	for i, s := range spans {
		if s.start>>12 >= 1<<32 {
			slices.SortFunc(spans, byStartEnd)
			return spans
		}
		keys[i] = uint64(s.start>>12)<<32 | uint64(i)
	}
	slices.Sort(keys)
	out := make([]rangeSpan, len(spans))
	for i, k := range keys {
		out[i] = spans[uint32(k)]
	}
	// Spans of one start, in declaration order: put them by end.
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && out[j].start == out[i].start {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(out[i:j], byStartEnd)
		}
		i = j
	}
	return out
}
