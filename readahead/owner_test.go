package readahead

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestJobsBelongToTheirDeclarer: jobs are named per user: another user's
// declaration of a name makes a job of its own and leaves the first
// user's alone, and ending a name ends the caller's own job, except that
// an overriding caller (root, the mount's owner) with no job of that name
// ends every user's; a user has at most MaxJobsPerUser jobs on a mount
// unless overriding; stats name each job's owner; a job with no declaring
// process counts reads by its owner alone, unless its declarer overrides.
func TestJobsBelongToTheirDeclarer(t *testing.T) {
	_, m, items := newTestMount(t, 2)
	a, b := m.objs[items[0].Ref], m.objs[items[1].Ref]
	declare := func(job string, owner uint32, override bool) error {
		_, err := m.Declare(Declaration{Job: job, Current: items, Owner: owner, Override: override})
		return err
	}
	job := func(name string, owner uint32) (JobStats, bool) {
		for _, j := range m.Jobs() {
			if j.Name == name && j.UID == owner {
				return j, true
			}
		}
		return JobStats{}, false
	}
	if err := declare("train", 1000, false); err != nil {
		t.Fatal(err)
	}
	if err := declare("train", 2000, false); err != nil {
		t.Fatal(err)
	}
	if js := m.Jobs(); len(js) != 2 {
		t.Fatalf("two users' jobs named train: %+v; want two jobs", js)
	}
	// Another user's reads don't count for a job with no declaring process.
	m.Observe(a, items[0].ID, 0, 2000)
	if j, _ := job("train", 1000); j.Read != 0 {
		t.Errorf("user 2000's read counted for user 1000's job: %+v", j)
	}
	if j, _ := job("train", 2000); j.Read != 1 {
		t.Errorf("user 2000's read not counted for its own job: %+v", j)
	}
	if !m.End("train", 2000, false) {
		t.Error("user 2000 could not end its own job")
	}
	if _, ok := job("train", 1000); !ok {
		t.Fatal("user 2000 ending its train ended user 1000's")
	}
	if m.End("train", 2000, false) {
		t.Error("user 2000 ended a job it no longer has")
	}
	if !m.End("train", 0, true) {
		t.Error("an overriding end of a name it has no job of ended nothing")
	}
	if _, ok := job("train", 1000); ok {
		t.Error("an overriding end left user 1000's job")
	}
	for i := range MaxJobsPerUser {
		if err := declare(fmt.Sprint("j", i), 2000, false); err != nil {
			t.Fatalf("job %d of %d: %v", i+1, MaxJobsPerUser, err)
		}
	}
	if err := declare("one-more", 2000, false); !errors.Is(err, ErrTooManyJobs) {
		t.Errorf("job %d of a user: %v; want ErrTooManyJobs", MaxJobsPerUser+1, err)
	}
	if err := declare("theirs", 3000, false); err != nil {
		t.Errorf("another user's first job while one user has its most: %v", err)
	}
	if err := declare("root", 0, true); err != nil {
		t.Fatal(err)
	}
	m.End("theirs", 3000, false) // else the read would count for one of the two
	m.Observe(b, items[1].ID, 0, 3000)
	if j, _ := job("root", 0); j.Read != 1 {
		t.Errorf("an overriding declarer's job did not count another user's read: %+v", j)
	}
}

// TestAnonymousReadsCountForOneJob: of two jobs declared with no training
// process (as `dsmount order` without --pid does), a read counts for the
// one whose own reads are nearest the item's position in its order, not
// for both: two shuffled orders of one dataset hold every item, and
// counting each read for every job that still needs it moved every job
// with the union of all reads.
func TestAnonymousReadsCountForOneJob(t *testing.T) {
	const n = 2000
	_, m, items := newTestMount(t, n)
	rng := rand.New(rand.NewPCG(1, 2))
	orders := make([][]Item, 2)
	for j := range orders {
		orders[j] = make([]Item, n)
		for i, k := range rng.Perm(n) {
			orders[j][i] = items[k]
		}
		if _, err := m.Declare(Declaration{Job: fmt.Sprint("job", j), Current: orders[j], Owner: 0, Override: true}); err != nil {
			t.Fatal(err)
		}
	}
	// Job 0 reads the first half of its order, four at a time out of
	// order; job 1 reads nothing.
	for i := 0; i < n/2; i += 4 {
		for _, k := range []int{i + 2, i, i + 3, i + 1} {
			m.Observe(m.objs[orders[0][k].Ref], orders[0][k].ID, 0, 0)
		}
	}
	byName := map[string]JobStats{}
	for _, j := range m.Jobs() {
		byName[j.Name] = j
	}
	if j := byName["job0"]; j.TotalReads != n/2 || j.Frontier < n/2-minLag {
		t.Errorf("the reading job: %d reads counted, frontier %d; want %d, about %d", j.TotalReads, j.Frontier, n/2, n/2)
	}
	if j := byName["job1"]; j.TotalReads > n/50 {
		t.Errorf("the job that read nothing was counted %d of the other's %d reads (frontier %d)", j.TotalReads, n/2, j.Frontier)
	}
}
