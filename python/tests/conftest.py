"""pytest settings for python/tests (the tests themselves are unittest
classes, which pytest runs as they are)."""

import os


def pytest_report_header(config):
    # Which dsmount the tests import: the checkout's python/dsmount, or an
    # installed copy (go test's TestPipInstall runs pytest with
    # --import-mode=append so that the installed one wins).
    import dsmount
    return "dsmount %s from %s" % (dsmount.__version__, os.path.dirname(os.path.abspath(dsmount.__file__)))
