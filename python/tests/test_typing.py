"""The package's type hints, checked with mypy (Debian: python3-mypy).

mypy checks a small client of the public API against the package the tests
import: from the checkout (found through MYPYPATH, so mypy also checks the
package's own code, with python/pyproject.toml's [tool.mypy] settings), or
as installed by pip (found in site-packages through its py.typed marker).
The client's deliberate mistakes each carry a ``type: ignore``; with
warn_unused_ignores an ignore that silences nothing is an error, so the
check fails if mypy can't see the hints.
"""

import os
import subprocess
import sys
import tempfile
import unittest

import dsmount

try:
    import mypy
except ImportError:
    mypy = None

PYPROJECT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pyproject.toml")

CLIENT = '''
from typing import List, Optional

import dsmount
from dsmount import Client, DsmountError, OrderedSampler, PathTable
from dsmount.control import JSONObject

s = OrderedSampler([2, 0, 1], ["a", "b", "c"], mountpoint="/mnt/ds", job="j", strict=True)
n: int = len(s)
e: int = s.epoch
order: List[int] = list(s)
last: Optional[JSONObject] = s.last_result
res: JSONObject = dsmount.declare_order("/mnt/ds", "j", 0, ["a"], next_paths=None)
c = Client("/mnt/ds")
t = PathTable(["a", "b"])
ended: bool = c.end_job("j")
data: bytes = dsmount.read_bytes("/etc/hostname")
root: str = dsmount.find_mount_root("/mnt/ds/a")
rel: str = dsmount.relative_path("/mnt/ds", b"/mnt/ds/a")
version: str = dsmount.__version__
followed: OrderedSampler = dsmount.follow_accelerate(object())
err: Optional[str] = DsmountError("x").code
d = dsmount.DistributedOrderedSampler(range(3), ["a", "b", "c"], num_replicas=2, rank=0)
job: str = d.job

# Mistakes mypy must see (each ignore must be used):
bad_epoch: str = s.epoch  # type: ignore[assignment]
bad_name: int = dsmount.default_job_name()  # type: ignore[assignment]
dsmount.end_job("/mnt/ds", 3)  # type: ignore[arg-type]
OrderedSampler([0], ["a"], shuffle=True)  # type: ignore[call-arg]
'''


@unittest.skipUnless(os.path.isfile(PYPROJECT), "no python/pyproject.toml next to the tests")
class TypingTest(unittest.TestCase):
    def test_mypy_present(self):
        # Not to pass by being skipped: test/run.sh installs python3-mypy.
        self.assertIsNotNone(mypy, "mypy is missing (Debian: python3-mypy)")

    @unittest.skipIf(mypy is None, "mypy is not installed")
    def test_hints(self):
        pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(dsmount.__file__)))
        installed = os.path.basename(pkg_parent) in ("site-packages", "dist-packages")
        env = dict(os.environ)
        env.pop("MYPYPATH", None)
        if not installed:
            env["MYPYPATH"] = pkg_parent
        with tempfile.TemporaryDirectory() as d:
            client = os.path.join(d, "client.py")
            with open(client, "w") as f:
                f.write(CLIENT)
            r = subprocess.run([sys.executable, "-m", "mypy", "--config-file", PYPROJECT,
                                "--cache-dir", os.path.join(d, "cache"), client],
                               cwd=d, env=env, capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, "mypy on %s (%s):\n%s%s" % (
            dsmount.__file__, "installed" if installed else "checkout", r.stdout, r.stderr))


if __name__ == "__main__":
    unittest.main()
