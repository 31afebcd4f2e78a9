package readahead

import (
	"github.com/dsmount/dsmount/cache"
)

// distance is Belady's distance of id over all jobs: the fewest items any
// job reads before it needs id; false if no job's declared orders still
// name it. r.mu is held (read).
func (r *Registry) distance(id cache.ObjectID) (int64, bool) {
	best, found := int64(0), false
	for _, j := range r.allJobs() {
		if d, ok := j.distance(id); ok && (!found || d < best) {
			best, found = d, true
		}
	}
	return best, found
}

// distance is how many of its items the job reads, from its furthest
// read, before it needs id, and whether it ever does (in the declared
// orders).
//
// A need that the kernel's page cache may serve (another job read the
// file moments ago) still counts: skipping such needs, on a page cache
// bounded below the dataset, lost more hits than it saved, because what
// the page cache holds when the need comes can't be known from here.
func (j *job) distance(id cache.ObjectID) (int64, bool) {
	// From the furthest read, not the frontier: the job's readers are
	// there (the frontier trails them by the readers' spread, and by
	// reads the kernel served from its page cache that the daemon never
	// saw), and an item between frontier and head is needed now or was
	// read unseen.
	if p, ok := j.cur.posOf(id); ok && !j.read[p] {
		return int64(max(int(p)-j.head, 0)), true
	}
	if j.next != nil {
		if q, ok := j.next.posOf(id); ok {
			return int64(len(j.cur.items) - j.head + int(q)), true
		}
	}
	return 0, false
}
