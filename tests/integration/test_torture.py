"""The kill -9 torture driver (tests/torture/torture.py) as a test: 200 kill
points by default (SLUICE_TORTURE_POINTS), a fixed seed, every invariant."""

import os
import subprocess
import sys

import pytest

import util

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.timeout(1200)
def test_torture_kill_points():
    points = int(os.environ.get("SLUICE_TORTURE_POINTS", "200"))
    p = subprocess.run([sys.executable, os.path.join(HERE, "..", "torture", "torture.py"),
                        "--seed", "20261130", "--points", str(points),
                        "--sluice", util.sluice_bin()],
                       capture_output=True, text=True, timeout=1150)
    print(p.stdout)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "lost 0, duplicated 0, partial 0" in p.stdout
