package fs

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// On a mount other users may read (--allow-other), any of them can open
// control sessions. A request answers to its caller: the user who owns the
// mount (the daemon's user) and root may see and change everything; any
// other user sees and changes only its own jobs, sees only the mount it
// asks through, and is held to smaller bounds (sessions open at once,
// request bytes), so that one user can neither steer nor starve another's
// training, nor learn what else the node mounts.

// Caller is who sent a control request.
type Caller struct {
	PID int    // the process that wrote the request
	UID uint32 // its user
	// Privileged: root, or the mount's owner.
	Privileged bool
}

const (
	// maxRequestBytes bounds a privileged caller's control request (a warm
	// or order list of millions of paths fits); maxUserRequestBytes
	// another user's, about a million paths. Bytes past the bound are
	// refused (EFBIG) as they are written, never buffered or parsed.
	maxRequestBytes     = 512 << 20
	maxUserRequestBytes = 64 << 20
	// maxUserSessions bounds the control sessions another user may hold
	// open at once on a mount (each may buffer a request);
	// maxPrivilegedSessions the owner's and root's.
	maxUserSessions       = 8
	maxPrivilegedSessions = 256
)

// nobodyUID stands for a caller the kernel didn't name: never privileged.
const nobodyUID = 65534

// caller identifies the process behind a FUSE request. One the kernel
// doesn't name is nobody: not privileged (it fails closed).
func (m *Mount) caller(ctx context.Context) Caller {
	c := Caller{PID: callerPID(ctx), UID: callerUID(ctx)}
	c.Privileged = c.UID == 0 || c.UID == m.uid
	return c
}

func (c Caller) maxRequest() int {
	if c.Privileged {
		return maxRequestBytes
	}
	return maxUserRequestBytes
}

// openSession counts a control session of c's user, or refuses it (EAGAIN)
// when the user has as many open as its bound.
func (m *Mount) openSession(c Caller) syscall.Errno {
	limit := maxUserSessions
	if c.Privileged {
		limit = maxPrivilegedSessions
	}
	m.sessMu.Lock()
	defer m.sessMu.Unlock()
	if m.sessionsOf[c.UID] >= limit {
		if m.refusals.Add(1) <= 100 {
			m.log.Warn("control session refused: the user has too many open", "uid", c.UID, "open", m.sessionsOf[c.UID])
		}
		return syscall.EAGAIN
	}
	m.sessionsOf[c.UID]++
	return 0
}

func (m *Mount) closeSession(c Caller) {
	m.sessMu.Lock()
	defer m.sessMu.Unlock()
	if m.sessionsOf[c.UID]--; m.sessionsOf[c.UID] <= 0 {
		delete(m.sessionsOf, c.UID)
	}
}

// ownsProcess reports whether pid is a process of uid's: its real user,
// from /proc/PID/status (the /proc entry's owner is root for a process
// that is not dumpable).
func ownsProcess(uid uint32, pid int) error {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return fmt.Errorf("no process %d", pid)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Uid:" {
			if f[1] == strconv.FormatUint(uint64(uid), 10) {
				return nil
			}
			break
		}
	}
	return fmt.Errorf("process %d is not one of yours", pid)
}
