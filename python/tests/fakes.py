"""A fake control entry for unit tests: no mount, no daemon.

:class:`FakeDaemon` plays the daemon's side of the control protocol over an
in-memory file: it collects the request written, answers it like dsmount
would (from the set of files it is told exist) and records every request.
Pass ``FakeDaemon.opener`` as the ``opener`` of :class:`dsmount.Client`.
"""

import array
import errno
import json
import os


class FakeDaemon:
    """Answer control requests like dsmount, for files named in ``files``."""

    def __init__(self, files=(), fail=None):
        self.files = set(files)
        self.requests = []  # every request decoded, in order
        self.jobs = {}      # job name -> last order request
        self.fail = fail    # if set, every request gets this error
        self.tables = {}    # table name -> paths, as the daemon keeps them

    def opener(self, root):
        return _FakeFile(self)

    def answer(self, req):
        """The events the daemon sends for request ``req``."""
        self.requests.append(req)
        if self.fail:
            return [{"type": "error", "error": self.fail}]
        if req.get("op") == "stats":
            jobs = [{"name": k, "epoch": v["epoch"], "declared": len(v["paths"]),
                     "next_declared": len(v.get("next") or [])} for k, v in sorted(self.jobs.items())]
            return [{"type": "result", "stats": {"mount": {"jobs": jobs}}}]
        if req.get("op") != "order":
            return [{"type": "error", "error": "unknown control op %r" % req.get("op")}]
        if not req.get("job"):
            return [{"type": "error", "error": "order: a job name is required"}]
        if req.get("end"):
            return [{"type": "result", "order": {"job": req["job"], "ended": self.jobs.pop(req["job"], None) is not None}}]
        if req.get("table"):
            # Declared by index: recorded as the paths they index.
            if "table_paths" in req:
                self.tables[req["table"]] = req.pop("table_paths")
            table = self.tables.get(req["table"])
            if table is None:
                return [{"type": "error", "error": "order: the declared table is unknown here", "code": "unknown_table"}]
            req["paths"] = [table[i] for i in req.pop("indices")]
            if "next_indices" in req:
                req["next"] = [table[i] for i in req.pop("next_indices")]
        paths = req.get("paths") or []
        if not paths:
            return [{"type": "error", "error": "order: the declared order names no files"}]
        res = {"job": req["job"], "epoch": req.get("epoch", 0), "declared": 0, "next_declared": 0,
               "duplicates": 0, "skipped": 0}
        cur = self._keep(paths, res)
        nxt = self._keep(req.get("next") or [], res)
        if not cur:
            return [{"type": "error", "error": "order: none of the %d paths is a file of this mount" % len(paths)}]
        res["declared"], res["next_declared"] = len(cur), len(nxt)
        self.jobs[req["job"]] = req
        return [{"type": "result", "order": res}]

    def _keep(self, paths, res):
        kept, seen = [], set()
        for p in paths:
            if p not in self.files:
                res["skipped"] += 1
                res.setdefault("skipped_examples", []).append('"%s": not found' % p)
            elif p in seen:
                res["duplicates"] += 1
            else:
                seen.add(p)
                kept.append(p)
        return kept

    def orders(self):
        """The order requests received (not ends), in order."""
        return [r for r in self.requests if r.get("op") == "order" and not r.get("end")]


class _FakeFile:
    """The client's end of one open of the fake control entry."""

    def __init__(self, daemon):
        self.daemon = daemon
        self.req = b""
        self.out = None
        self.closed = False

    def write(self, data):
        assert self.out is None, "write after the request was sent"
        data = bytes(data)[:1000]  # short writes, like FUSE splitting a big write
        self.req += data
        line, nl, payload = self.req.partition(b"\n")
        if not nl:
            return len(data)
        req = json.loads(line)
        # Paths may follow the line, each ended by a NUL (paths_bytes,
        # next_bytes): recorded as if sent in "paths" and "next".
        # Or indices into a table (table, table_bytes, indices_bytes,
        # next_indices_bytes): recorded as table_paths, indices and
        # next_indices.
        parts = [req.pop(k, 0) for k in ("paths_bytes", "next_bytes", "table_bytes", "indices_bytes", "next_indices_bytes")]
        if len(payload) < sum(parts):
            return len(data)
        assert len(payload) == sum(parts), "bytes after the announced payload"
        pieces = []
        for n in parts:
            pieces.append(payload[:n])
            payload = payload[n:]
        if parts[0]:
            req["paths"] = _split_nul(pieces[0])
        if parts[1]:
            req["next"] = _split_nul(pieces[1])
        if parts[2]:
            req["table_paths"] = _split_nul(pieces[2])
        if req.get("table"):
            req["indices"] = list(array.array("I", pieces[3]))
            if parts[4]:
                req["next_indices"] = list(array.array("I", pieces[4]))
        events = self.daemon.answer(req)
        self.out = b"".join(json.dumps(e).encode() + b"\n" for e in events)
        return len(data)

    def read(self, n):
        if self.out is None:
            return b""
        data, self.out = self.out[:7], self.out[7:]  # dribble, to test line reassembly
        return data

    def close(self):
        self.closed = True


class RefusingFile:
    """A control entry that refuses every write with EFBIG, as the daemon
    does a request over the caller's bound, with ``line`` (an event line,
    without its newline) queued to read, or nothing."""

    def __init__(self, line=None):
        self.out = line.encode() + b"\n" if line is not None else b""

    def write(self, data):
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))

    def read(self, n):
        chunk, self.out = self.out[:n], self.out[n:]
        return chunk

    def close(self):
        pass


def _split_nul(b):
    assert b.endswith(b"\0"), "a payload path without its NUL"
    return [p.decode("utf-8", "surrogateescape") for p in b[:-1].split(b"\0")]
