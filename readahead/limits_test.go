package readahead

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// jobState is what a job's declaration and reads set, without the
// fields that change with the clock (idle time, rates).
type jobState struct {
	Name                               string
	UID                                uint32
	Epoch, Declared, NextDeclared      int
	Read, Frontier                     int
	TotalReads, Stalls, PrefetchHits   int64
	PrefetchEvicted, AdmissionsRefused int64
}

func stateOf(m *testMount, name string, uid uint32) (jobState, bool) {
	for _, j := range m.Jobs() {
		if j.Name == name && j.UID == uid {
			return jobState{j.Name, j.UID, j.Epoch, j.Declared, j.NextDeclared, j.Read, j.Frontier,
				j.TotalReads, j.Stalls, j.PrefetchHits, j.PrefetchEvicted, j.AdmissionsRefused}, true
		}
	}
	return jobState{}, false
}

// TestJobsPerMountBound: a mount takes at most MaxJobsPerMount jobs, every
// user's together and overriding declarers' too; one more is refused with
// ErrTooManyJobsOnMount (one line, naming the bound) and changes nothing:
// an existing job keeps its order and progress, may still declare its
// next epoch, and another mount of the registry is not limited by this
// one's jobs. Ending a job makes room.
func TestJobsPerMountBound(t *testing.T) {
	reg, m, items := newTestMount(t, 8)
	if _, err := m.Declare(Declaration{Job: "keep", Epoch: 3, Current: items, Next: items[:4], Owner: 1000}); err != nil {
		t.Fatal(err)
	}
	m.Observe(m.objs[items[0].Ref], items[0].ID, 0, 1000)
	before, ok := stateOf(m, "keep", 1000)
	if !ok || before.Read != 1 {
		t.Fatalf("the kept job after one read: %+v", before)
	}
	// Fill the mount: users of their own bound each, and overriding jobs.
	for i := 1; i < MaxJobsPerMount; i++ {
		d := Declaration{Job: fmt.Sprint("j", i), Current: items[:2], Owner: uint32(2000 + i/MaxJobsPerUser)}
		if i%5 == 0 {
			// Files the kept job doesn't read: an overriding job
			// competes for every user's reads.
			d.Owner, d.Override, d.Current = 0, true, items[6:]
		}
		if _, err := m.Declare(d); err != nil {
			t.Fatalf("job %d of %d: %v", i+1, MaxJobsPerMount, err)
		}
	}
	for _, d := range []Declaration{
		{Job: "new-user", Current: items, Owner: 9999},
		{Job: "root", Current: items, Owner: 0, Override: true},
	} {
		_, err := m.Declare(d)
		if !errors.Is(err, ErrTooManyJobsOnMount) {
			t.Fatalf("job %d (%s): %v; want ErrTooManyJobsOnMount", MaxJobsPerMount+1, d.Job, err)
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, fmt.Sprint(MaxJobsPerMount)) {
			t.Errorf("error %q: want one line naming the bound", msg)
		}
	}
	if n := len(m.Jobs()); n != MaxJobsPerMount {
		t.Fatalf("%d jobs after the refusals, want %d", n, MaxJobsPerMount)
	}
	if after, _ := stateOf(m, "keep", 1000); after != before {
		t.Fatalf("a refused declaration changed another job:\n before %+v\n after  %+v", before, after)
	}
	// The existing job goes on: its next epoch is declared, its reads count.
	if _, err := m.Declare(Declaration{Job: "keep", Epoch: 4, Current: items[:4], Owner: 1000}); err != nil {
		t.Fatalf("redeclaring an existing job on a full mount: %v", err)
	}
	m.Observe(m.objs[items[1].Ref], items[1].ID, 0, 1000)
	if s, _ := stateOf(m, "keep", 1000); s.Epoch != 4 || s.Declared != 4 || s.Read != 1 {
		t.Errorf("the kept job after its next declaration and a read: %+v", s)
	}
	other := &testMount{reg.Mount("other", m.src), m.objs}
	if _, err := other.Declare(Declaration{Job: "new-user", Current: items, Owner: 9999}); err != nil {
		t.Errorf("another mount of the registry: %v", err)
	}
	if !m.End("j1", 2000, false) {
		t.Fatal("could not end j1")
	}
	if _, err := m.Declare(Declaration{Job: "new-user", Current: items, Owner: 9999}); err != nil {
		t.Errorf("a job after one ended: %v", err)
	}
}

// FuzzDeclare: whatever a declaration holds (repeats, an empty or huge
// epoch number, any name, any owner), Declare keeps each item once in
// order and reports exactly what it kept and left out, or refuses with
// one of its errors; the job it made shows what was declared, and the
// other job on the mount is untouched.
func FuzzDeclare(f *testing.F) {
	_, m, items := newTestMount(f, 64)
	if _, err := m.Declare(Declaration{Job: "keep", Epoch: 1, Current: items[:10], Owner: 1}); err != nil {
		f.Fatal(err)
	}
	m.Observe(m.objs[items[0].Ref], items[0].ID, 0, 1)
	keep, _ := stateOf(m, "keep", 1)
	f.Add("train", 0, []byte{0, 1, 2, 3}, []byte{4, 5}, uint8(2), false)
	f.Add("dup", 7, []byte{1, 1, 1, 2, 2}, []byte{2, 2}, uint8(3), true)
	f.Add("", 0, []byte{1}, []byte{}, uint8(0), false)
	f.Add("keep", 2, []byte{9, 8}, []byte{}, uint8(2), false)
	f.Add("empty", -1, []byte{}, []byte{1}, uint8(4), false)
	f.Add("big", 1<<62, make([]byte, 300), []byte{63}, uint8(5), true)
	f.Fuzz(func(t *testing.T, name string, epoch int, cur, next []byte, owner uint8, override bool) {
		toItems := func(b []byte) []Item {
			out := make([]Item, len(b))
			for i, c := range b {
				out[i] = items[int(c)%len(items)]
			}
			return out
		}
		distinct := func(b []byte) int {
			var seen [256]bool
			n := 0
			for _, c := range b {
				k := int(c) % len(items)
				if !seen[k] {
					seen[k], n = true, n+1
				}
			}
			return n
		}
		uid := uint32(owner)
		if name == "keep" && uid == 1 {
			return // the job that must stay untouched
		}
		got, err := m.Declare(Declaration{Job: name, Epoch: epoch, Current: toItems(cur), Next: toItems(next), Owner: uid, Override: override})
		defer m.End(name, uid, false)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a multi-line error: %q", err)
			}
			switch {
			case errors.Is(err, ErrNoJob) && name == "", errors.Is(err, ErrEmpty) && len(cur) == 0:
			default:
				t.Fatalf("Declare(%q, %d items) refused: %v", name, len(cur), err)
			}
			return
		}
		dc, dn := distinct(cur), distinct(next)
		if got.Current != dc || got.Next != dn || got.Duplicates != len(cur)-dc+len(next)-dn {
			t.Fatalf("declared %d+%d items (%d+%d distinct): got %+v", len(cur), len(next), dc, dn, got)
		}
		s, ok := stateOf(m, name, uid)
		if !ok || s.Epoch != epoch || s.Declared != dc || s.NextDeclared != dn || s.Frontier != 0 {
			t.Fatalf("job %q after declaring epoch %d of %d items, next %d: %+v (found %v)", name, epoch, dc, dn, s, ok)
		}
		if s, _ := stateOf(m, "keep", 1); s != keep {
			t.Fatalf("declaring %q changed the other job: %+v, was %+v", name, s, keep)
		}
	})
}
