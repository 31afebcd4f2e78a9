"""The Python client against the Go protocol types (internal/control).

``go test ./internal/control`` (TestPythonClient) runs this module: it
describes the protocol from the Go types themselves (field names by JSON
tag, ops, event types, error codes, the entry's name, a table name) in the
JSON file named by DSMOUNT_PROTOCOL_SPEC, with event lines encoded by Go.
Each test here drives a call of :class:`dsmount.Client` against a fake
control entry answering with those lines, and checks:

* every key the client sends is a field of Go's Request, of the right JSON
  kind; every op is a Go op; the payload is as long as announced;
* the client takes Go's events (result objects, every error code as
  ``DsmountError.code``, an unknown_table error resends the table);
* every key the client (or the sampler) reads of an event is a field of the
  Go type it reads it from.

The requests written are saved (in DSMOUNT_PROTOCOL_OUT) for the Go test to
parse with the daemon's own parser. The module is not named test_*.py, so
unittest discovery leaves it out: it needs the spec, and runs through
``go test ./internal/control``.
"""

import ast
import base64
import json
import logging
import os
import tempfile
import unittest
from unittest import mock

from dsmount import CONTROL_NAME, Client, DsmountError, OrderedSampler, PathTable
from dsmount import control

from .fakes import RefusingFile

SPEC = None
RECORDED = []  # the requests written, for the Go test: {"case", "raw", "expect"}

#: Request's fields that announce a part of the payload, in payload order
#: (internal/control/doc.go). test_payload_parts_are_the_go_ones checks
#: that Go's Request has exactly these.
PAYLOAD_PARTS = ("paths_bytes", "next_bytes", "table_bytes", "indices_bytes", "next_indices_bytes", "ranges_bytes",
                 "next_ranges_bytes")
_NUL_ENDED = {"paths_bytes", "next_bytes", "table_bytes"}

#: The Client methods this module covers; a new one fails
#: test_every_client_call_is_covered until a case here drives it.
COVERED = {"request", "declare_order", "declare_indices", "declare_ranges", "end_job", "stats", "cached"}

_SOURCES = [os.path.join(os.path.dirname(control.__file__), name) for name in ("control.py", "sampler.py")]


def setUpModule():
    global SPEC
    path = os.environ.get("DSMOUNT_PROTOCOL_SPEC")
    if not path:
        raise unittest.SkipTest("needs the Go types' spec: run `go test ./internal/control`")
    with open(path, encoding="utf-8") as f:
        SPEC = json.load(f)


def tearDownModule():
    out = os.environ.get("DSMOUNT_PROTOCOL_OUT")
    if out and RECORDED:
        with open(os.path.join(out, "requests.json"), "w", encoding="utf-8") as f:
            json.dump(RECORDED, f)


def fields(type_name):
    return SPEC["types"][type_name]


def field_type(type_name, key):
    """The Go type name of object field ``key`` of ``type_name``."""
    return fields(type_name)[key]["type"]


def kind_error(value, f, where):
    """Why ``value`` is not of the JSON kind of field spec ``f``, or None."""
    k = f["kind"]
    ok = {
        "string": lambda v: isinstance(v, str),
        "bool": lambda v: isinstance(v, bool),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "array": lambda v: isinstance(v, list),
        "map": lambda v: isinstance(v, dict),
        "bytes": lambda v: isinstance(v, str) and _is_base64(v),
        "object": lambda v: isinstance(v, dict),
    }[k]
    if not ok(value):
        return "%s: %r is not a JSON %s" % (where, value, k)
    if k in ("array", "map"):
        items = value if k == "array" else value.values()
        for i, v in enumerate(items):
            err = kind_error(v, f["elem"], "%s[%d]" % (where, i))
            if err:
                return err
    if k == "object":
        for key, v in value.items():
            if key not in fields(f["type"]):
                return "%s: %r is no field of Go's %s" % (where, key, f["type"])
            err = kind_error(v, fields(f["type"])[key], "%s.%s" % (where, key))
            if err:
                return err
    return None


