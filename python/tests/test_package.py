"""The package as pip installs it: version, py.typed, no torch needed."""

import importlib.metadata
import os
import subprocess
import sys
import textwrap
import unittest

import dsmount

# Imports the package with torch made unimportable (as if not installed),
# uses what needs no torch, and asks for what does.
WITHOUT_TORCH = textwrap.dedent("""
    import logging, sys
    sys.modules["torch"] = None  # import torch: ModuleNotFoundError
    import dsmount, dsmount.control, dsmount.frameworks, dsmount.loaders, dsmount.sampler
    from dsmount import *
    logging.disable(logging.WARNING)  # "pass mountpoint=": no mount here
    s = OrderedSampler([2, 0, 1], ["a", "b", "c"])
    assert list(s) == [2, 0, 1], list(s)
    assert default_job_name()
    for name in ("StagingLoader", "DistributedOrderedSampler"):
        try:
            getattr(dsmount, name)
        except ModuleNotFoundError as e:
            assert "dsmount[torch]" in str(e), str(e)
        else:
            raise AssertionError("dsmount.%s without torch" % name)
    print("imported", dsmount.__file__, "without torch")
""")


class PackageTest(unittest.TestCase):
    def test_version(self):
        self.assertRegex(dsmount.__version__, r"^\d+\.\d+\.\d+")
        try:
            dist = importlib.metadata.distribution("dsmount")
        except importlib.metadata.PackageNotFoundError:
            return  # run from the checkout, not installed
        if os.path.realpath(str(dist.locate_file("dsmount/__init__.py"))) == os.path.realpath(dsmount.__file__):
            self.assertEqual(dist.version, dsmount.__version__)  # pyproject.toml reads it there

    def test_py_typed(self):
        # PEP 561: type checkers use the package's hints only if it has it.
        self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(dsmount.__file__), "py.typed")))

    def test_torch_is_optional(self):
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(dsmount.__file__))),
                   PYTHONDONTWRITEBYTECODE="1")
        r = subprocess.run([sys.executable, "-c", WITHOUT_TORCH], env=env, capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("without torch", r.stdout)

    def test_public_names(self):
        for name in dsmount.__all__:
            self.assertTrue(hasattr(dsmount, name), name)
        self.assertNotIn("StagingLoader", dsmount.__all__)  # needs torch: star imports must work without it
        with self.assertRaises(AttributeError):
            dsmount.no_such_name  # noqa: B018


if __name__ == "__main__":
    unittest.main()
