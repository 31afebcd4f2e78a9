"""Unit tests of dsmount.control against a fake control entry."""

import json
import os
import tempfile
import unittest

from dsmount import CONTROL_NAME, Client, DsmountError, find_mount_root, relative_path
from dsmount.control import Relativizer

from .fakes import FakeDaemon, RefusingFile


class RelativePathTest(unittest.TestCase):
    def test_relative_paths_are_normalised(self):
        self.assertEqual(relative_path("/mnt/ds", "a/b.jpg"), "a/b.jpg")
        self.assertEqual(relative_path("/mnt/ds", "./a//b.jpg"), "a/b.jpg")
        self.assertEqual(relative_path("/mnt/ds", "a/x/../b.jpg"), "a/b.jpg")

    def test_absolute_paths_inside_the_mount(self):
        self.assertEqual(relative_path("/mnt/ds", "/mnt/ds/a/b.jpg"), "a/b.jpg")
        self.assertEqual(relative_path("/mnt/ds/", "/mnt/ds/a/b.jpg"), "a/b.jpg")
        self.assertEqual(relative_path("/mnt/ds", "/mnt/ds/x/../b.jpg"), "b.jpg")

    def test_pathlike_and_bytes(self):
        import pathlib
        self.assertEqual(relative_path("/mnt/ds", pathlib.PurePosixPath("/mnt/ds/a b/ü.jpg")), "a b/ü.jpg")
        self.assertEqual(relative_path("/mnt/ds", os.fsencode("/mnt/ds/c.jpg")), "c.jpg")

    def test_outside_the_mount(self):
        for p in ["/mnt/other/a.jpg", "/mnt/dsx/a.jpg", "/mnt/ds", "../a.jpg", "a/../../b", "."]:
            with self.subTest(p=p), self.assertRaises(ValueError):
                relative_path("/mnt/ds", p)

    def test_many_is_each(self):
        # many() takes a joined-string shortcut for clean absolute paths;
        # whatever the list, it must answer what a call per path does.
        r = Relativizer("/mnt/ds")
        lists = [
            ["/mnt/ds/a/b.jpg", "/mnt/ds/c.jpg"],
            ["/mnt/ds/a/b.jpg", "/mnt/ds/x/../c.jpg"],
            ["/mnt/ds/a//b.jpg", "/mnt/ds/c.jpg"],
            ["/mnt/ds/.hidden/b.jpg", "/mnt/ds/c.jpg"],
            ["/mnt/ds/a/", "/mnt/ds/c.jpg"],
            ["a/b.jpg", "/mnt/ds/c.jpg"],
            ["/mnt/ds/a.jpg", b"/mnt/ds/b.jpg"],
            ["/mnt/ds/a\0/mnt/ds/b.jpg"],
            ["/mnt/ds/a.jpg/mnt/ds/b.jpg", "/mnt/ds/c.jpg"],
            [],
        ]
        for paths in lists:
            with self.subTest(paths=paths):
                self.assertEqual(r.many(paths), [r(p) for p in paths])
        for paths in [["/mnt/ds/a.jpg", "/mnt/dsx/b.jpg"], ["/mnt/ds/a.jpg", "/mnt/ds"], ["/mnt/ds/a.jpg", "/mnt/ds/"]]:
            with self.subTest(paths=paths), self.assertRaises(ValueError):
                r.many(paths)

    def test_symlinked_root(self):
        with tempfile.TemporaryDirectory() as d:
            real = os.path.join(d, "real")
            os.mkdir(real)
            link = os.path.join(d, "link")
            os.symlink(real, link)
            self.assertEqual(relative_path(link, os.path.join(real, "a.jpg")), "a.jpg")
            self.assertEqual(relative_path(link, os.path.join(link, "a.jpg")), "a.jpg")


