"""The sluice command: --help, exit codes, one-line errors, the data dir lock,
`sluice status`, `sluice land`, daemon mode (DESIGN.md §1, commands)."""

import errno
import os
import re
import signal
import stat
import subprocess
import time

import pytest

import util
from util import read_file, write_file, one_line

STATUS_RE = re.compile(r"^landing files=(\d+) bytes=(\d+) in_flight=(\d+) refused=(-|[A-Z]+:\d+(,[A-Z]+:\d+)*)$")


def status_line(d):
    refused = ",".join("%s:%d" % (k, v) for k, v in sorted(d["refused"].items()) if v) or "-"
    return "landing files=%d bytes=%d in_flight=%d refused=%s" % (
        d["filesLanded"], d["bytesLanded"], d["filesInFlight"], refused)


def foreign_dir(tmp_path):
    d = tmp_path / "foreign"
    d.mkdir()
    (d / "thesis.txt").write_bytes(b"not sluice's\n")
    return d


# -- help and misuse ----------------------------------------------------------

@pytest.mark.parametrize("cmd", [[], ["mount"], ["land"], ["status"], ["run"]],
                         ids=["main", "mount", "land", "status", "run"])
def test_help(cmd):
    if cmd == ["run"]:
        util.require_command("run")
    p = util.sluice(*(cmd + ["--help"]))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip(), "--help printed nothing on stdout"
    assert p.stderr == ""
    if cmd:
        assert cmd[0] in p.stdout


@pytest.mark.parametrize("args", [[], ["no-such-command"], ["mount"], ["mount", "/tmp"],
                                  ["land"], ["status"], ["mount", "--no-such-flag"]],
                         ids=["none", "unknown-cmd", "mount-noargs", "mount-onearg",
                              "land-noargs", "status-noargs", "unknown-flag"])
def test_misuse_exits_2(args):
    p = util.sluice(*args)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stderr.strip(), "misuse must be explained on stderr"


# -- mount: bad input -----------------------------------------------------------

def test_mount_nonexistent_mountpoint(tmp_path):
    mp = tmp_path / "no" / "such" / "mnt"
    p = util.sluice("mount", tmp_path / "data", mp, "-f", timeout=15)
    assert p.returncode == 2, (p.returncode, p.stderr)
    line = one_line(p.stderr)
    assert str(mp) in line
    assert not util.is_listed_mount(mp)


@pytest.mark.parametrize("cmd", ["mount", "land", "status", "run"])
def test_foreign_data_dir_refused(tmp_path, cmd):
    if cmd == "run":
        util.require_command("run")
    data = foreign_dir(tmp_path)
    mp = tmp_path / "mnt"
    mp.mkdir()
    f = write_file(str(tmp_path / "x.json"), b"x\n")
    args = {"mount": ["mount", data, mp, "-f"],
            "land": ["land", data, f],
            "status": ["status", data],
            "run": ["run", "--available-now", data]}[cmd]
    try:
        p = util.sluice(*args, timeout=15)
    finally:
        util.lazy_unmount(mp)
    assert p.returncode == 4, (p.returncode, p.stderr)
    one_line(p.stderr)
    assert sorted(os.listdir(data)) == ["thesis.txt"], "sluice wrote into a folder it does not own"
    assert (data / "thesis.txt").read_bytes() == b"not sluice's\n"


def test_invalid_config_refused(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "sluice.json").write_bytes(b'{"queries": {"q": {"source": ')
    mp = tmp_path / "mnt"
    mp.mkdir()
    try:
        p = util.sluice("mount", data, mp, "-f", timeout=15)
    finally:
        util.lazy_unmount(mp)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert "sluice.json" in one_line(p.stderr)


@pytest.mark.parametrize("foreground", [True, False], ids=["f", "daemon"])
def test_mount_unknown_option(tmp_path, foreground):
    mp = tmp_path / "mnt"
    mp.mkdir()
    args = ["mount", tmp_path / "data", mp] + (["-f"] if foreground else [])
    args += ["-o", "allow_other,no_such_option_xyz"]
    try:
        p = util.sluice(*args, timeout=15)
    finally:
        util.lazy_unmount(mp)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "no_such_option_xyz" in one_line(p.stderr)
    assert not util.is_listed_mount(mp)


