package readahead

import (
	"errors"
	"fmt"
)

// Bounds of a declaration and of the jobs it makes.
const (
	// MaxDeclared bounds one epoch's declaration.
	MaxDeclared = 10_000_000
	// MaxJobsPerUser bounds the jobs one user may have on a mount, except
	// where a declaration may override ownership (root, the mount's
	// owner): a user of a shared node can't fill the registry.
	MaxJobsPerUser = 16
	// MaxJobsPerMount bounds a mount's jobs, every user's together, the
	// overriding ones' included: each read on the mount looks at every
	// job of it (Observe), so the jobs of a node's many users, or a
	// script declaring a job per run and never ending them, must not
	// make every read slower without bound. A declaration that would
	// make one more is refused (ErrTooManyJobsOnMount); redeclaring an
	// existing job is always allowed.
	MaxJobsPerMount = 256
)

// Errors of Declare. They are plain values the control entry reports.
var (
	ErrEmpty   = errors.New("the declared order names no files")
	ErrTooMany = fmt.Errorf("a declared order may name at most %d files", MaxDeclared)
	ErrNoJob   = errors.New("no job name")
	// ErrTooManyJobs: the user has MaxJobsPerUser jobs on the mount.
	ErrTooManyJobs = fmt.Errorf("a user may have at most %d jobs on a mount: end one first", MaxJobsPerUser)
	// ErrTooManyJobsOnMount: the mount has MaxJobsPerMount jobs.
	ErrTooManyJobsOnMount = fmt.Errorf("a mount may have at most %d jobs, all users' together: end one first", MaxJobsPerMount)
)

// roomForJob is why the mount may not take a new job of owner's (nil if
// it may): MaxJobsPerUser unless override, MaxJobsPerMount regardless;
// r.mu is held.
func (m *Mount) roomForJob(owner uint32, override bool) error {
	switch {
	case !override && m.jobsOf(owner) >= MaxJobsPerUser:
		return ErrTooManyJobs
	case len(m.jobs) >= MaxJobsPerMount:
		return ErrTooManyJobsOnMount
	}
	return nil
}

// jobsOf counts the mount's jobs owned by uid; r.mu is held.
func (m *Mount) jobsOf(uid uint32) int {
	n := 0
	for k := range m.jobs {
		if k.owner == uid {
			n++
		}
	}
	return n
}
