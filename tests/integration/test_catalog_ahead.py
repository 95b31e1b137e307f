"""Zeros written ahead of the catalog's pages (core/store/catalog.c,
zero_ahead()): a landing's flush then overwrites blocks that exist instead
of growing data.mdb, which on ext4 saves a journal commit per flush. The
zeros lie past every page either meta page names, so they must never be
read as data: after a kill -9 every acknowledged file is there and `sluice
check` is clean; and they save time, never space: a small disk gets none,
and a write of them that fails is cut back while landing goes on."""

import os
import re
import signal
import subprocess

import pytest

import util
from util import read_file, write_file

MiB = 1024 * 1024


def catalog_slack(data):
    """Bytes of data.mdb past the last page LMDB uses (mdb_stat -e): the
    zeros. Not the file's size: the journal's ring alone is 4 MiB of pages."""
    cat = os.path.join(str(data), "catalog")
    out = subprocess.run(["mdb_stat", "-e", cat], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    field = lambda name: int(re.search(r"%s: (\d+)" % name, out).group(1))
    used = field("Number of pages used") * field("Page size")
    return os.stat(os.path.join(cat, "data.mdb")).st_size - used


def land_some(m, prefix, n):
    want = {}
    for i in range(n):
        name = "%s%03d.json" % (prefix, i)
        body = b'{"n": %d, "pad": "%s"}\n' % (i, b"x" * (i * 37 % 3000))
        write_file(m.inp(name), body)
        want[name] = body
    return want


@pytest.mark.timeout(120)
@pytest.mark.allow_stderr(r"recover")
def test_zeros_ahead_survive_kill9(mounts, tmp_path):
    if util.free_bytes(tmp_path) < 512 * MiB:
        pytest.skip("zeros are written ahead only with 64 chunks (256 MiB) free")
    m = mounts.new()
    want = land_some(m, "a", 40)
    m.wait_landed()
    # landing put a chunk of zeros (4 MiB at least) past the pages in use
    assert catalog_slack(m.data) >= 2 * MiB, catalog_slack(m.data)

    m.kill9()
    assert m.proc.returncode == -signal.SIGKILL
    util.lazy_unmount(m.mnt)
    util.wait_for(lambda: not util.is_listed_mount(m.mnt), 10, "the dead mount to go")
    m2 = mounts.remount(m)
    want.update(land_some(m2, "b", 40))
    d = m2.wait_landed()
    assert d["filesLanded"] == 80
    for name, body in want.items():
        assert read_file(m2.inp(name)) == body, name
    m2.unmount()
    p = util.sluice("check", m.data)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.timeout(120)
def test_no_zeros_ahead_when_turned_off(mounts):
    """SLUICE_ZERO_AHEAD=0 (for measurements): data.mdb grows page by page."""
    m = mounts.new(env=dict(os.environ, SLUICE_ZERO_AHEAD="0"))
    land_some(m, "a", 40)
    m.wait_landed()
    assert catalog_slack(m.data) < MiB, catalog_slack(m.data)


@pytest.mark.timeout(120)
def test_no_zeros_ahead_on_a_small_disk(tmpfs_data, mounts):
    """Less free space than 64 chunks of zeros (256 MiB): none is written."""
    data = tmpfs_data
    m = mounts.new(data=data)
    want = land_some(m, "a", 40)
    d = m.wait_landed()
    assert d["filesLanded"] == 40
    assert catalog_slack(data) < MiB, catalog_slack(data)
    for name, body in want.items():
        assert read_file(m.inp(name)) == body, name


@pytest.mark.timeout(120)
@pytest.mark.allow_stderr(r"writing ahead of its pages failed")
def test_zeros_ahead_give_way_when_a_write_fails(mounts):
    """A write of zeros that fails (as on a disk that filled up since the
    look at its free space) is cut back, zero-ahead stops, landing goes on."""
    if not util.faults_compiled():
        pytest.skip("needs a build with fault points (-Dfaults=true)")
    env = dict(os.environ, SLUICE_FAULT_ERR="catalog.zero_ahead:1:ENOSPC")
    m = mounts.new(env=env)
    want = land_some(m, "a", 40)
    d = m.wait_landed()
    assert d["filesLanded"] == 40
    assert util.refused(d, "ENOSPC") == 0, d
    assert "writing ahead of its pages failed (No space left on device)" in m.stderr()
    # the zeros written before the failure were cut back, and none followed
    assert catalog_slack(m.data) < MiB, catalog_slack(m.data)
    want.update(land_some(m, "b", 40))
    m.wait_landed()
    assert catalog_slack(m.data) < MiB, catalog_slack(m.data)
    for name, body in want.items():
        assert read_file(m.inp(name)) == body, name
    m.unmount()
    p = util.sluice("check", m.data)
    assert p.returncode == 0, p.stdout + p.stderr
