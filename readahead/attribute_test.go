package readahead

import (
	"slices"
	"testing"
	"time"

	"github.com/dsmount/dsmount/cache"
)

// attributionJob is a job of owner (declared by pid, 0 if not known) over
// order, whose readers have read positions 0 to reads-1.
func attributionJob(owner uint32, pid int, order []Item, reads int) *job {
	j := &job{}
	j.owner, j.pid = owner, pid
	j.start(newOrder(0, order, sized(1)), time.Unix(1000, 0))
	for p := range reads {
		j.markRead(p, nil, nil)
	}
	return j
}

// progressSnapshot is what a read counted for a job would change.
type progressSnapshot struct {
	frontier, nread, head, spread int
	totalReads                    int64
	read                          []bool
}

func progressOf(j *job) progressSnapshot {
	return progressSnapshot{j.frontier, j.nread, j.head, j.spread, j.totalReads, slices.Clone(j.read)}
}

// TestAttribute: attribute gives a read to the jobs its declaring process
// declared, else to the one job of the reader's user (or a privileged
// declarer's) whose furthest read is nearest the item, if that job wants
// it; and it changes no job.
func TestAttribute(t *testing.T) {
	const n = 1000
	items := make([]Item, n)
	for i := range items {
		items[i].ID = cache.ObjectID{byte(i), byte(i >> 8), 1}
	}
	reversed := slices.Clone(items)
	slices.Reverse(reversed)
	near := attributionJob(1, 0, items, 11)         // head 10
	far := attributionJob(1, 0, reversed, 500)      // head 499 (items[500] and on read)
	theirs := attributionJob(2, 0, items, 13)       // another user's, head 12
	privileged := attributionJob(0, 0, reversed, 0) // any user's reads count
	privileged.anyReader = true
	declared := attributionJob(1, 77, items, 0)
	declaredToo := attributionJob(1, 77, reversed, 0)
	jobs := map[jobKey]*job{
		{1, "near"}: near, {1, "far"}: far, {2, "theirs"}: theirs,
		{0, "privileged"}: privileged, {1, "declared"}: declared, {1, "declared-too"}: declaredToo,
	}

	ended := attributionJob(1, 0, items[:10], 10) // its epoch read, the next declared
	ended.next = newOrder(1, items[10:20], sized(1))
	elsewhere := attributionJob(1, 0, items[100:], 0)

	for _, c := range []struct {
		name string
		jobs map[jobKey]*job
		obs  observation
		want []*job
	}{
		{"declarer: its jobs, all that want it", jobs, observation{id: items[12].ID, declarer: 77, uid: 1}, []*job{declared, declaredToo}},
		{"declarer: none of another process's", jobs, observation{id: items[12].ID, declarer: 78, uid: 1}, nil},
		{"nearest furthest read", jobs, observation{id: items[12].ID, uid: 1}, []*job{near}},
		{"another user's nearest is not the reader's", jobs, observation{id: items[14].ID, uid: 3}, []*job{privileged}},
		{"the user's own nearest", jobs, observation{id: items[14].ID, uid: 2}, []*job{theirs}},
		{"read moments ago by the nearest: no one's", jobs, observation{id: items[520].ID, uid: 1}, nil},
		{"the next order's first item, the mount's only job", map[jobKey]*job{{1, "ended"}: ended}, observation{id: items[10].ID, uid: 1}, []*job{ended}},
		{"the next order's first item, with another job: not surely its own", map[jobKey]*job{{1, "ended"}: ended, {1, "elsewhere"}: elsewhere}, observation{id: items[10].ID, uid: 1}, nil},
	} {
		before := map[*job]progressSnapshot{}
		for _, j := range c.jobs {
			before[j] = progressOf(j)
		}
		got := attribute(c.jobs, c.obs)
		if !sameJobs(got, c.want) {
			t.Errorf("%s: attributed to %d jobs %v, want %v", c.name, len(got), got, c.want)
		}
		for _, j := range c.jobs {
			if !progressEqual(before[j], progressOf(j)) {
				t.Errorf("%s: attribute changed a job's progress", c.name)
			}
		}
	}
}

func sameJobs(a, b []*job) bool {
	if len(a) != len(b) {
		return false
	}
	for _, j := range a {
		if !slices.Contains(b, j) {
			return false
		}
	}
	return true
}

func progressEqual(a, b progressSnapshot) bool {
	return a.frontier == b.frontier && a.nread == b.nread && a.head == b.head && a.spread == b.spread &&
		a.totalReads == b.totalReads && slices.Equal(a.read, b.read)
}