@pytest.mark.parametrize("opt", ["land=bogus", "land="])
def test_mount_bad_option_value(tmp_path, opt):
    mp = tmp_path / "mnt"
    mp.mkdir()
    try:
        p = util.sluice("mount", tmp_path / "data", mp, "-f", "-o", opt, timeout=15)
    finally:
        util.lazy_unmount(mp)
    assert p.returncode == 2, (p.returncode, p.stderr)
    one_line(p.stderr)


def test_mount_without_dev_fuse(tmp_path):
    if util.run(["unshare", "-m", "true"]).returncode != 0:
        pytest.skip("unshare -m not permitted here")
    mp = tmp_path / "mnt"
    mp.mkdir()
    script = 'mount -t tmpfs none /dev && exec "$0" mount "$1" "$2" -f'
    p = util.run(["unshare", "-m", "bash", "-c", script, util.sluice_bin(),
                  str(tmp_path / "data"), str(mp)], timeout=20)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode != 0
    assert "/dev/fuse" in one_line(err)
    assert not util.is_listed_mount(mp)


# -- data dir: created when missing or empty, accepted again -------------------

@pytest.mark.parametrize("kind", ["missing", "empty", "only-config"])
def test_data_dir_new(mounts, tmp_path, kind):
    data = tmp_path / "newdata"
    if kind != "missing":
        data.mkdir()
    if kind == "only-config":
        (data / "sluice.json").write_bytes(b'{"queries": {}}\n')
    m = mounts.new(data=data)
    assert set(os.listdir(m.mnt)) == util.LAYOUT
    write_file(m.inp("a.json"), b"a\n")
    m.wait_landed()
    m.unmount()
    assert os.path.isfile(data / "lock")
    # what sluice made, sluice accepts again
    m2 = mounts.remount(m)
    assert read_file(m2.inp("a.json")) == b"a\n"
    assert m2.landing()["filesLanded"] == 1


@pytest.mark.parametrize("cut", ["no-reserve", "short-reserve"])
def test_layout_cut_short_is_completed(mounts, tmp_path, cut):
    """The reserve is the layout's last piece: a start skips making the
    layout when it is whole, and completes it otherwise, as after a crash
    during the first start (here: a blob folder and the reserve missing, or
    a reserve made short of room). What had landed stays readable."""
    data = tmp_path / "data"
    m = mounts.new(data=data)
    write_file(m.inp("a.json"), b"a\n")
    m.wait_landed()
    m.unmount()
    os.rmdir(data / "blobs" / "7f")
    if cut == "no-reserve":
        os.unlink(data / "reserve")
    else:
        os.truncate(data / "reserve", 4096)
    m2 = mounts.remount(m)
    assert read_file(m2.inp("a.json")) == b"a\n"
    big = os.urandom(300 << 10)  # a blob: its id may fall in any folder
    for i in range(300):
        write_file(m2.inp("b%d.bin" % i), big[:1 << 17] + b"%d" % i)
    m2.wait_landed()
    m2.unmount()
    assert os.path.isdir(data / "blobs" / "7f")
    assert os.path.getsize(data / "reserve") == 1 << 20


# -- the lock -----------------------------------------------------------------

def test_second_process_refused_while_mounted(mounts, tmp_path):
    m = mounts.new()
    f = write_file(str(tmp_path / "x.json"), b"x\n")
    other = tmp_path / "other"
    other.mkdir()

    t0 = time.monotonic()
    p = util.sluice("land", m.data, f, timeout=10)
    assert p.returncode == 3, (p.returncode, p.stderr)
    one_line(p.stderr)

    try:
        p = util.sluice("mount", m.data, other, "-f", timeout=10)
    finally:
        util.lazy_unmount(other)
    assert p.returncode == 3, (p.returncode, p.stderr)
    one_line(p.stderr)
    assert not util.is_listed_mount(other)

    assert time.monotonic() - t0 < 8, "refusals must be immediate (no waiting on the lock)"

    # status takes no lock
    p = util.sluice("status", m.data, timeout=10)
    assert p.returncode == 0, p.stderr
    assert STATUS_RE.match(p.stdout.splitlines()[0]), p.stdout
    # and the mount is unharmed
    assert os.listdir(m.inp()) == []
    write_file(m.inp("y.json"), b"y\n")
    assert m.wait_landed()["filesLanded"] == 1


