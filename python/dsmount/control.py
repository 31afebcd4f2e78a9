"""Talking to a dsmount daemon through a mount's control entry.

Every dsmount mount has a hidden file ``<mountpoint>/.dsmount-control``
(absent from listings). A client opens a session next to it (a new entry,
read-only), sends one JSON request terminated by a newline with an ioctl per
chunk, then takes JSON event lines, again by ioctl, until the answer ends;
closing the session early cancels the request. The mount is read-only, so
nothing is written to it. This module speaks that protocol (internal/control
in the Go sources is its specification) with the standard library only.
"""

from __future__ import annotations

import array
import base64
import errno
import fcntl
import hashlib
import json
import operator
import os
import posixpath
import struct
import sys
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Protocol, Sequence, Set, Tuple, Union, cast

#: A path to a directory: str or ``os.PathLike[str]``.
StrPath = Union[str, "os.PathLike[str]"]
#: A file path as :func:`os.fspath` takes it: str, bytes or os.PathLike.
AnyPath = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
#: A daemon answer or request: a JSON object.
JSONObject = Dict[str, Any]

#: The control entry's name at a mount's root.
CONTROL_NAME = ".dsmount-control"

#: A session's chunk: a little-endian uint32 count of the bytes it carries,
#: 4 zero bytes, then up to ``CHUNK_DATA`` bytes; always ``CHUNK_SIZE``
#: bytes long, as the ioctl commands' size field says.
CHUNK_SIZE = 16376
CHUNK_DATA = CHUNK_SIZE - 8


def _ioc(direction: int, nr: int) -> int:
    """An ioctl command as Linux encodes it on x86 and arm."""
    return (direction << 30) | (CHUNK_SIZE << 16) | (ord("D") << 8) | nr


#: Give the daemon the next chunk of the request; the result is the count taken.
IOCTL_SEND = _ioc(1, 1)
#: Take the next chunk of the answer; the result is its count, 0 at the end.
IOCTL_RECV = _ioc(2, 2)

#: Bytes read from the control entry per read call.
_READ_SIZE = 1 << 16

#: Bytes written to the control entry per write call (FUSE splits larger
#: writes anyway).
_WRITE_SIZE = 1 << 20


