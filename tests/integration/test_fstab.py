"""mount.sluice for /etc/fstab (DESIGN.md §1): mount(8)'s options handled,
fstab-only options dropped, the rest handed to libfuse, unknown ones refused."""

import errno
import os
import subprocess

import pytest

import util
from util import one_line

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def helper(tmp_path):
    """A mount.sluice link to the built binary, as `meson install` makes it."""
    link = tmp_path / "bin" / "mount.sluice"
    link.parent.mkdir()
    os.symlink(util.sluice_bin(), link)
    return str(link)


@pytest.fixture
def dirs(tmp_path):
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    yield str(data), str(mnt)
    # the helper daemonizes: stop what we mounted
    if util.is_listed_mount(str(mnt)):
        subprocess.run(["fusermount3", "-u", str(mnt)], timeout=util.UNMOUNT_TIMEOUT)
    util.lazy_unmount(str(mnt))


def wait_gone(mnt):
    util.wait_for(lambda: not util.is_listed_mount(mnt), util.UNMOUNT_TIMEOUT, "unmount")


def test_helper_drops_fstab_options_and_mounts(helper, dirs):
    data, mnt = dirs
    p = util.run([helper, data, mnt, "-s", "-n", "-v", "-o",
                  "defaults,noauto,nofail,_netdev,user,users,nouser,auto,"
                  "x-systemd.automount,comment=landing,land=rename"])
    assert p.returncode == 0, p.stderr
    assert util.is_listed_mount(mnt)
    assert set(os.listdir(mnt)) == util.LAYOUT
    # land=rename was ours, not libfuse's: strict mode is on
    util.expect_errno(errno.EPERM, os.open, os.path.join(mnt, "in", "direct.json"),
                      os.O_WRONLY | os.O_CREAT, 0o644)
    p = util.run(["fusermount3", "-u", mnt])
    assert p.returncode == 0, p.stderr
    wait_gone(mnt)


def test_helper_fake_checks_without_mounting(helper, dirs):
    data, mnt = dirs
    p = util.run([helper, data, mnt, "-f", "-o", "defaults"])
    assert p.returncode == 0, p.stderr
    assert not util.is_listed_mount(mnt)
    assert os.path.isdir(os.path.join(data, "catalog"))  # checked and created


def test_helper_rejects_unknown_option_after_dropping(helper, dirs):
    data, mnt = dirs
    p = util.run([helper, data, mnt, "-o", "noauto,no_such_opt_abc"])
    assert p.returncode == 2, p.stderr
    assert "no_such_opt_abc" in one_line(util._txt(p.stderr))
    assert not util.is_listed_mount(mnt)


def test_helper_passes_libfuse_options(helper, dirs):
    data, mnt = dirs
    p = util.run([helper, data, mnt, "-o", "defaults,allow_other"])
    assert p.returncode == 0, p.stderr
    # allow_other brings default_permissions: the kernel checks other users
    opts = [l for l in open("/proc/mounts").read().splitlines() if " %s " % mnt in l]
    assert opts and "allow_other" in opts[0] and "default_permissions" in opts[0]
    subprocess.run(["fusermount3", "-u", mnt], timeout=util.UNMOUNT_TIMEOUT)
    wait_gone(mnt)


def test_mount_8_uses_the_helper(dirs):
    """The real path: `mount -t sluice` runs /sbin/mount.sluice."""
    target = "/sbin/mount.sluice"
    if os.path.lexists(target):
        pytest.skip("%s exists already; not replacing it" % target)
    data, mnt = dirs
    os.symlink(util.sluice_bin(), target)
    try:
        p = util.run(["mount", "-t", "sluice", "-o", "noauto,x-test=1", data, mnt])
        assert p.returncode == 0, p.stderr
        assert util.is_listed_mount(mnt)
        fstype = [t for m, t in util.proc_mounts() if m == os.path.realpath(mnt)]
        assert fstype == ["fuse.sluice"]
        p = util.run(["umount", mnt])
        assert p.returncode == 0, p.stderr
        wait_gone(mnt)
    finally:
        os.unlink(target)
