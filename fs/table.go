package fs

import (
	"errors"
	"fmt"
	"sync"

	"github.com/dsmount/dsmount/cache"
	"github.com/dsmount/dsmount/internal/control"
	"github.com/dsmount/dsmount/readahead"
)

// A path table lets a job declare each epoch's order as indices instead of
// paths. A training job's dataset is a fixed list of files, and each
// epoch's order a permutation of it: the job sends the list once (its
// table), and every declaration after that is 4 bytes a file, resolved by
// array lookups, far cheaper for the daemon than resolving each path.
//
// A table is named by the SHA-256 of its payload (the NUL-ended paths,
// first 16 bytes in hex), which the daemon checks: jobs that list the same
// dataset share one table, and no job can name another's table with
// different contents. A mount keeps its last maxTables tables; a
// declaration naming a table the mount doesn't have (forgotten, or a
// restarted daemon) fails with Code "unknown_table", and the client sends
// the table again.

// maxTables bounds the tables a mount keeps (each is 20 bytes a path).
const maxTables = 4

// noFile marks a table entry that is not a file of the mount.
const noFile = ^uint32(0)

// ErrUnknownTable is the error of a declaration naming a table the mount
// doesn't have; its event carries Code "unknown_table".
var ErrUnknownTable = errors.New("the declared table is unknown here: send it again")

// pathTable is one resolved table: for each path, its file (or noFile) and
// the cache's name for the file's object.
type pathTable struct {
	name string
	refs []uint32
	ids  []cache.ObjectID
	// missing are the first paths that are not files, and why.
	missing []string
}

// tables is a mount's recently used path tables. Guarded by mu.
type tables struct {
	mu   sync.Mutex
	list []*pathTable // most recently used last
}

func (ts *tables) get(name string) *pathTable {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for i, t := range ts.list {
		if t.name == name {
			ts.list = append(append(ts.list[:i:i], ts.list[i+1:]...), t)
			return t
		}
	}
	return nil
}

func (ts *tables) put(t *pathTable) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for i, old := range ts.list {
		if old.name == t.name {
			ts.list = append(ts.list[:i:i], ts.list[i+1:]...)
			break
		}
	}
	if len(ts.list) == maxTables {
		ts.list = ts.list[1:]
	}
	ts.list = append(ts.list, t)
}

// table returns the request's table: the one it carries (checked against
// its name, resolved and kept) or the one it names.
func (m *Mount) table(req control.Request) (*pathTable, error) {
	if req.TablePayload == nil {
		if t := m.tables.get(req.Table); t != nil {
			return t, nil
		}
		return nil, ErrUnknownTable
	}
	if got := control.TableName(req.TablePayload); got != req.Table {
		return nil, fmt.Errorf("the table sent is named %s, not %q", got, req.Table)
	}
	paths, err := control.SplitPaths(req.TablePayload)
	if err != nil {
		return nil, err
	}
	if len(paths) > readahead.MaxDeclared {
		return nil, fmt.Errorf("table: %w", readahead.ErrTooMany)
	}
	t := &pathTable{name: req.Table, refs: make([]uint32, len(paths)), ids: make([]cache.ObjectID, len(paths))}
	// A dataset's file list is nearly always sorted, as the listing is: a
	// path is then most often the file after the one found last, which a
	// look at the next key finds with no probe into the path index (whose
	// random accesses were half the time of a table).
	next := uint32(0)
	for i, p := range paths {
		e, ok := entry{idx: next}, m.tree.isFileKey(next, p) && cleanPath(p)
		if !ok {
			e, ok = m.tree.lookup(p)
		}
		if ok && !e.isDir() {
			next = e.idx + 1
		}
		switch {
		case !ok || e.isDir():
			t.refs[i] = noFile
			if len(t.missing) < maxSkippedExamples {
				why := "not found"
				if ok {
					why = "is a directory"
				}
				t.missing = append(t.missing, fmt.Sprintf("%q: %s", p, why))
			}
		default:
			t.refs[i] = e.idx
			t.ids[i] = m.src.ObjectID(m.tree.obj(e))
		}
	}
	m.tables.put(t)
	return t, nil
}

// tableItems resolves declared indices into t, counting what it skips.
func tableItems(t *pathTable, indices []uint32, res *control.OrderResult) []readahead.Item {
	items := make([]readahead.Item, 0, len(indices))
	for _, i := range indices {
		switch {
		case int(i) >= len(t.refs):
			res.Skipped++
			if len(res.SkippedExamples) < maxSkippedExamples {
				res.SkippedExamples = append(res.SkippedExamples, fmt.Sprintf("index %d: the table has %d paths", i, len(t.refs)))
			}
		case t.refs[i] == noFile:
			res.Skipped++
			if len(res.SkippedExamples) < maxSkippedExamples && len(t.missing) > 0 {
				res.SkippedExamples = append(res.SkippedExamples, fmt.Sprintf("index %d of a table whose paths include %s", i, t.missing[0]))
			}
		default:
			items = append(items, readahead.Item{Ref: t.refs[i], ID: t.ids[i]})
		}
	}
	return items
}
