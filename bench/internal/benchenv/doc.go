// Package benchenv sets up what the bench subcommands run against: the
// store (MinIO, with toxiproxy in front of it to add a remote store's
// latency) and the flags that shape it, the generated datasets, a run's
// work directory and dsmount binary, and the daemon's memory as /proc
// shows it.
package benchenv
