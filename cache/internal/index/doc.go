// Package index owns the cache's index: a badger database under
// <cache dir>/index holding the records that package record encodes. It
// opens it (and refuses a directory of another format), scans the object
// records at start-up, reads an object's record and its chunk records,
// applies the committer's writes, deletes an evicted object's records,
// stores and loads listings, runs the value log's garbage collection, and
// keeps the index's memory-mapped files allocated on disk (Files). No
// other package of dsmount imports badger.
//
// # Invariants
//
//   - The index never decides what a record means: a corrupt record reads
//     as none (logged), and the caller fetches its chunks again.
//   - An object's chunk records are deleted before its object record, so
//     an interrupted deletion never leaves chunks without an owner that
//     the start-up scan would count.
//   - A listing's meta record is written after all of its pages, so a
//     crash mid-save leaves the previous listing whole.
//   - Before any write, Prepare must report room (see Files): badger
//     writes through memory maps, where a write with no block left is a
//     SIGBUS, not an error.
//
// # Locking
//
// badger serialises its own transactions. Files.mu serialises Prepare,
// which the committer, Close, listings and the value-log GC all call. The
// index keeps no other state.
package index
