"""What a landed file refuses, what an in-flight file allows, and the rules
for unlink, links, folders and renameat2 (DESIGN.md §1, landing rules table)."""

import errno
import os
import stat

import pytest

import util
from util import read_file, write_file, expect_errno

MTIME_NS = 1_700_000_000_000_000_000
DATA = b'{"landed": true}\n' * 10


@pytest.fixture
def landed(mnt):
    """mnt with in/f.json landed (mode 0644, fixed mtime) and the counters settled."""
    write_file(mnt.inp("f.json"), DATA, mode=0o644, mtime_ns=MTIME_NS)
    d = mnt.wait_landed()
    assert d["filesLanded"] == 1
    return mnt


def assert_unchanged(m, name="f.json"):
    p = m.inp(name)
    assert read_file(p) == DATA
    st = os.stat(p)
    assert stat.S_IMODE(st.st_mode) == 0o644
    assert st.st_mtime_ns == MTIME_NS
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())
    assert st.st_size == len(DATA)


def refused_once(m, before, err="EPERM"):
    d = m.landing()
    assert util.refused(d, err) == util.refused(before, err) + 1, (before, d)


@pytest.mark.parametrize("flags", [
    os.O_WRONLY,
    os.O_RDWR,
    os.O_WRONLY | os.O_APPEND,
    os.O_WRONLY | os.O_TRUNC,
    os.O_RDWR | os.O_TRUNC,
    os.O_WRONLY | os.O_CREAT,
    os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
], ids=["WRONLY", "RDWR", "APPEND", "TRUNC", "RDWR_TRUNC", "CREAT", "CREAT_TRUNC"])
def test_landed_open_for_write_refused(landed, flags):
    before = landed.landing()
    expect_errno(errno.EPERM, os.open, landed.inp("f.json"), flags, 0o644)
    refused_once(landed, before)
    assert_unchanged(landed)


def test_landed_read_allowed(landed):
    fd = os.open(landed.inp("f.json"), os.O_RDONLY)
    try:
        assert os.read(fd, 1 << 20) == DATA
    finally:
        os.close(fd)
    assert landed.landing()["refused"] == {}


@pytest.mark.parametrize("size", [0, 5, len(DATA) + 10])
def test_landed_truncate_refused(landed, size):
    before = landed.landing()
    expect_errno(errno.EPERM, os.truncate, landed.inp("f.json"), size)
    refused_once(landed, before)
    assert_unchanged(landed)


def test_landed_shell_tools_refused(landed):
    for script in ["echo x >> in/f.json", "echo x > in/f.json", "truncate -s 0 in/f.json"]:
        p = util.run(["bash", "-c", script], cwd=landed.mnt)
        assert p.returncode != 0, script
        assert b"Operation not permitted" in p.stderr, (script, p.stderr)
    assert_unchanged(landed)


def assert_bytes_unchanged(m, name="f.json"):
    assert read_file(m.inp(name)) == DATA
    assert os.stat(m.inp(name)).st_size == len(DATA)


def test_landed_chmod(landed, mounts):
    """Mode changes after landing (install -m, cp -p, unzip set it late): allowed, durable."""
    before = landed.landing()
    os.chmod(landed.inp("f.json"), 0o600)
    assert stat.S_IMODE(os.stat(landed.inp("f.json")).st_mode) == 0o600
    os.chmod(landed.inp("f.json"), 0o4755)
    assert_bytes_unchanged(landed)
    assert util.refused(landed.landing()) == util.refused(before)
    landed.unmount()
    m = mounts.remount(landed)
    st = os.stat(m.inp("f.json"))
    assert stat.S_IMODE(st.st_mode) == 0o4755 and st.st_mtime_ns == MTIME_NS
    assert_bytes_unchanged(m)
    # still immutable bytes
    expect_errno(errno.EPERM, os.open, m.inp("f.json"), os.O_WRONLY)


def test_landed_chown(landed, mounts):
    """chown is allowed and durable, and clears the set-id bits (as the kernel does)."""
    os.chmod(landed.inp("f.json"), 0o6755)
    os.chown(landed.inp("f.json"), 1234, -1)
    os.chown(landed.inp("f.json"), -1, 1234)
    st = os.stat(landed.inp("f.json"))
    assert (st.st_uid, st.st_gid) == (1234, 1234)
    assert stat.S_IMODE(st.st_mode) == 0o755, oct(st.st_mode)
    landed.unmount()
    m = mounts.remount(landed)
    st = os.stat(m.inp("f.json"))
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1234, 1234, 0o755)
    assert_bytes_unchanged(m)


