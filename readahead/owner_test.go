package readahead

import (
	"errors"
	"fmt"
	"testing"

	"github.com/dsmount/dsmount/backend/memory"
	"github.com/dsmount/dsmount/cache"
)

// TestJobsBelongToTheirDeclarer: a job belongs to the user who declared it
// first: another user can neither redeclare nor end it, unless overriding
// (root, the mount's owner); a user has at most MaxJobsPerUser jobs on a
// mount unless overriding; stats name each job's owner.
func TestJobsBelongToTheirDeclarer(t *testing.T) {
	mem := memory.New()
	obj := mem.Put("a", []byte("x"))
	reg := New(Config{NoPrefetch: true})
	defer reg.Close()
	c, err := cache.Open(t.TempDir(), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src := c.Source(mem)
	m := reg.Mount("m", src)
	items := []Item{{Obj: obj, ID: src.ObjectID(obj)}}
	declare := func(job string, owner uint32, override bool) error {
		_, err := m.Declare(Declaration{Job: job, Current: items, Owner: owner, Override: override})
		return err
	}
	if err := declare("train", 1000, false); err != nil {
		t.Fatal(err)
	}
	if err := declare("train", 2000, false); !errors.Is(err, ErrNotOwner) {
		t.Errorf("another user redeclaring: %v; want ErrNotOwner", err)
	}
	if ended, err := m.End("train", 2000, false); ended || !errors.Is(err, ErrNotOwner) {
		t.Errorf("another user ending: ended %v, %v; want ErrNotOwner", ended, err)
	}
	if js := m.Jobs(); len(js) != 1 || js[0].UID != 1000 {
		t.Fatalf("jobs %+v; want train, owned by 1000", js)
	}
	if err := declare("train", 0, true); err != nil {
		t.Errorf("an overriding redeclaration: %v", err)
	}
	if ended, err := m.End("train", 0, true); !ended || err != nil {
		t.Errorf("an overriding end: ended %v, %v", ended, err)
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
}
