import os
import subprocess
import sys

import pytest

NPLM = os.path.join(os.path.dirname(sys.executable), "nplm")


def run_nplm(*args, stdin=None, cwd=None):
    """Run the installed `nplm` and return (status, stdout, stderr)."""
    proc = subprocess.run([NPLM, *map(str, args)], input=stdin, capture_output=True,
                          text=True, cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def nplm():
    return run_nplm


def assert_one_line_error(status, stderr, *fragments):
    assert status == 2, stderr
    assert "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    for fragment in fragments:
        assert fragment in stderr, stderr