def test_landed_utime(landed, mounts):
    """utimensat sets mtime and atime as given (curl -R, wget -N, shutil.copy2), durably."""
    before = landed.landing()
    os.utime(landed.inp("f.json"), ns=(MTIME_NS - 5, MTIME_NS + 1))
    st = os.stat(landed.inp("f.json"))
    assert (st.st_atime_ns, st.st_mtime_ns) == (MTIME_NS - 5, MTIME_NS + 1)
    p = util.run(["touch", "-m", "-d", "@981173106", landed.inp("f.json")])
    assert p.returncode == 0, p.stderr
    landed.unmount()
    m = mounts.remount(landed)
    st = os.stat(m.inp("f.json"))
    assert st.st_mtime_ns == 981173106 * 10**9 and st.st_atime_ns == MTIME_NS - 5
    assert_bytes_unchanged(m)
    # touch's open(O_WRONLY|O_CREAT) is refused first (counted), then it sets the times
    assert util.refused(m.landing()) == util.refused(before) + 1


@pytest.mark.parametrize("dst", ["g.json", ".f.json.tmp", "sub/f.json"])
def test_landed_rename_refused(landed, dst):
    os.mkdir(landed.inp("sub"))
    before = landed.landing()
    expect_errno(errno.EPERM, os.rename, landed.inp("f.json"), landed.inp(dst))
    refused_once(landed, before)
    assert_unchanged(landed)
    assert not os.path.exists(landed.inp(dst))


def test_mv_of_landed_file_fails_cleanly(landed, tmp_path):
    # mv within the mount: rename refused; mv must not fall back to copy+unlink
    p = util.run(["mv", landed.inp("f.json"), landed.inp("g.json")])
    assert p.returncode != 0
    assert b"Operation not permitted" in p.stderr
    assert sorted(os.listdir(landed.inp())) == ["f.json"]
    assert_unchanged(landed)