def _is_base64(s):
    try:
        base64.b64decode(s, validate=True)
        return True
    except ValueError:
        return False


class Tracked(dict):
    """A decoded JSON object of Go type ``go_type`` that records the keys
    read of it (``[k]``, ``get``, ``in``, ``pop``) in ``reads``."""

    def __init__(self, value, go_type, reads):
        super().__init__(value)
        self.go_type = go_type
        self.reads = reads

    def _read(self, key):
        self.reads.append((self.go_type, key))

    def __getitem__(self, key):
        self._read(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self._read(key)
        return super().get(key, default)

    def __contains__(self, key):
        self._read(key)
        return super().__contains__(key)

    def pop(self, key, *default):
        self._read(key)
        return super().pop(key, *default)


def track(value, f, reads):
    """``value`` with its objects wrapped in :class:`Tracked` by field spec ``f``."""
    if f is None:
        return value
    if f["kind"] == "object" and isinstance(value, dict):
        spec = fields(f["type"])
        return Tracked({k: track(v, spec.get(k), reads) for k, v in value.items()}, f["type"], reads)
    if f["kind"] == "array" and isinstance(value, list):
        return [track(v, f["elem"], reads) for v in value]
    if f["kind"] == "map" and isinstance(value, dict):
        return {k: track(v, f["elem"], reads) for k, v in value.items()}
    return value


class Session:
    """One open of the fake control entry: it takes the request's bytes in
    short writes (as FUSE splits them) and, once the payload announced has
    come, answers with its daemon's next queued lines, a few bytes a read."""

    def __init__(self, daemon):
        self.daemon = daemon
        self.written = bytearray()
        self.req = None
        self.payload = None
        self.out = None
        self.closed = False

    def write(self, data):
        if self.out is not None:
            raise AssertionError("%d bytes written after the payload announced: %r" % (len(data), bytes(data[:100])))
        data = bytes(data)[:4096]
        self.written += data
        line, nl, payload = bytes(self.written).partition(b"\n")
        if nl:
            req = json.loads(line)
            need = sum(req.get(k, 0) for k in PAYLOAD_PARTS if isinstance(req.get(k, 0), int))
            if len(payload) > need:
                raise AssertionError("%d payload bytes written, %d announced by %s" % (len(payload), need, line))
            if len(payload) == need:
                self.req, self.payload = req, payload
                self.out = self.daemon.next_answer()
        return len(data)

    def read(self, n):
        if self.out is None:
            return b""
        chunk, self.out = self.out[:min(n, 7)], self.out[min(n, 7):]
        return chunk

    def close(self):
        self.closed = True


class FakeDaemon:
    """Answers the i-th request with ``answers[i]``, a list of event lines."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.sessions = []

    def opener(self, root):
        s = Session(self)
        self.sessions.append(s)
        return s

    def next_answer(self):
        if not self.answers:
            raise AssertionError("a request more than the test expected")
        return b"".join(line.encode() + b"\n" for line in self.answers.pop(0))


class ProtocolTest(unittest.TestCase):
    def setUp(self):
        self.reads = []  # (Go type, key) the client read of events
        parse = control._parse
        patch = mock.patch.object(control, "_parse", lambda line, root: track(
            parse(line, root), {"kind": "object", "type": SPEC["event_type"]}, self.reads))
        patch.start()
        self.addCleanup(patch.stop)
        self.addCleanup(self.check_reads)

    def check_reads(self):
        bad = sorted({"%s.%s" % r for r in self.reads if r[1] not in fields(r[0])})
        self.assertFalse(bad, "the client reads fields that Go's types do not have")

    def line(self, name):
        return SPEC["event_lines"][name]

    def decoded(self, name, key):
        return json.loads(self.line(name))[key]

    def client(self, *answers):
        daemon = FakeDaemon(*answers)
        return Client("/mnt/ds", opener=daemon.opener), daemon

    def check_requests(self, daemon, *expects):
        """Check the requests ``daemon`` got, one per ``expects`` (what the
        Go daemon must read of it: op, job, paths, indices...), and record
        them for the Go test to parse."""
        self.assertEqual(len(daemon.sessions), len(expects), "requests sent")
        for i, (s, expect) in enumerate(zip(daemon.sessions, expects)):
            where = "%s #%d (request %d of %d)" % (self.id(), len(RECORDED), i + 1, len(expects))
            self.assertTrue(s.closed, where + ": the session was not closed")
            self.assertIsNotNone(s.req, where + ": the request or its payload never came whole: %r" % bytes(s.written[:200]))
            req = s.req
            self.assertIn(req.get("op"), SPEC["ops"], where + ": op")
            self.assertLessEqual(req.get("version", 1), SPEC["version"], where + ": version")
            err = kind_error(req, {"kind": "object", "type": SPEC["request_type"]}, where)
            self.assertIsNone(err)
            payload = s.payload
            for k in PAYLOAD_PARTS:
                n = req.get(k, 0)
                part, payload = payload[:n], payload[n:]
                if k in _NUL_ENDED:
                    self.assertTrue(not part or part.endswith(b"\0"), "%s: %s part does not end with a NUL" % (where, k))
                elif k in ("ranges_bytes", "next_ranges_bytes"):
                    self.assertEqual(n % SPEC["range_size"], 0, "%s: %s %d is no number of ranges" % (where, k, n))
                else:
                    self.assertEqual(n % 4, 0, "%s: %s %d is no number of uint32s" % (where, k, n))
            RECORDED.append({"case": where, "raw": base64.b64encode(bytes(s.written)).decode(), "expect": expect})


class EntryTest(ProtocolTest):
    def test_entry_name(self):
        self.assertEqual(CONTROL_NAME, SPEC["entry_name"])

    def test_session_ioctls(self):
        self.assertEqual(control.IOCTL_SEND, SPEC["ioctl_send"])
        self.assertEqual(control.IOCTL_RECV, SPEC["ioctl_recv"])
        self.assertEqual(control.CHUNK_SIZE, SPEC["chunk_size"])
        self.assertEqual(control.CHUNK_DATA, SPEC["chunk_data"])

    def test_version_1_session_is_a_new_entry_named_after_it(self):
        # A directory with a control entry and no session entries to look
        # up is a version 1 daemon's mount: the session is created there.
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, SPEC["entry_name"]), "w").close()
            f = control._open_control(d)
            f.write(b"x")
            f.close()
            made = [n for n in os.listdir(d) if n != SPEC["entry_name"]]
            self.assertEqual(len(made), 1)
            self.assertTrue(made[0].startswith(SPEC["entry_name"] + "."), made[0])

    def test_table_name(self):
        ex = SPEC["table_example"]
        table = PathTable(ex["paths"])
        self.assertEqual(table.payload, bytes.fromhex(ex["payload_hex"]))
        self.assertEqual(table.name, ex["name"])

    def test_payload_parts_are_the_go_ones(self):
        go = {k for k in fields(SPEC["request_type"]) if k.endswith("_bytes")}
        self.assertEqual(go, set(PAYLOAD_PARTS))

    def test_every_client_call_is_covered(self):
        public = {n for n in dir(Client) if not n.startswith("_") and callable(getattr(Client, n))}
        self.assertEqual(public - COVERED, set(), "Client calls this module does not drive: add a case")


class CallTest(ProtocolTest):
    def test_stats(self):
        c, d = self.client([self.line("plan"), self.line("progress"), self.line("stats")])
        self.assertEqual(c.stats(), self.decoded("stats", "stats"))
        self.check_requests(d, {"op": "stats"})

    def test_declare_order(self):
        c, d = self.client([self.line("order")], [self.line("order")])
        res = c.declare_order("job1", 3, ["a.jpg", "/mnt/ds/d/ü c.jpg"], next_paths=["b.jpg"])
        self.assertEqual(res, self.decoded("order", "order"))
        c.declare_order("job1", 0, ["a.jpg"])
        self.check_requests(
            d,
            {"op": "order", "job": "job1", "epoch": 3, "paths": ["a.jpg", "d/ü c.jpg"], "next": ["b.jpg"]},
            {"op": "order", "job": "job1", "epoch": 0, "paths": ["a.jpg"]})

    def test_declare_ranges(self):
        c, d = self.client([self.line("order")], [self.line("order")])
        res = c.declare_ranges("tok", 2, ["train.bin", "/mnt/ds/val.bin"], [1, 0], [1 << 40, 4096], [2050, 16384],
                               next=([0], [7], [1]))
        self.assertEqual(res, self.decoded("order", "order"))
        c.declare_ranges("tok", 3, ["train.bin"], [0], [0], [2050])
        for bad in (([2], [0], [1]), ([0], [-1], [1]), ([0, 0], [0], [1]), ([0], [0], [1 << 32])):
            with self.assertRaises(DsmountError):
                c.declare_ranges("tok", 4, ["train.bin", "val.bin"], *bad)
        self.check_requests(
            d,
            {"op": "order", "job": "tok", "epoch": 2, "paths": ["train.bin", "val.bin"],
             "ranges": [[1 << 40, 2050, 1], [4096, 16384, 0]], "next_ranges": [[7, 1, 0]]},
            {"op": "order", "job": "tok", "epoch": 3, "paths": ["train.bin"], "ranges": [[0, 2050, 0]]})

    def test_declare_order_with_a_nul(self):
        # A NUL would split a path in the payload: sent as JSON instead.
        c, d = self.client([self.line("order")])
        c.declare_order("job1", 1, ["a\0b.jpg"], next_paths=["c.jpg"])
        self.check_requests(d, {"op": "order", "job": "job1", "epoch": 1, "paths": ["a\0b.jpg"], "next": ["c.jpg"]})

    def test_declare_indices_and_resend_on_unknown_table(self):
        files = ["d/%d.jpg" % i for i in range(10)]
        table = PathTable(files)
        c, d = self.client([self.line("order")], [self.line("order")],
                           [SPEC["error_lines"]["unknown_table"]], [self.line("order")])
        res = c.declare_indices("job", 0, table, [3, 1, 2], [0, 9])
        self.assertEqual(res, self.decoded("order", "order"))
        c.declare_indices("job", 1, table, [5])               # the table is known: not sent
        res = c.declare_indices("job", 2, table, [7, 8, 9])   # forgotten: sent again
        self.assertEqual(res, self.decoded("order", "order"))
        base = {"op": "order", "job": "job", "table": table.name}
        self.check_requests(
            d,
            dict(base, epoch=0, table_paths=files, indices=[3, 1, 2], next_indices=[0, 9]),
            dict(base, epoch=1, indices=[5]),
            dict(base, epoch=2, indices=[7, 8, 9]),
            dict(base, epoch=2, table_paths=files, indices=[7, 8, 9]))

    def test_cached_and_resend_on_unknown_table(self):
        files = ["d/%d.jpg" % i for i in range(10)]
        table = PathTable(files)
        c, d = self.client([self.line("cached")], [SPEC["error_lines"]["unknown_table"]], [self.line("cached")])
        got = c.cached(table)
        self.assertEqual([i for i in range(10) if i in got], [1, 9])  # what the Go test's answer sets
        self.assertEqual(len(got), 2)
        self.assertNotIn(10, got)
        got = c.cached(table)                                         # forgotten: sent again
        self.assertEqual(len(got), 2)
        base = {"op": "cached", "table": table.name}
        self.check_requests(d, dict(base, table_paths=files), base, dict(base, table_paths=files))

    def test_cached_answer_for_another_table_is_refused(self):
        c, _ = self.client([self.line("cached")])
        with self.assertRaises(DsmountError):
            c.cached(PathTable(["a.jpg"]))  # the answer counts 10 files

    def test_other_errors_are_not_resent(self):
        table = PathTable(["a.jpg", "b.jpg"])
        for code in SPEC["codes"]:
            if code == "unknown_table":
                continue
            with self.subTest(code=code):
                c, d = self.client([self.line("order")], [SPEC["error_lines"][code]])
                c.declare_indices("job", 0, table, [1])
                with self.assertRaises(DsmountError) as cm:
                    c.declare_indices("job", 1, table, [0])
                self.assertEqual(cm.exception.code, code)
                base = {"op": "order", "job": "job", "table": table.name}
                self.check_requests(d, dict(base, epoch=0, table_paths=table.paths, indices=[1]),
                                    dict(base, epoch=1, indices=[0]))

    def test_end_job(self):
        c, d = self.client([self.line("ended")], [self.line("order")])
        self.assertIs(c.end_job("job1"), True)
        self.assertIs(c.end_job("job1"), False)  # the Go side leaves "ended" out when false
        end = {"op": "order", "job": "job1", "end": True}
        self.check_requests(d, end, end)

    def test_every_error_code(self):
        for code, line in SPEC["error_lines"].items():
            msg = json.loads(line)["error"]
            with self.subTest(code=code):
                c, d = self.client([self.line("plan"), line])
                with self.assertRaises(DsmountError) as cm:
                    c.stats()
                self.assertEqual(str(cm.exception), msg)
                self.assertEqual(cm.exception.code, code or None)
                self.check_requests(d, {"op": "stats"})

    def test_error_at_the_write_keeps_its_code(self):
        # Over the caller's bound the daemon fails the write and queues its
        # reason, an error event like any other.
        for code, line in SPEC["error_lines"].items():
            with self.subTest(code=code):
                c = Client("/mnt/ds", opener=lambda root: RefusingFile(line))
                with self.assertRaises(DsmountError) as cm:
                    c.stats()
                self.assertEqual(cm.exception.code, code or None)

    def test_sampler(self):
        # The sampler reads the order result it is given (skipped, ...).
        paths = ["img/%d.jpg" % i for i in range(3)]
        c, d = self.client([self.line("order")])
        s = OrderedSampler([2, 0, 1], paths, job="j", declare_next=False, client=c)
        with self.assertLogs("dsmount", logging.WARNING):  # the Go result has paths skipped
            self.assertEqual(list(s), [2, 0, 1])
        self.assertIn((field_type(SPEC["event_type"], "order"), "skipped"), self.reads)
        self.check_requests(d, {"op": "order", "job": "j", "epoch": 0, "table": PathTable(paths).name,
                                "table_paths": paths, "indices": [2, 0, 1]})

    def test_reads_are_recorded(self):
        # The check on reads is worth what the recording catches.
        c, _ = self.client([self.line("stats")], [SPEC["error_lines"][""]], [self.line("ended")])
        c.stats()
        with self.assertRaises(DsmountError):
            c.declare_order("j", 0, ["a.jpg"])
        c.end_job("j")
        ev, order = SPEC["event_type"], field_type(SPEC["event_type"], "order")
        for want in [(ev, "type"), (ev, "stats"), (ev, "error"), (ev, "code"), (ev, "order"), (order, "ended")]:
            self.assertIn(want, self.reads)


class SourceTest(ProtocolTest):
    def test_string_keys_are_go_fields(self):
        # What the calls above do not reach: every string used as a key in
        # the client and the sampler (x["k"], x.get("k"), {"k": ...}) must
        # be a wire field of some Go type.
        names = {k for t in SPEC["types"].values() for k in t}
        bad = []
        for path in _SOURCES:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            for node in ast.walk(tree):
                keys = []
                if isinstance(node, ast.Subscript):
                    keys = [node.slice]
                elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                      and node.func.attr in ("get", "pop", "setdefault") and node.args):
                    keys = [node.args[0]]
                elif isinstance(node, ast.Dict):
                    keys = [k for k in node.keys if k is not None]
                for k in keys:
                    if isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value not in names:
                        bad.append("%s:%d: %r" % (os.path.basename(path), k.lineno, k.value))
        self.assertFalse(bad, "keys that are no field of the Go protocol types")


if __name__ == "__main__":
    unittest.main()
