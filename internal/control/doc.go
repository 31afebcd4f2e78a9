// Package control is the wire protocol between dsmount's clients and its
// daemon, version 1: the types of both channels, their parsers, and this
// document, which is the protocol's specification. The daemon (fs, for the
// control entry; internal/daemon, for the socket), the Go CLI
// (cmd/dsmount) and the Python package (python/dsmount/control.py) all
// follow it; python_test.go checks the Python client against
// these types (the same field names, ops, event types and error codes).
//
// # Versions
//
// Every request may carry "version" (absent or 0 means 1). A daemon
// refuses a request of a version newer than its own with one error line
// (code "unsupported_version" on the control entry). Within a version,
// fields are only ever added, with omitempty, and a reader ignores
// fields it does not know: an old client talks to a newer daemon, and a
// newer client's added fields are ignored by an old one. A change a
// client can't ignore takes a new version.
//
// # Channel 1: the control entry (warm, order, stats)
//
// Any process that sees a mount talks to its daemon through the mount
// itself, so a container given only the mount can warm and declare.
//
//  1. Create, O_CREAT|O_EXCL and read-write, a new file named
//     EntryName + "." + anything unique at the mount's root
//     (".dsmount-control.4242-9f3a"). Creation reaches the daemon even on
//     a mount whose fast path answers OPEN with ENOSYS. The entry exists
//     only while open and is never listed. (On other mounts, opening
//     EntryName itself read-write works too.)
//  2. Write one JSON Request ended by '\n', then the payload it
//     announces, if any, in as many writes as needed.
//  3. Read JSON Event lines until end of file. Closing the file early
//     cancels the request (on a no-open mount the kernel does not say so:
//     there a request runs to its end).
//
// The payload carries, in this order and each only if announced by its
// length: PathsBytes of the epoch's paths, NextBytes of the next epoch's
// (each path ended by a NUL byte; no path of a mount holds one), then
// TableBytes of a path table (NUL-ended paths, named by TableName of
// these bytes), IndicesBytes and NextIndicesBytes of indices into the
// table (little-endian uint32). Paths are relative to the mount's root.
// A million paths as a JSON array cost the daemon a second of decoding
// and a string each; as a payload, a scan (Buffer).
//
// Examples, one request line each (→) and the events (←):
//
//	→ {"op":"stats"}
//	← {"type":"result","stats":{"daemon_pid":4242,"mount":{...},"mounts":[...],"cache":{...},"page_cache":{...}}}
//
//	→ {"op":"warm","paths":["train"],"parallel":64}
//	← {"type":"plan","plan":{"files":1000,"bytes":110000000,"bytes_cached":0,"files_cached":0,"cache_free":-1,"fits":true,"not_found":0}}
//	← {"type":"progress","warm":{"files":1000,"files_done":412,...}}
//	← {"type":"result","warm":{"files":1000,"files_done":1000,...,"seconds":1.9}}
//
//	→ {"op":"order","job":"resnet","epoch":0,"paths_bytes":12}
//	  train/a.jpg\0                      (the payload: 12 bytes)
//	← {"type":"result","order":{"job":"resnet","epoch":0,"declared":1,"next_declared":0,"duplicates":0,"skipped":0,"skipped_examples":[]}}
//
//	→ {"op":"order","job":"resnet","epoch":1,"table":"5d41402abc4b2a76b9719d911017c592","indices_bytes":4}
//	  \x00\x00\x00\x00
//	← {"type":"error","error":"order: the declared table is unknown here: send it again","code":"unknown_table"}
//
//	→ {"op":"order","job":"resnet","end":true}
//	← {"type":"result","order":{"job":"resnet",...,"ended":true}}
//
// An "error" event ends a request; its "error" is one line for a person,
// its "code" (CodeUnknownTable, CodeUnsupportedVersion) what a program
// acts on. The limits on a request (its bytes, sessions at once, files an
// epoch, jobs, names, epochs, tables kept) are listed in package fs's
// documentation; each is refused with one error event.
//
// # Channel 2: the daemon's socket (mount)
//
// `dsmount mount` joins a running daemon of its cache dir through the
// unix socket SocketName in that dir (mode 0600, served to the daemon's
// user and root alone). It writes one MountRequest line and reads one
// MountReply line:
//
//	→ {"source":"s3://bucket/imagenet","mountpoint":"/mnt/imagenet","s3_endpoint":"http://127.0.0.1:9000","s3_path_style":true}
//	← {"pid":4242,"files":1281167,"dirs":1000}
//	→ {"source":"/data/coco","mountpoint":"/mnt/coco","chunk_size":8388608}
//	← {"error":"the dsmount daemon (pid 4242) serving /nvme/dsmount has --chunk-size 4194304; drop --chunk-size or use another --cache-dir","pid":4242,"files":0,"dirs":0}
//
// A local source and the mountpoint are absolute paths. Cache settings
// (cache_size, chunk_size, policy) are sent only when the user gave them,
// and must match the daemon's. A request must arrive within 10 s and fit
// in 1 MiB.
//
// A request with "hold" binds the mount to the connection: after its
// MountReply the daemon keeps the connection open while the mount is
// served, and sends one MountEnded line when it is gone, then closes. A
// client that hangs up (or half-closes its side) asks for the mount to be
// unmounted; the daemon answers with the MountEnded line once it is. So a
// process that joined a daemon lives as long as its mount, as a systemd
// service's main process must:
//
//	→ {"source":"/srv/data","mountpoint":"/mnt/b","hold":true}
//	← {"pid":4242,"files":310,"dirs":4}
//	  (the client half-closes: SIGTERM)
//	← {"ended":"unmounted"}
//
// "ended" is "unmounted" (by the client's hang-up, umount or dsmount
// unmount) or "daemon_exiting" (the daemon is stopping and took every
// mount with it). A connection that ends with no such line means the
// daemon died.
//
// # Stability
//
// This package is internal to dsmount: the protocol above is the
// contract, these Go types are its one implementation.
package control

// Version is the protocol version this package speaks.
const Version = 1
