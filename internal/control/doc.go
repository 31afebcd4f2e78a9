// Package control is the wire protocol between dsmount's clients and its
// daemon, version 3 (Version): the types of both channels, their parsers, and this
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
// # Channel 1: the control entry (warm, order, stats, cached)
//
// Any process that sees a mount talks to its daemon through the mount
// itself, so a container given only the mount can warm and declare. A
// mount's superblock is read-only (so that the kernel keeps a file's
// attributes valid across the reads the daemon serves), so a session
// writes nothing to it: it runs over two ioctls (version 2).
//
//  1. Open, read-only, a new entry named EntryName + "." + anything
//     unique at the mount's root (".dsmount-control.4242-9f3a"). Looking
//     it up makes the entry (a lookup reaches the daemon even on a mount
//     whose fast path answers OPEN with ENOSYS), and its first ioctl
//     starts the session; the entry is never listed, and the daemon
//     forgets it once it is closed.
//  2. Send one JSON Request ended by '\n', then the payload it
//     announces, if any, with IoctlSend, a Chunk at a time.
//  3. Take JSON Event lines with IoctlRecv until its result is 0 (end of
//     the answer). Closing the entry early cancels the request.
//
// A Chunk is ChunkSize bytes: a little-endian uint32 count of the bytes
// it carries (at most ChunkData), 4 zero bytes, then the bytes; the rest
// is ignored by the daemon, and zero in its answers. Where the daemon
// refuses a session (the user holds as many as its bound), the session's
// first ioctl fails with EAGAIN. IoctlSend fails with EFBIG once a
// request grows past its sender's bound, and the answer then says why.
// The ioctls fail with ENOTTY on anything but a session entry (the
// control entry itself included).
//
// Version 1 clients created the session entry read-write (O_CREAT|O_EXCL)
// and wrote and read it; a version 2 daemon's superblock refuses that
// with EROFS. A version 2 client finds no session entry to open on a
// version 1 daemon (ENOENT), and creates one there.
//
// The payload carries, in this order and each only if announced by its
// length: PathsBytes of the epoch's paths, NextBytes of the next epoch's
// (each path ended by a NUL byte; no path of a mount holds one), then
// TableBytes of a path table (NUL-ended paths, named by TableName of
// these bytes), IndicesBytes and NextIndicesBytes of indices into the
// table (little-endian uint32), then (version 3) RangesBytes and
// NextRangesBytes of the epoch's and the next epoch's samples as byte
// ranges of the files that Paths then names: 16 bytes each, little-endian
// offset uint64, length uint32 and file uint32 (an index into Paths). A
// declaration of ranges sends a version of 3: a daemon of version 2
// refuses it whole rather than reading its ranges as paths. Paths are
// relative to the mount's root.
// Paths as a JSON array cost the daemon a slow decode and a string
// each; as a payload, a scan (Buffer).
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
//	→ {"op":"cached","table":"b5b0b91d050b330399ad9c072cac8add","table_bytes":24}
//	  train/a.jpg\0train/b.jpg\0           (the table: 24 bytes)
//	← {"type":"result","cached":{"files":2,"cached":1,"bitmap":"Ag=="}}
//
// A "cached" request names a path table (sending it as an order does, or
// naming one the mount has) and is answered with which of its paths are
// files wholly in the node's cache now (CachedResult: one bit per path,
// path i in byte i/8 under mask 1<<(i%8), base64 in JSON). A distributed
// sampler gathers every node's answer once an epoch.
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
// contract, these Go types are its one implementation. It imports no
// other package of dsmount: the stats answer's types (StatsReport and its
// parts, stats.go) are the wire's own, and the daemon converts its
// figures to them.
package control

// Version is the protocol version this package speaks: 3 since order
// requests may carry ranges (RangesVersion), 2 since channel
// 1's sessions run over ioctls. A request line of version 1 and 2 reads
// the same.
const Version = 3
