// Package flight runs loads once per key and bounds how many run: a
// generic singleflight group whose flights a foreground caller can raise
// (Group, Flight), the gate that bounds backend fetches in flight and
// orders who goes next (Gate), and the reused goroutines that flights run
// on (Workers). It knows nothing of chunks or buffers: what a flight
// loads, and who holds it after, is its caller's (Flight.Val).
//
// # Invariants
//
//   - At most one flight per key is in a group; a caller that joins gets
//     the running one. A flight leaves the group only after its run has
//     returned and its result was published.
//   - Gate: free >= 0; a waiter is either queued or granted, never both;
//     a granted waiter owns one slot until it calls Release. Background
//     fetches never take the last reserve slots, and a waiting foreground
//     fetch is granted before any waiting background one.
//   - Workers: every goroutine started by Run is counted until it exits;
//     after Close, Run starts uncounted goroutines only.
//
// # Locking
//
// Group.mu guards the map of flights; Join's joined and the group's left
// run under it, so what they do to a flight's Val is ordered with its
// leaving. Gate.mu guards free and the waiters. Workers.mu guards closed
// against adding to the wait group after Close. No lock is held while a
// flight runs.
package flight