def test_run_refused_while_mounted(mounts):
    util.require_command("run")
    m = mounts.new()
    t0 = time.monotonic()
    p = util.sluice("run", "--available-now", m.data, timeout=10)
    assert p.returncode == 3, (p.returncode, p.stderr)
    one_line(p.stderr)
    assert time.monotonic() - t0 < 8


def test_lock_freed_by_kill9(mounts, tmp_path):
    m = mounts.new()
    write_file(m.inp("a.json"), b"a\n")
    m.wait_landed()
    m.kill9()
    util.lazy_unmount(m.mnt)
    f = write_file(str(tmp_path / "b.json"), b"b\n")
    p = util.sluice("land", m.data, f, timeout=15)
    assert p.returncode == 0, p.stderr
    m2 = mounts.remount(m)
    assert sorted(os.listdir(m2.inp())) == ["a.json", "b.json"]


def test_dead_mountpoint_hint(mounts):
    m = mounts.new()
    m.kill9()
    # the mountpoint is now dead (ENOTCONN); mounting again must say what to do
    p = util.sluice("mount", m.data, m.mnt, "-f", timeout=15)
    assert p.returncode != 0
    assert "fusermount3 -u" in one_line(p.stderr)
    util.lazy_unmount(m.mnt)
    m2 = mounts.remount(m)
    assert set(os.listdir(m2.mnt)) == util.LAYOUT


def test_mount_d_traces_fuse_requests(mounts):
    """`-d` (--help: "trace FUSE requests") prints libfuse's request trace
    on stderr; without it the same operations print nothing."""
    m = mounts.new(extra_args=["-d"])
    m.allow(r"unique: \d+, error: -\d+ ")  # the trace's error replies (ENOENT of a LOOKUP)
    write_file(m.inp("a.txt"), b"x\n")
    m.wait_landed()
    m.unmount()
    trace = m.stderr()
    for op in ("LOOKUP", "CREATE", "WRITE", "FLUSH", "RELEASE"):
        assert re.search(r"opcode: %s \(" % op, trace), (op, trace[-2000:])
    quiet = mounts.new()
    write_file(quiet.inp("a.txt"), b"x\n")
    quiet.wait_landed()
    quiet.unmount()
    assert "opcode:" not in quiet.stderr()


# -- status ----------------------------------------------------------------

def test_status_matches_counters(mounts):
    m = mounts.new()
    p = util.sluice("status", m.data)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["landing files=0 bytes=0 in_flight=0 refused=-"]

    write_file(m.inp("a.json"), b"0123456789")
    write_file(m.inp("b.json"), util.pattern(70_000, 5))
    m.wait_landed()
    write_file(m.inp(".t.json.tmp"), b"in flight")
    util.expect_errno(errno.EPERM, os.open, m.inp("a.json"), os.O_WRONLY)  # EPERM
    d = util.wait_counters(m.mnt, filesInFlight=1)
    assert d["filesLanded"] == 2 and d["bytesLanded"] == 70_010
    assert d["refused"] == {"EPERM": 1}

    p = util.sluice("status", m.data)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == status_line(d) == "landing files=2 bytes=70010 in_flight=1 refused=EPERM:1"
    assert len(lines) == 1, "no queries, so no query lines"

    m.unmount()
    p = util.sluice("status", m.data)
    assert p.returncode == 0, p.stderr
    mt = STATUS_RE.match(p.stdout.splitlines()[0])
    assert mt, p.stdout
    assert (mt.group(1), mt.group(2)) == ("2", "70010")


# -- land -------------------------------------------------------------------------

