// Package measure is how the bench subcommands time a pass and report it:
// files/s and MB/s of what a pass read, what it cost the machine, the
// store and the process doing the work, the store's own raw-GET rate that
// the read benchmarks compare with, timed listings, and lists of
// per-round figures.
package measure
