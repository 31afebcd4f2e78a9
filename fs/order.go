package fs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"unicode"

	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/readahead"
)

const maxSkippedExamples = 10

const (
	// maxJobName bounds a job's name in bytes: the daemon keeps it, logs
	// it and shows it in stats, and a request may be 512 MiB.
	maxJobName = 256
	// maxEpoch bounds an epoch's number: the next epoch's (Epoch+1) must
	// not wrap round to a negative one.
	maxEpoch = math.MaxInt32
)

// checkJobName refuses a name that stats and logs can't show on one
// line: empty, longer than maxJobName, or holding a control character.
func checkJobName(name string) error {
	if name == "" {
		return errors.New("order: a job name is required")
	}
	if len(name) > maxJobName {
		return fmt.Errorf("order: a job name may have at most %d bytes, not %d", maxJobName, len(name))
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Errorf("order: job name %q holds a control character", name)
		}
	}
	return nil
}

// order serves an "order" request: declare (or end) a job's sample order.
//
// The declaring process (pid) owns the job: reads by it and its
// descendants count for this job alone. The dsmount CLI is a passing
// process, so its declarations are owned by none (pid 0); its --pid flag
// names the training process instead.
func (m *Mount) order(ctx context.Context, req control.Request, c Caller, emit func(control.Event)) {
	fail := func(err error) { emit(control.Event{Type: "error", Error: err.Error()}) }
	if m.ra == nil {
		fail(errors.New("declared orders are not available on this mount"))
		return
	}
	if err := checkJobName(req.Job); err != nil {
		fail(err)
		return
	}
	if req.End {
		ended := m.ra.End(req.Job, c.UID, c.Privileged)
		if ended {
			m.ranges.set(c.UID, req.Job, nil)
		}
		emit(control.Event{Type: "result", Order: &control.OrderResult{Job: req.Job, Ended: ended}})
		return
	}
	if req.Epoch < 0 || req.Epoch > maxEpoch {
		fail(fmt.Errorf("order: epoch %d is outside 0..%d", req.Epoch, maxEpoch))
		return
	}
	if len(req.Ranges)+len(req.NextRanges) > 0 {
		m.orderRanges(req, c, emit)
		return
	}
	byIndex := req.Table != ""
	if byIndex && len(req.Paths)+len(req.Next) > 0 {
		fail(errors.New("order: paths and table indices in one declaration"))
		return
	}
	nCur, nNext := len(req.Paths), len(req.Next)
	if byIndex {
		nCur, nNext = len(req.Indices), len(req.NextIndices)
	}
	if nCur > readahead.MaxDeclared || nNext > readahead.MaxDeclared {
		fail(fmt.Errorf("order: %w", readahead.ErrTooMany))
		return
	}
	if nCur == 0 {
		fail(fmt.Errorf("order: %w", readahead.ErrEmpty))
		return
	}
	res := &control.OrderResult{Job: req.Job, Epoch: req.Epoch, SkippedExamples: []string{}}
	var cur, next []readahead.Item
	if byIndex {
		t, err := m.table(req)
		if errors.Is(err, ErrUnknownTable) {
			emit(control.Event{Type: "error", Error: "order: " + err.Error(), Code: "unknown_table"})
			return
		}
		if err != nil {
			fail(fmt.Errorf("order: %w", err))
			return
		}
		cur, next = tableItems(t, req.Indices, res), tableItems(t, req.NextIndices, res)
	} else {
		cur, next = m.orderItems(req.Paths, res), m.orderItems(req.Next, res)
	}
	if len(cur) == 0 {
		what := "paths"
		if byIndex {
			what = "indexed paths"
		}
		fail(fmt.Errorf("order: none of the %d %s is a file of this mount (first: %s)", nCur, what, res.SkippedExamples[0]))
		return
	}
	pid, err := declaringPID(req, c)
	if err != nil {
		fail(err)
		return
	}
	got, err := m.ra.Declare(readahead.Declaration{Job: req.Job, Epoch: req.Epoch, Current: cur, Next: next, Objects: m.tree, Pusher: m, PID: pid,
		Owner: c.UID, Override: c.Privileged})
	if err != nil {
		fail(fmt.Errorf("order: job %q: %w", req.Job, err))
		return
	}
	// Files now: the job's ranges of an earlier epoch, if any, are no
	// longer what its readers read.
	m.ranges.set(c.UID, req.Job, nil)
	res.Declared, res.NextDeclared, res.Duplicates = got.Current, got.Next, got.Duplicates
	m.log.Info("order declared", "job", req.Job, "epoch", req.Epoch, "files", got.Current, "next", got.Next, "skipped", res.Skipped, "duplicates", got.Duplicates)
	emit(control.Event{Type: "result", Order: res})
}

// declaringPID is the process whose reads (its own and its descendants')
// are the job's: the declaring process, the one the request names
// (--pid), or none.
func declaringPID(req control.Request, c Caller) (int, error) {
	switch {
	case req.PID != 0:
		// Another user's process would take that user's reads from its
		// jobs: only one's own may be named.
		if !c.Privileged {
			if err := ownsProcess(c.UID, req.PID); err != nil {
				return 0, fmt.Errorf("order: --pid %d: %w", req.PID, err)
			}
		}
		return max(req.PID, 0), nil
	case req.Anonymous:
		return 0, nil
	}
	return max(c.PID, 0), nil
}

// orderItems resolves declared paths to files, counting what it skips.
func (m *Mount) orderItems(paths []string, res *control.OrderResult) []readahead.Item {
	items := make([]readahead.Item, 0, len(paths))
	skip := func(p, why string) {
		res.Skipped++
		if len(res.SkippedExamples) < maxSkippedExamples {
			res.SkippedExamples = append(res.SkippedExamples, fmt.Sprintf("%q: %s", p, why))
		}
	}
	for _, p := range paths {
		e, ok := m.tree.lookup(p)
		switch {
		case !ok:
			skip(p, "not found")
		case e.isDir():
			skip(p, "is a directory")
		default:
			items = append(items, readahead.Item{Ref: e.idx, ID: m.src.ObjectID(m.tree.obj(e))})
		}
	}
	return items
}