def test_land_command(mounts, tmp_path, src):
    data = tmp_path / "landdata"  # missing: created
    a = write_file(str(src / "a.json"), b'{"a": 1}\n', mode=0o640, mtime_ns=1_500_000_000_250_000_000)
    b = write_file(str(src / "b.csv"), util.pattern(100_000, 9), mode=0o604, mtime_ns=1_500_000_100_000_000_000)
    p = util.sluice("land", data, a, b, "--to", "sub/dir")
    assert p.returncode == 0, p.stderr
    c = write_file(str(src / "c.json"), b"c\n")
    p = util.sluice("land", data, c)
    assert p.returncode == 0, p.stderr

    p = util.sluice("status", data)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0].startswith("landing files=3 bytes=%d " % (9 + 100_000 + 2))

    m = mounts.new(data=data)
    assert sorted(os.listdir(m.inp())) == ["c.json", "sub"]
    assert sorted(os.listdir(m.inp("sub", "dir"))) == ["a.json", "b.csv"]
    for s, name in [(a, "a.json"), (b, "b.csv")]:
        landed = m.inp("sub", "dir", name)
        assert read_file(landed) == read_file(s)
        st, st0 = os.stat(landed), os.stat(s)
        assert stat.S_IMODE(st.st_mode) == stat.S_IMODE(st0.st_mode)
        assert st.st_mtime_ns == st0.st_mtime_ns
    assert read_file(m.inp("c.json")) == b"c\n"
    d = m.landing()
    assert d["filesLanded"] == 3 and d["filesInFlight"] == 0
    # landed by `sluice land` means landed: immutable
    util.expect_errno(errno.EPERM, os.open, m.inp("sub", "dir", "a.json"), os.O_WRONLY | os.O_APPEND)


@pytest.mark.parametrize("what", ["folder", "temp-dot", "temp-part", "existing", "to-parent",
                                  "to-absolute"])
def test_land_refused(tmp_path, src, what):
    data = tmp_path / "landdata"
    first = write_file(str(src / "a.json"), b"first\n")
    p = util.sluice("land", data, first)
    assert p.returncode == 0, p.stderr

    other = tmp_path / "other"
    other.mkdir()
    if what == "folder":
        os.mkdir(src / "folder")
        write_file(str(src / "folder" / "x.json"), b"x\n")
        args, name = [src / "folder"], "folder"
    elif what == "temp-dot":
        args, name = [write_file(str(src / ".x.json.tmp"), b"x\n")], ".x.json.tmp"
    elif what == "temp-part":
        args, name = [write_file(str(src / "x.json.part"), b"x\n")], "x.json.part"
    elif what == "existing":
        args, name = [write_file(str(other / "a.json"), b"second\n")], "a.json"
    elif what == "to-parent":
        args, name = [write_file(str(src / "y.json"), b"y\n"), "--to", "../x"], "../x"
    else:
        args, name = [write_file(str(src / "y.json"), b"y\n"), "--to", "/etc"], "/etc"
    p = util.sluice("land", data, *args)
    assert p.returncode != 0, p.stdout
    assert p.returncode in (1, 2)
    assert name in one_line(p.stderr)

    p = util.sluice("status", data)
    assert p.stdout.startswith("landing files=1 bytes=6 "), p.stdout


# -- daemon mode ------------------------------------------------------------------

def _daemon_pids(mp):
    """Our own daemon, found by its unique mountpoint on its command line."""
    pids = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % e, "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if os.fsencode(str(mp)) in args and b"mount" in args:
            pids.append(int(e))
    return pids


def test_daemon_mode(tmp_path):
    mp = tmp_path / "mnt"
    mp.mkdir()
    out = open(tmp_path / "daemon.out", "wb+")
    err = open(tmp_path / "daemon.err", "wb+")
    try:
        p = subprocess.run([util.sluice_bin(), "mount", str(tmp_path / "data"), str(mp)],
                           stdin=subprocess.DEVNULL, stdout=out, stderr=err, timeout=15)
        assert p.returncode == 0, (tmp_path / "daemon.err").read_bytes()
        assert os.path.ismount(mp), "mounted by the time the parent exits"
        pids = _daemon_pids(mp)
        assert len(pids) == 1
        write_file(os.path.join(mp, "in", "d.json"), b"daemon\n")
        util.wait_landed(str(mp))
        p = util.run(["fusermount3", "-u", str(mp)])
        assert p.returncode == 0, p.stderr
        util.wait_for(lambda: not os.path.exists("/proc/%d" % pids[0]) or
                      open("/proc/%d/stat" % pids[0]).read().split()[2] == "Z",
                      10, "the daemon to exit after unmount")
    finally:
        util.lazy_unmount(mp)
        for pid in _daemon_pids(mp):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        out.close()
        err.close()
    assert (tmp_path / "daemon.err").read_bytes() == b""