class DsmountError(Exception):
    """The daemon refused a request, or the mount could not be reached.

    ``code`` names a refusal a client can act on (``"unknown_table"``), or
    is None.
    """

    def __init__(self, message: str, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.code = code


class ControlFile(Protocol):
    """What :class:`Client` needs of an open control session: an
    unbuffered binary file (``os.fdopen(fd, "r+b", buffering=0)``)."""

    def write(self, data: bytes) -> Optional[int]: ...

    def read(self, size: int) -> bytes: ...

    def close(self) -> None: ...


class PathTable:
    """A dataset's file list, declared once, that orders then index.

    Declaring an epoch as indices into a table sends 4 bytes a file where
    paths send their names, and the daemon resolves an index with an array
    lookup where a path costs a lookup in the tree: 1.28M files declare in
    a fraction of a second. ``paths`` are relative to the mount root. The
    table's name is the SHA-256 of what is sent, so jobs listing the same
    dataset share it in the daemon.
    """

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths: List[str] = list(paths)
        self.payload = _nul_joined(self.paths)
        if self.payload.count(b"\0") != len(self.paths):
            raise ValueError("a path with a NUL byte can't be in a table")
        self.name = hashlib.sha256(self.payload).hexdigest()[:32]

    def __len__(self) -> int:
        return len(self.paths)


def find_mount_root(path: StrPath) -> str:
    """Return the root of the dsmount mount that ``path`` lies in.

    ``path`` is a file or directory inside a mount (or the mountpoint
    itself), absolute or relative to the working directory. The root is the
    nearest ancestor whose control entry exists, as the ``dsmount`` CLI
    finds it. Raises :class:`DsmountError` when ``path`` is in no dsmount
    mount, and :class:`OSError` when it does not exist.
    """
    path = os.path.abspath(os.fspath(path))
    os.stat(path)
    d = path if os.path.isdir(path) else os.path.dirname(path)
    while True:
        if os.path.exists(os.path.join(d, CONTROL_NAME)):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            raise DsmountError("%s is not inside a dsmount mount" % path)
        d = parent


def relative_path(root: StrPath, path: AnyPath) -> str:
    """Return ``path`` as the '/'-separated path relative to mount ``root``.

    An absolute ``path`` must lie inside ``root`` (compared both as given and
    with symlinks in ``root`` resolved); a relative one is taken as relative
    to the root already. Raises :class:`ValueError` for a path outside the
    mount or one that names the root itself.
    """
    return Relativizer(root)(path)


class Relativizer:
    """A callable doing :func:`relative_path` for ``root``, made once.

    It converts about a million absolute paths a second, and several
    million clean relative ones: ``root`` is resolved once, and clean paths
    skip normalisation. It pickles (it holds only strings).
    """

    def __init__(self, root: StrPath) -> None:
        self.root = root
        self.prefixes: Tuple[str, ...] = tuple(r.rstrip("/") + "/" for r in _root_forms(root))

    def _strip_root(self, p: str) -> Optional[str]:
        for prefix in self.prefixes:
            if p.startswith(prefix):
                return p[len(prefix):]
        return None

    def many(self, paths: Iterable[AnyPath]) -> List[str]:
        """``[self(p) for p in paths]``, twice as fast for a list of clean
        absolute str paths under one spelling of the root (what a dataset
        over the mount holds): they are checked as one joined string."""
        paths = list(paths)
        strs = cast(List[str], paths)  # checked by the join: TypeError if any is not a str
        joined: Optional[str]
        try:
            joined = "\0".join(strs)
        except TypeError:  # bytes or os.PathLike among them
            joined = None
        n = len(paths)
        # No NUL in any path, none ending in "/" and no "//" or "/."
        # anywhere: with every path starting with a prefix (which ends in
        # "/"), every rest is clean (_is_clean).
        if (joined and joined.count("\0") == n - 1 and joined[-1] != "/" and "//" not in joined
                and "/." not in joined and "/\0" not in joined):
            for prefix in self.prefixes:
                if joined.startswith(prefix) and joined.count("\0" + prefix) == n - 1:
                    cut = len(prefix)
                    return [p[cut:] for p in strs]
        return [self(p) for p in paths]

    def __call__(self, path: AnyPath) -> str:
        p = path if type(path) is str else _as_str(path)
        if p[:1] == "/":
            rest = self._strip_root(p)
            if rest is not None and _is_clean(rest):
                return rest
            rest = self._strip_root(posixpath.normpath(p))
            if rest is None:
                raise ValueError("%s is not inside the mount at %s" % (p, self.root))
            p = rest
        elif _is_clean(p):
            return p
        p = posixpath.normpath(p)
        if p == "." or p == ".." or p.startswith("../") or p.startswith("/"):
            raise ValueError("%r does not name a file inside the mount at %s" % (path, self.root))
        return p


def _as_str(path: AnyPath) -> str:
    """``path`` (str, bytes or os.PathLike) as a str."""
    p = os.fspath(path)
    return os.fsdecode(p) if isinstance(p, bytes) else p


def _is_clean(p: str) -> bool:
    """Whether relative path ``p`` is surely already normalised."""
    return (p != "" and p[0] not in "./" and p[-1] != "/"
            and "//" not in p and "/." not in p)


def _root_forms(root: StrPath) -> Tuple[str, ...]:
    """The spellings of a mount root an absolute path may start with."""
    a = os.path.normpath(os.path.abspath(root))
    r = os.path.realpath(a)
    return (a,) if r == a else (a, r)


def _open_control(root: str) -> ControlFile:
    """Open a control session on ``root``.

    A session is a new entry next to the control entry, named
    ``.dsmount-control.<unique>`` and opened read-only: looking it up makes
    the session, which then runs over ioctls (:class:`_Session`). A daemon
    of protocol version 1 has no such entry to look up; there the session
    is created, read-write, and written and read.
    """
    # Never create a stray file in a directory that is not a mount root.
    if not os.path.exists(os.path.join(root, CONTROL_NAME)):
        raise FileNotFoundError(errno.ENOENT, "no control entry", root)
    name = os.path.join(root, "%s.%d-%s" % (CONTROL_NAME, os.getpid(), os.urandom(8).hex()))
    try:
        fd = os.open(name, os.O_RDONLY)
    except FileNotFoundError:
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        return os.fdopen(fd, "r+b", buffering=0)
    return _Session(fd)


class _Session:
    """A version 2 control session: ``write`` and ``read`` as ioctls."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buf = bytearray(CHUNK_SIZE)

    def _ioctl(self, cmd: int) -> int:
        while True:
            try:
                return fcntl.ioctl(self._fd, cmd, self._buf, True)
            except InterruptedError:
                continue

    def write(self, data: bytes) -> Optional[int]:
        n = min(len(data), CHUNK_DATA)
        struct.pack_into("<II", self._buf, 0, n, 0)
        self._buf[8:8 + n] = data[:n]
        return self._ioctl(IOCTL_SEND)

    def read(self, size: int) -> bytes:
        n = self._ioctl(IOCTL_RECV)
        if n < 0 or n > CHUNK_DATA:
            raise OSError("the daemon answered %d bytes, more than a chunk holds" % n)
        return bytes(self._buf[8:8 + n])

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class Client:
    """A connection-less client of one mount's control entry.

    Each call opens the control entry, sends one request and reads the
    answer to its end. ``mountpoint`` must be the mount's root (see
    :func:`find_mount_root`). ``opener`` is a function ``root -> file`` (with
    ``write``, ``read`` and ``close``) used instead of opening the control
    entry; unit tests pass a fake.
    """

    def __init__(self, mountpoint: StrPath, opener: Optional[Callable[[str], ControlFile]] = None) -> None:
        self.mountpoint: str = os.path.abspath(os.fspath(mountpoint))
        self._opener: Callable[[str], ControlFile] = opener or _open_control
        self._relative = Relativizer(self.mountpoint)
        self._tables_sent: Set[str] = set()  # names of the PathTables the daemon was sent

    def __repr__(self) -> str:
        return "Client(%r)" % self.mountpoint

    def request(self, req: JSONObject, payload: bytes = b"") -> JSONObject:
        """Send request ``req`` (a dict) and return its "result" event.

        ``payload`` is sent after the request line (an order's paths; see
        ``declare_order``).

        Raises :class:`DsmountError` on an "error" event, when the control
        entry can't be opened, or when the daemon ends without a result.
        """
        line = json.dumps(req, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        try:
            f = self._opener(self.mountpoint)
        except FileNotFoundError:
            raise DsmountError(self._not_a_root()) from None
        except OSError as e:
            raise DsmountError("open the control entry of %s: %s" % (self.mountpoint, e)) from e
        try:
            try:
                _write_all(f, line + payload if payload else line)
            except OSError as e:
                # The daemon refuses a request over the caller's bounds
                # at the write (EFBIG) and says why in its answer.
                refusal = _refusal(f, self.mountpoint)
                if refusal is not None:
                    raise refusal from e
                raise
            result = None
            for ev in _events(f, self.mountpoint):
                if ev.get("type") == "error":
                    raise DsmountError(ev.get("error") or "the daemon reported an unnamed error", ev.get("code"))
                if ev.get("type") == "result":
                    result = ev
        except OSError as e:
            raise DsmountError("control request to %s: %s" % (self.mountpoint, e)) from e
        finally:
            f.close()
        if result is None:
            raise DsmountError("the daemon serving %s gave no answer" % self.mountpoint)
        return result

    def _not_a_root(self) -> str:
        try:
            root = find_mount_root(self.mountpoint)
        except (OSError, DsmountError) as e:
            return str(e)
        return "%s is not a dsmount mountpoint (the mount's root is %s)" % (self.mountpoint, root)

    def declare_order(self, job: str, epoch: int, paths: Iterable[AnyPath],
                      next_paths: Optional[Iterable[AnyPath]] = None) -> JSONObject:
        """Declare job ``job``'s order of files for ``epoch``.

        ``paths`` (and the optional ``next_paths``, epoch ``epoch + 1``'s
        order) are paths relative to the mount root or absolute paths inside
        it. Returns the daemon's ``order`` result: a dict with ``job``,
        ``epoch``, ``declared``, ``next_declared``, ``duplicates``,
        ``skipped`` and possibly ``skipped_examples``.
        """
        if not job:
            raise DsmountError("declare_order: a job name is required")
        epoch = int(epoch)
        if epoch < 0:
            raise DsmountError("declare_order: epoch %d is negative" % epoch)
        req: JSONObject = {"op": "order", "job": str(job), "epoch": epoch}
        cur = [self._relative(p) for p in paths]
        nxt = [self._relative(p) for p in next_paths] if next_paths else []
        if any("\0" in p for p in cur) or any("\0" in p for p in nxt):
            # A NUL would split a path in the payload; no file has one.
            req["paths"] = cur
            if nxt:
                req["next"] = nxt
            return _order(self.request(req))
        # The paths follow the request line, each ended by a NUL: the
        # daemon reads a million of them without decoding a JSON string
        # each (see the Go side's requestBuf).
        payload_cur = _nul_joined(cur)
        payload_next = _nul_joined(nxt)
        req["paths_bytes"] = len(payload_cur)
        if payload_next:
            req["next_bytes"] = len(payload_next)
        return _order(self.request(req, payload_cur + payload_next))

    def declare_indices(self, job: str, epoch: int, table: PathTable, indices: Iterable[int],
                        next_indices: Optional[Iterable[int]] = None) -> JSONObject:
        """Declare ``job``'s order for ``epoch`` as indices into ``table``.

        ``table`` is a :class:`PathTable`; ``indices`` (and the optional
        ``next_indices``, epoch ``epoch + 1``'s) are ints in
        ``range(len(table))``. The table is sent the first time this client
        names it, and again if the daemon has forgotten it (restarted, or
        more tables named since). Returns the daemon's ``order`` result,
        like :meth:`declare_order`.
        """
        if not job:
            raise DsmountError("declare_indices: a job name is required")
        epoch = int(epoch)
        if epoch < 0:
            raise DsmountError("declare_indices: epoch %d is negative" % epoch)
        cur = _indices_bytes(indices)
        nxt = _indices_bytes(next_indices) if next_indices else b""
        req: JSONObject = {"op": "order", "job": str(job), "epoch": epoch, "table": table.name,
               "indices_bytes": len(cur)}
        if nxt:
            req["next_indices_bytes"] = len(nxt)
        return _order(self._with_table(req, table, cur + nxt))

    def declare_ranges(self, job: str, epoch: int, files: Sequence[AnyPath], file_index: Any, offsets: Any,
                       lengths: Any, next: Optional[Tuple[Any, Any, Any]] = None) -> JSONObject:
        """Declare ``job``'s samples for ``epoch`` as byte ranges of ``files``.

        Sample ``i`` is ``lengths[i]`` bytes of ``files[file_index[i]]`` from
        ``offsets[i]``, in the order the job will read them; the three are
        equal-length integer sequences or numpy arrays. ``next`` is epoch
        ``epoch + 1``'s ``(file_index, offsets, lengths)``. Returns the
        daemon's ``order`` result, like :meth:`declare_order`; a range past
        its file's end, of length 0, or of a path that is no file of the
        mount refuses the whole declaration.
        """
        if not job:
            raise DsmountError("declare_ranges: a job name is required")
        epoch = int(epoch)
        if epoch < 0:
            raise DsmountError("declare_ranges: epoch %d is negative" % epoch)
        names = [self._relative(p) for p in files]
        if not names:
            raise DsmountError("declare_ranges: no files")
        if any("\0" in p for p in names):
            raise DsmountError("declare_ranges: a file name holds a NUL")
        cur = _ranges_bytes(file_index, offsets, lengths, len(names))
        nxt = _ranges_bytes(*next, len(names)) if next is not None else b""
        paths = _nul_joined(names)
        req: JSONObject = {"version": RANGES_VERSION, "op": "order", "job": str(job), "epoch": epoch,
                           "paths_bytes": len(paths), "ranges_bytes": len(cur)}
        if nxt:
            req["next_ranges_bytes"] = len(nxt)
        return _order(self.request(req, paths + cur + nxt))

    def cached(self, table: PathTable) -> "CachedFiles":
        """Return which files of ``table`` are wholly in this node's cache.

        One bit per path of the table, as the daemon sees its cache now (a
        file may be evicted or fetched the moment after). The node's
        mounts share one cache, so any mount of the dataset answers for
        the node. The table is sent as :meth:`declare_indices` sends it.
        """
        res = self._with_table({"op": "cached", "table": table.name}, table, b"")
        return CachedFiles.from_result(_member(res, "cached"), len(table))

    def _with_table(self, req: JSONObject, table: PathTable, after: bytes) -> JSONObject:
        """Send ``req`` naming ``table`` with ``after`` (the payload's parts
        after the table); the table too the first time, and again if the
        daemon has forgotten it."""
        if table.name in self._tables_sent:
            try:
                return self.request(req, after)
            except DsmountError as e:
                if e.code != "unknown_table":
                    raise
        req = dict(req, table_bytes=len(table.payload))
        res = self.request(req, table.payload + after)
        self._tables_sent.add(table.name)
        return res

    def end_job(self, job: str) -> bool:
        """Tell the daemon job ``job`` is done; True if it knew the job."""
        if not job:
            raise DsmountError("end_job: a job name is required")
        return bool(_order(self.request({"op": "order", "job": str(job), "end": True})).get("ended"))

    def stats(self) -> JSONObject:
        """Return the daemon's statistics (what ``dsmount stats --json`` prints)."""
        return _member(self.request({"op": "stats"}), "stats")


class CachedFiles:
    """Which files of a :class:`PathTable` a node's cache holds: bit ``i``
    of ``bitmap`` (byte ``i // 8``, mask ``1 << (i % 8)``) is path ``i``."""

    def __init__(self, files: int, bitmap: bytes) -> None:
        if files < 0 or len(bitmap) != (files + 7) // 8:
            raise DsmountError("malformed answer: a bitmap of %d bytes for %d files" % (len(bitmap), files))
        self.files = files
        self.bitmap = bitmap

    @classmethod
    def from_result(cls, res: JSONObject, files: int) -> "CachedFiles":
        """Decode the daemon's ``cached`` object for a table of ``files`` paths."""
        try:
            got = int(res["files"])
            bitmap = base64.b64decode(str(res["bitmap"]), validate=True)
        except (KeyError, TypeError, ValueError) as e:
            raise DsmountError("malformed answer to a cached request: %s" % e) from None
        if got != files:
            raise DsmountError("malformed answer: %d files for a table of %d" % (got, files))
        return cls(files, bitmap)

    def __contains__(self, i: object) -> bool:
        try:
            j = operator.index(i)  # type: ignore[arg-type]
        except TypeError:
            return False
        return 0 <= j < self.files and bool(self.bitmap[j >> 3] & (1 << (j & 7)))

    def __len__(self) -> int:
        """How many files are cached (bits past the table's files, which
        the daemon never sets, are not counted)."""
        full, rest = divmod(self.files, 8)
        n = sum(bin(b).count("1") for b in self.bitmap[:full])
        return n + (bin(self.bitmap[full] & ((1 << rest) - 1)).count("1") if rest else 0)


def _order(result: JSONObject) -> JSONObject:
    """The ``order`` object of an order request's result event."""
    return _member(result, "order")


def _member(result: JSONObject, key: str) -> JSONObject:
    """``result[key]``, which the daemon sends as a JSON object."""
    value = result[key]
    if not isinstance(value, dict):
        raise DsmountError("malformed answer: %s is %r, not an object" % (key, value))
    return value


def _indices_bytes(indices: Iterable[int]) -> bytes:
    """``indices`` as little-endian uint32s."""
    a = array.array("I", indices)
    if a.itemsize != 4:
        a = array.array("L", indices)
        if a.itemsize != 4:
            raise DsmountError("no 4-byte unsigned array type here")
    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes()


#: The protocol version whose order requests may carry ranges.
RANGES_VERSION = 3
#: One range in a payload: offset uint64, length uint32, file uint32,
#: little-endian.
RANGE_SIZE = 16
_RANGE = struct.Struct("<QII")


def _ranges_bytes(file_index: Any, offsets: Any, lengths: Any, files: int) -> bytes:
    """The ranges' payload; a sequence of another length, a negative
    number or a file index past ``files`` raises DsmountError."""
    np: Any
    try:
        import numpy
        np = numpy
    except ImportError:
        np = None
    if np is not None:
        fi = np.asarray(file_index)
        off = np.asarray(offsets)
        ln = np.asarray(lengths)
        if not (fi.ndim == off.ndim == ln.ndim == 1) or not (len(fi) == len(off) == len(ln)):
            raise DsmountError("declare_ranges: file_index, offsets and lengths must be 1-D and of one length, not %s, %s and %s"
                               % (fi.shape, off.shape, ln.shape))
        for name, a in (("file_index", fi), ("offsets", off), ("lengths", ln)):
            if len(a) and a.dtype.kind not in "iu":
                raise DsmountError("declare_ranges: %s holds %s, not integers" % (name, a.dtype))
            if len(a) and int(a.min()) < 0:
                raise DsmountError("declare_ranges: %s holds a negative number" % name)
        if len(fi) and int(fi.max()) >= files:
            raise DsmountError("declare_ranges: file index %d, but only %d files" % (int(fi.max()), files))
        if len(ln) and int(ln.max()) >= 1 << 32:
            raise DsmountError("declare_ranges: a length of %d bytes; at most 4 GiB - 1" % int(ln.max()))
        # Four little-endian uint32 columns: the offset's low and high
        # halves, the length, the file.
        off = off.astype(np.uint64)
        rec = np.empty((len(fi), 4), dtype="<u4")
        rec[:, 0] = off & 0xFFFFFFFF
        rec[:, 1] = off >> np.uint64(32)
        rec[:, 2] = ln
        rec[:, 3] = fi
        return bytes(rec.tobytes())
    fi, off, ln = list(file_index), list(offsets), list(lengths)
    if not (len(fi) == len(off) == len(ln)):
        raise DsmountError("declare_ranges: file_index, offsets and lengths differ in length (%d, %d, %d)" % (len(fi), len(off), len(ln)))
    out = bytearray(RANGE_SIZE * len(fi))
    for i, (f, o, n) in enumerate(zip(fi, off, ln)):
        if f < 0 or o < 0 or n < 0:
            raise DsmountError("declare_ranges: range %d holds a negative number" % i)
        if f >= files:
            raise DsmountError("declare_ranges: file index %d, but only %d files" % (f, files))
        if n >= 1 << 32:
            raise DsmountError("declare_ranges: a length of %d bytes; at most 4 GiB - 1" % n)
        _RANGE.pack_into(out, RANGE_SIZE * i, o, n, f)
    return bytes(out)


def _nul_joined(paths: Sequence[str]) -> bytes:
    """The paths, each ended by a NUL byte, as UTF-8 (surrogate escapes
    give back the bytes of a name that is not UTF-8)."""
    if not paths:
        return b""
    return ("\0".join(paths) + "\0").encode("utf-8", "surrogateescape")


def _write_all(f: ControlFile, data: bytes) -> None:
    """Write all of ``data`` to the unbuffered file ``f``."""
    view = memoryview(data)
    while view:
        n = f.write(view[:_WRITE_SIZE])
        if not n:
            raise OSError("short write to the control entry")
        view = view[n:]


def _refusal(f: ControlFile, root: str) -> Optional[DsmountError]:
    """The daemon's reason for refusing a request at its write, as a
    :class:`DsmountError`, or None if it gave none."""
    try:
        for ev in _events(f, root):
            if ev.get("type") == "error":
                return DsmountError(ev.get("error") or "the daemon refused the request", ev.get("code"))
    except (OSError, DsmountError):
        pass
    return None


def _events(f: ControlFile, root: str) -> Iterator[JSONObject]:
    """Yield the JSON event objects read from ``f`` until end of file."""
    buf = b""
    while True:
        chunk = f.read(_READ_SIZE)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if line.strip():
                yield _parse(line, root)
    if buf.strip():
        yield _parse(buf, root)


def _parse(line: bytes, root: str) -> JSONObject:
    try:
        ev = json.loads(line)
    except ValueError as e:
        raise DsmountError("malformed answer from %s: %s" % (root, e)) from None
    if not isinstance(ev, dict):
        raise DsmountError("malformed answer from %s: %r" % (root, line[:200]))
    return ev


def declare_order(mountpoint: StrPath, job: str, epoch: int, paths: Iterable[AnyPath],
                  next_paths: Optional[Iterable[AnyPath]] = None) -> JSONObject:
    """Declare ``job``'s read order for ``epoch`` on the mount at ``mountpoint``.

    See :meth:`Client.declare_order`. Raises :class:`DsmountError` if the
    daemon refuses it (empty order, no job name, none of the paths exist).
    """
    return Client(mountpoint).declare_order(job, epoch, paths, next_paths)


def declare_ranges(files: Sequence[AnyPath], file_index: Any, offsets: Any, lengths: Any, *, job: str, epoch: int,
                   next: Optional[Tuple[Any, Any, Any]] = None) -> JSONObject:
    """Declare ``job``'s samples for ``epoch`` as byte ranges of ``files``.

    ``files`` are paths on one dsmount mount; see :meth:`Client.declare_ranges`.
    :func:`end_job` ends the job, as for files.
    """
    if not files:
        raise DsmountError("declare_ranges: no files")
    root = find_mount_root(os.fsdecode(os.fspath(files[0])))
    return Client(root).declare_ranges(job, epoch, files, file_index, offsets, lengths, next)


def end_job(mountpoint: StrPath, job: str) -> bool:
    """End ``job`` on the mount at ``mountpoint``; True if the daemon knew it."""
    return Client(mountpoint).end_job(job)


def stats(mountpoint: StrPath) -> JSONObject:
    """Return the statistics of the daemon serving ``mountpoint`` as a dict.

    ``stats["mount"]["jobs"]`` lists the declared jobs of this mount with
    their ``epoch``, ``declared``, ``next_declared``, ``read``,
    ``total_reads``, ``prefetched``, ``prefetch_hits``, ``stalls``, ...
    """
    return Client(mountpoint).stats()