class FindMountRootTest(unittest.TestCase):
    def test_finds_the_directory_holding_the_control_entry(self):
        with tempfile.TemporaryDirectory() as d:
            root = os.path.join(d, "mnt")
            os.makedirs(os.path.join(root, "a", "b"))
            open(os.path.join(root, CONTROL_NAME), "w").close()
            f = os.path.join(root, "a", "b", "x.jpg")
            open(f, "w").close()
            self.assertEqual(find_mount_root(f), root)
            self.assertEqual(find_mount_root(os.path.join(root, "a")), root)
            self.assertEqual(find_mount_root(root), root)

    def test_not_in_a_mount(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(DsmountError):
                find_mount_root(d)
            with self.assertRaises(OSError):
                find_mount_root(os.path.join(d, "missing"))


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.daemon = FakeDaemon(files=["a.jpg", "b.jpg", "d/c.jpg"])
        self.client = Client("/mnt/ds", opener=self.daemon.opener)

    def test_declare_order(self):
        res = self.client.declare_order("job1", 3, ["a.jpg", "/mnt/ds/d/c.jpg"], next_paths=["b.jpg"])
        self.assertEqual(res["declared"], 2)
        self.assertEqual(res["next_declared"], 1)
        req = self.daemon.requests[-1]
        self.assertEqual(req, {"op": "order", "job": "job1", "epoch": 3,
                               "paths": ["a.jpg", "d/c.jpg"], "next": ["b.jpg"]})

    def test_long_request_in_many_writes(self):
        paths = ["a.jpg"] * 5000  # 40 KiB of JSON, written 1000 bytes at a time
        res = self.client.declare_order("job1", 0, paths)
        self.assertEqual(res["declared"], 1)
        self.assertEqual(res["duplicates"], 4999)
        self.assertEqual(len(self.daemon.requests[-1]["paths"]), 5000)

    def test_skipped_paths_are_reported(self):
        res = self.client.declare_order("job1", 0, ["a.jpg", "nope.jpg"])
        self.assertEqual((res["declared"], res["skipped"]), (1, 1))
        self.assertIn("nope.jpg", res["skipped_examples"][0])

    def test_error_events_raise(self):
        with self.assertRaisesRegex(DsmountError, "none of the 1 paths"):
            self.client.declare_order("job1", 0, ["nope.jpg"])
        with self.assertRaisesRegex(DsmountError, "names no files"):
            self.client.declare_order("job1", 0, [])

    def test_bad_arguments(self):
        with self.assertRaisesRegex(DsmountError, "job name"):
            self.client.declare_order("", 0, ["a.jpg"])
        with self.assertRaisesRegex(DsmountError, "negative"):
            self.client.declare_order("j", -1, ["a.jpg"])
        with self.assertRaises(ValueError):
            self.client.declare_order("j", 0, ["/elsewhere/a.jpg"])
        self.assertEqual(self.daemon.requests, [])

    def test_end_job_and_stats(self):
        self.client.declare_order("job1", 0, ["a.jpg"])
        self.assertEqual(self.client.stats()["mount"]["jobs"][0]["name"], "job1")
        self.assertTrue(self.client.end_job("job1"))
        self.assertFalse(self.client.end_job("job1"))
        self.assertEqual(self.client.stats()["mount"]["jobs"], [])

    def test_no_result(self):
        self.daemon.answer = lambda req: []
        with self.assertRaisesRegex(DsmountError, "no answer"):
            self.client.stats()

    def test_refused_at_the_write(self):
        # Over the caller's bound the daemon fails the write (EFBIG) and
        # queues its reason: the client reports that, not "File too large".
        reason = "control request of 70000000 bytes refused: a request of this user may have at most 67108864"
        client = Client("/mnt/ds", opener=lambda root: RefusingFile(json.dumps({"type": "error", "error": reason})))
        with self.assertRaisesRegex(DsmountError, "at most 67108864"):
            client.stats()
        # With no reason queued, the write's own error shows.
        client = Client("/mnt/ds", opener=lambda root: RefusingFile())
        with self.assertRaisesRegex(DsmountError, "File too large"):
            client.stats()

    def test_not_a_mount(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(DsmountError, "not inside a dsmount mount"):
                Client(d).stats()


class DeclareIndicesTest(unittest.TestCase):
    def test_table_sent_once_and_again_when_forgotten(self):
        from dsmount.control import PathTable
        files = ["d/%d.jpg" % i for i in range(10)]
        daemon = FakeDaemon(files)
        client = Client("/mnt/ds", opener=daemon.opener)
        table = PathTable(files)
        res = client.declare_indices("job", 0, table, [3, 1, 2], [0, 9])
        self.assertEqual((res["declared"], res["next_declared"]), (3, 2))
        self.assertEqual(daemon.orders()[-1]["paths"], ["d/3.jpg", "d/1.jpg", "d/2.jpg"])
        self.assertEqual(daemon.orders()[-1]["next"], ["d/0.jpg", "d/9.jpg"])
        sent = len(daemon.requests)
        client.declare_indices("job", 1, table, [5])
        self.assertEqual(len(daemon.requests), sent + 1, "the table is sent only once")
        daemon.tables.clear()  # a restarted daemon
        res = client.declare_indices("job", 2, table, [7, 8])
        self.assertEqual(res["declared"], 2)
        self.assertEqual(daemon.orders()[-1]["paths"], ["d/7.jpg", "d/8.jpg"])

    def test_a_path_with_nul_cannot_be_in_a_table(self):
        from dsmount.control import PathTable
        with self.assertRaises(ValueError):
            PathTable(["a\0b"])


if __name__ == "__main__":
    unittest.main()


class CachedFilesTest(unittest.TestCase):
    def test_bits(self):
        from dsmount import CachedFiles

        got = CachedFiles(10, bytes([0b10000010, 0b11111110]))  # files 1, 7, 9; bits past 10 are not files
        self.assertEqual([i for i in range(16) if i in got], [1, 7, 9])
        self.assertEqual(len(got), 3)
        self.assertNotIn(-1, got)
        self.assertNotIn("1", got)
        try:
            import numpy as np
        except ImportError:  # pragma: no cover - the suite installs it
            return
        self.assertIn(np.int64(9), got)

    def test_malformed_answers(self):
        from dsmount import CachedFiles

        with self.assertRaises(DsmountError):
            CachedFiles(9, b"\x00")  # 9 files need 2 bytes
        for res in ({"files": 2}, {"files": 2, "bitmap": "!!"}, {"files": 3, "bitmap": "AA=="}):
            with self.assertRaises(DsmountError):
                CachedFiles.from_result(res, 2)
