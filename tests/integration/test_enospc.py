"""A full backing filesystem: ENOSPC at write or close poisons the file, nothing
lands, the space comes back, and the next file lands (DESIGN.md §1)."""

import errno
import os
import time

import pytest

import util
from util import read_file, write_file

MiB = 1024 * 1024


@pytest.mark.timeout(90)
@pytest.mark.allow_stderr(r"ENOSPC|No space left|space")
def test_enospc_poisons_and_frees(tmpfs_data, mounts):
    m = mounts.new(data=tmpfs_data)
    write_file(m.inp("before.json"), b"landed before\n")
    d0 = m.wait_landed()
    time.sleep(0.2)
    free0 = util.free_bytes(tmpfs_data)
    assert free0 < 64 * MiB

    failed_at = None
    chunk = b"z" * MiB
    fd = os.open(m.inp("big.json"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for i in range(100):
            try:
                os.write(fd, chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
                failed_at = "write %d" % i
                break
    finally:
        try:
            os.close(fd)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
            failed_at = failed_at or "close"
    assert failed_at, "100 MiB fitted in a 64 MiB tmpfs without an error"

    d = m.wait_landed()
    assert "big.json" not in os.listdir(m.inp()), "a poisoned file stays listed"
    assert d["filesLanded"] == d0["filesLanded"]
    assert d["bytesLanded"] == d0["bytesLanded"]
    assert util.refused(d, "ENOSPC") >= 1, d
    # the poisoned file's bytes are freed at its release
    util.wait_for(lambda: util.free_bytes(tmpfs_data) >= free0 - 4 * MiB, 15,
                  "the space to come back (free %d, was %d)" % (util.free_bytes(tmpfs_data), free0))

    # the next file lands, and the earlier one is intact
    write_file(m.inp("after.json"), b"landed after\n")
    d = m.wait_landed()
    assert d["filesLanded"] == d0["filesLanded"] + 1
    assert read_file(m.inp("after.json")) == b"landed after\n"
    assert read_file(m.inp("before.json")) == b"landed before\n"
    assert sorted(os.listdir(m.inp())) == ["after.json", "before.json"]

    # and it all survives a remount
    m.unmount()
    m2 = mounts.remount(m)
    assert sorted(os.listdir(m2.inp())) == ["after.json", "before.json"]
    assert m2.landing()["filesLanded"] == d0["filesLanded"] + 1


@pytest.mark.timeout(90)
@pytest.mark.allow_stderr(r"ENOSPC|No space left|space")
def test_enospc_cp_fails_and_nothing_lands(tmpfs_data, mounts, src):
    m = mounts.new(data=tmpfs_data)
    time.sleep(0.2)
    free0 = util.free_bytes(tmpfs_data)
    big = src / "big.bin"
    with open(big, "wb") as f:
        f.truncate(0)
        for _ in range(100):
            f.write(b"\x01" * MiB)
    p = util.run(["cp", str(big), m.inp("big.bin")], timeout=60)
    assert p.returncode != 0
    assert b"No space left" in p.stderr, p.stderr
    d = m.wait_landed()
    assert d["filesLanded"] == 0
    assert os.listdir(m.inp()) == []
    assert util.refused(d, "ENOSPC") >= 1, d
    # the bytes are freed at the poisoned file's last RELEASE, which the
    # kernel sends asynchronously after cp's close
    util.wait_for(lambda: util.free_bytes(tmpfs_data) >= free0 - 4 * MiB, 15,
                  "the space to come back (free %d, was %d)" % (util.free_bytes(tmpfs_data), free0))
    write_file(m.inp("small.json"), b"small\n")
    d = m.wait_landed()
    assert d["filesLanded"] == 1


@pytest.mark.timeout(90)
def test_small_disk_lands_without_the_journal(request, tmp_path, mounts):
    """The catalog journal's ring (4 MiB) is made only with 32 MiB free: on a
    4 MiB disk the mount goes without it (two flushes per landing group),
    quietly, and keeps its space for landings."""
    d = tmp_path / "small"
    d.mkdir()
    util.mount_tmpfs(d, "4m")
    try:
        m = mounts.new(data=d / "data")
        want = {}
        for i in range(20):
            name = "f%02d.json" % i
            want[name] = b'{"i": %d}\n' % i
            write_file(m.inp(name), want[name])
        m.wait_landed()
        for name, body in want.items():
            assert read_file(m.inp(name)) == body
        m.unmount()
        data_mdb = d / "data" / "catalog" / "data.mdb"
        assert os.stat(data_mdb).st_size < MiB, os.stat(data_mdb).st_size
        p = util.sluice("check", d / "data")
        assert p.returncode == 0, p.stdout + p.stderr
    finally:
        mounts.finish(request)  # the daemon holds files on the tmpfs
        util.umount_tmpfs(d)