def test_rename_in_flight_onto_landed_refused(landed):
    write_file(landed.inp(".g.json.tmp"), b"replacement\n")
    util.wait_counters(landed.mnt, filesInFlight=1)
    before = landed.landing()
    expect_errno(errno.EPERM, os.rename, landed.inp(".g.json.tmp"), landed.inp("f.json"))
    refused_once(landed, before)
    assert_unchanged(landed)
    assert read_file(landed.inp(".g.json.tmp")) == b"replacement\n"

    # an open final-named in-flight file onto the landed name: refused too
    fd = os.open(landed.inp("h.json"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"h\n")
        expect_errno(errno.EPERM, os.rename, landed.inp("h.json"), landed.inp("f.json"))
    finally:
        os.close(fd)
    assert_unchanged(landed)
    d = util.wait_counters(landed.mnt, filesLanded=2, filesInFlight=1)
    assert read_file(landed.inp("h.json")) == b"h\n"


def test_rsync_changed_file_onto_landed_name_refused(landed, src):
    """A re-upload of a changed file under a landed name fails (rsync exit 23)
    and leaves the landed file and no temp file behind."""
    write_file(str(src / "f.json"), b"changed\n")
    p = util.run(["rsync", "-a", str(src / "f.json"), landed.inp() + "/"])
    assert p.returncode == 23, (p.returncode, p.stderr)
    assert_unchanged(landed)
    assert sorted(os.listdir(landed.inp())) == ["f.json"]


def test_rename_in_flight_onto_in_flight_replaces(mnt):
    write_file(mnt.inp(".a.tmp"), b"new\n")
    write_file(mnt.inp(".b.tmp"), b"old\n")
    util.wait_counters(mnt.mnt, filesInFlight=2)
    os.rename(mnt.inp(".a.tmp"), mnt.inp(".b.tmp"))
    d = util.wait_counters(mnt.mnt, filesInFlight=1)
    assert d["filesLanded"] == 0
    assert read_file(mnt.inp(".b.tmp")) == b"new\n"
    os.rename(mnt.inp(".b.tmp"), mnt.inp("b.json"))
    d = mnt.wait_landed()
    assert d["filesLanded"] == 1 and d["bytesLanded"] == 4
    assert read_file(mnt.inp("b.json")) == b"new\n"


def test_renameat2_noreplace_and_exchange(landed):
    write_file(landed.inp(".t1.tmp"), b"t1\n")
    write_file(landed.inp(".t2.tmp"), b"t2\n")
    util.wait_counters(landed.mnt, filesInFlight=2)
    # NOREPLACE onto an existing name: EEXIST, landed or in flight
    expect_errno(errno.EEXIST, util.renameat2, landed.inp(".t1.tmp"), landed.inp("f.json"),
                 util.RENAME_NOREPLACE)
    expect_errno(errno.EEXIST, util.renameat2, landed.inp(".t1.tmp"), landed.inp(".t2.tmp"),
                 util.RENAME_NOREPLACE)
    # EXCHANGE: EINVAL, between in-flight files and with a landed one
    expect_errno(errno.EINVAL, util.renameat2, landed.inp(".t1.tmp"), landed.inp(".t2.tmp"),
                 util.RENAME_EXCHANGE)
    expect_errno(errno.EINVAL, util.renameat2, landed.inp(".t1.tmp"), landed.inp("f.json"),
                 util.RENAME_EXCHANGE)
    assert read_file(landed.inp(".t1.tmp")) == b"t1\n"
    assert read_file(landed.inp(".t2.tmp")) == b"t2\n"
    assert_unchanged(landed)
    # NOREPLACE onto a free final name is an ordinary landing rename
    util.renameat2(landed.inp(".t1.tmp"), landed.inp("t1.json"), util.RENAME_NOREPLACE)
    d = util.wait_counters(landed.mnt, filesLanded=2, filesInFlight=1)
    assert read_file(landed.inp("t1.json")) == b"t1\n"


# -- unlink ------------------------------------------------------------------

def test_unlink_in_flight_temp_never_lands(mnt):
    write_file(mnt.inp(".u.tmp"), b"temp\n")
    util.wait_counters(mnt.mnt, filesInFlight=1)
    os.unlink(mnt.inp(".u.tmp"))
    d = mnt.wait_landed()
    assert d["filesLanded"] == 0 and d["bytesLanded"] == 0
    assert os.listdir(mnt.inp()) == []


def test_unlink_open_final_file_never_lands(mnt):
    fd = os.open(mnt.inp("u.json"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"never lands\n")
        os.unlink(mnt.inp("u.json"))
        assert os.listdir(mnt.inp()) == []
        os.write(fd, b"still writable\n")
    finally:
        os.close(fd)
    d = mnt.wait_landed()
    assert d["filesLanded"] == 0 and d["bytesLanded"] == 0
    assert os.listdir(mnt.inp()) == []
    # the name is free again and can land afresh
    write_file(mnt.inp("u.json"), b"second\n")
    d = mnt.wait_landed()
    assert d["filesLanded"] == 1
    assert read_file(mnt.inp("u.json")) == b"second\n"


def test_unlink_landed_file_no_query(landed):
    os.unlink(landed.inp("f.json"))
    assert os.listdir(landed.inp()) == []
    assert not os.path.exists(landed.inp("f.json"))
    d = landed.landing()
    assert d["refused"] == {}
    # the name can be used again
    write_file(landed.inp("f.json"), b"again\n")
    d = landed.wait_landed()
    assert d["filesLanded"] == 2
    assert read_file(landed.inp("f.json")) == b"again\n"


# -- links and special files -----------------------------------------------

def test_link_symlink_mknod_refused(landed):
    write_file(landed.inp(".t.tmp"), b"in flight\n")
    util.wait_counters(landed.mnt, filesInFlight=1)
    before = landed.landing()
    expect_errno(errno.EPERM, os.link, landed.inp("f.json"), landed.inp("l.json"))
    expect_errno(errno.EPERM, os.link, landed.inp(".t.tmp"), landed.inp("l2.json"))
    expect_errno(errno.EPERM, os.symlink, "f.json", landed.inp("s.json"))
    expect_errno(errno.EPERM, os.symlink, "/etc/passwd", landed.inp(".s.tmp"))
    expect_errno(errno.EPERM, os.mknod, landed.inp("fifo"), stat.S_IFIFO | 0o644)
    expect_errno(errno.EPERM, os.mknod, landed.inp("reg.json"), stat.S_IFREG | 0o644)
    assert sorted(os.listdir(landed.inp())) == [".t.tmp", "f.json"]
    d = landed.landing()
    assert util.refused(d) == util.refused(before) + 6
    assert d["filesLanded"] == 1
    assert_unchanged(landed)


def test_xattrs_not_supported(landed):
    with pytest.raises(OSError) as ei:
        os.setxattr(landed.inp("f.json"), "user.x", b"1")
    assert ei.value.errno in (errno.ENOTSUP, errno.EOPNOTSUPP)
    assert_unchanged(landed)


# -- folders -----------------------------------------------------------------

def test_folder_operations(mnt):
    os.mkdir(mnt.inp("d"))
    os.makedirs(mnt.inp("d", "e", "f"))
    os.chmod(mnt.inp("d"), 0o750)
    assert stat.S_IMODE(os.stat(mnt.inp("d")).st_mode) == 0o750
    os.utime(mnt.inp("d"), ns=(MTIME_NS, MTIME_NS))
    assert os.stat(mnt.inp("d")).st_mtime_ns == MTIME_NS
    expect_errno(errno.EEXIST, os.mkdir, mnt.inp("d"))
    expect_errno(errno.ENOTEMPTY, os.rmdir, mnt.inp("d", "e"))
    os.rmdir(mnt.inp("d", "e", "f"))
    os.rmdir(mnt.inp("d", "e"))
    assert os.listdir(mnt.inp("d")) == []

    # a folder holding an in-flight file / a landed file is not empty
    write_file(mnt.inp("d", ".x.tmp"), b"x")
    expect_errno(errno.ENOTEMPTY, os.rmdir, mnt.inp("d"))
    os.mkdir(mnt.inp("g"))
    write_file(mnt.inp("g", "y.json"), b"y")
    util.wait_counters(mnt.mnt, filesLanded=1, filesInFlight=1)
    expect_errno(errno.ENOTEMPTY, os.rmdir, mnt.inp("g"))
    assert os.listdir(mnt.inp("g")) == ["y.json"]
    # chmod/utime of a folder holding a landed file: still allowed
    os.chmod(mnt.inp("g"), 0o700)
    os.utime(mnt.inp("g"), ns=(MTIME_NS, MTIME_NS))
    assert stat.S_IMODE(os.stat(mnt.inp("g")).st_mode) == 0o700


def test_folder_rename_allowed_without_landed_files(mnt):
    os.makedirs(mnt.inp("a", "b"))
    write_file(mnt.inp("a", "b", ".p.tmp"), b"pending\n")
    util.wait_counters(mnt.mnt, filesInFlight=1)
    os.rename(mnt.inp("a"), mnt.inp("a2"))
    assert os.listdir(mnt.inp()) == ["a2"]
    assert read_file(mnt.inp("a2", "b", ".p.tmp")) == b"pending\n"
    # and the in-flight file still lands at its new path
    os.rename(mnt.inp("a2", "b", ".p.tmp"), mnt.inp("a2", "b", "p.json"))
    d = mnt.wait_landed()
    assert d["filesLanded"] == 1
    assert read_file(mnt.inp("a2", "b", "p.json")) == b"pending\n"


def test_folder_rename_refused_with_landed_files(mnt):
    os.makedirs(mnt.inp("a", "b", "c"))
    write_file(mnt.inp("a", "b", "c", "deep.json"), b"deep\n")
    mnt.wait_landed()
    before = mnt.landing()
    expect_errno(errno.EPERM, os.rename, mnt.inp("a"), mnt.inp("a2"))
    expect_errno(errno.EPERM, os.rename, mnt.inp("a", "b"), mnt.inp("b2"))
    expect_errno(errno.EPERM, os.rename, mnt.inp("a", "b", "c"), mnt.inp("a", ".c.tmp"))
    assert util.refused(mnt.landing()) == util.refused(before) + 3
    assert os.listdir(mnt.inp()) == ["a"]
    assert read_file(mnt.inp("a", "b", "c", "deep.json")) == b"deep\n"
    # an empty sibling folder can still be renamed
    os.mkdir(mnt.inp("a", "empty"))
    os.rename(mnt.inp("a", "empty"), mnt.inp("a", "renamed"))
    assert sorted(os.listdir(mnt.inp("a"))) == ["b", "renamed"]
