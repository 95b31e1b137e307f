"""in/ behaves like a POSIX file system where DESIGN.md §1 says it must:
reads stop at st_size, impossible sizes fail the call and not the file,
set-id bits are cleared by other users' writes, folders keep their times,
atime is stored, an open unlinked file has no link, sed's scratch name is
temporary, and a temp file left released is counted as abandoned."""

import errno
import json
import os
import stat
import subprocess
import time

import pytest

import util
from util import read_file, write_file, expect_errno

pytestmark = pytest.mark.timeout(120)


def check_ok(m):
    """sluice check on m's data dir (unmounts m): catalog and blobs agree."""
    m.unmount()
    p = util.sluice("check", m.data)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("size", [100, 100_000])
def test_fallocate_keep_size_reads_stop_at_size(mounts, size):
    """fallocate(KEEP_SIZE) past EOF reserves space, but reads and the landed
    blob hold exactly st_size bytes (an outside suite saw 1 MiB served)."""
    m = mounts.new()
    p = m.inp("f.bin")
    data = util.pattern(size)
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.write(fd, data)
        try:
            os.posix_fallocate(fd, 0, 1)  # allocate inside: size unchanged
        except OSError as e:
            assert e.errno == errno.EOPNOTSUPP
        # KEEP_SIZE is mode 1; python has no wrapper: use fallocate(1)
        r = util.run(["fallocate", "-n", "-o", "0", "-l", str(1 << 20), p])
        assert r.returncode == 0, r.stderr
        assert os.fstat(fd).st_size == size
        assert os.pread(fd, 2 << 20, 0) == data
        assert os.pread(fd, 100, size) == b""
    finally:
        os.close(fd)
    m.wait_landed()
    assert read_file(p) == data and os.stat(p).st_size == size
    check_ok(m)


def test_impossible_size_fails_the_call_only(mounts):
    """EFBIG from truncate or pwrite past the limit fails that call; the file
    keeps its bytes, takes more and lands (DESIGN: poison only on storage
    errors)."""
    m = mounts.new()
    p = m.inp("f.json")
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.write(fd, b'{"a":1}\n')
        with pytest.raises(OSError) as e:
            os.ftruncate(fd, 1 << 62)
        assert e.value.errno in (errno.EFBIG, errno.EINVAL)
        with pytest.raises(OSError) as e:
            os.pwrite(fd, b"x", (1 << 63) - 1)
        assert e.value.errno in (errno.EFBIG, errno.EINVAL)
        os.write(fd, b'{"a":2}\n')
    finally:
        os.close(fd)
    d = m.wait_landed()
    assert d["filesLanded"] == 1
    assert read_file(p) == b'{"a":1}\n{"a":2}\n'
    check_ok(m)


def as_nobody():
    os.setgid(65534)
    os.setuid(65534)


def by_nobody(fd, code):
    """Runs python code as uid 65534 on FD, a descriptor root opened: the
    write reaches sluice as that user's (permission checks happen at open)."""
    r = subprocess.run(["/usr/bin/python3", "-c", "import os\nFD = %d\n%s" % (fd, code)],
                       preexec_fn=as_nobody, pass_fds=(fd,),
                       timeout=util.CMD_TIMEOUT, capture_output=True)
    assert r.returncode == 0, r.stderr


def test_write_by_other_user_clears_setid(mounts):
    """A write or truncate by another user clears S_ISUID, and S_ISGID when
    group exec is set, as the kernel does on local file systems; root's own
    writes don't. Mounts default to nosuid,nodev."""
    m = mounts.new(opts=["allow_other"])
    line = [l for l in open("/proc/mounts").read().splitlines() if " %s " % m.mnt in l][0]
    assert "nosuid" in line.split()[3] and "nodev" in line.split()[3], line
    for name, mode, want, code in [
            ("a.part", 0o6777, 0o0777, "os.write(FD, b'z')"),
            ("b.part", 0o6767, 0o2767, "os.write(FD, b'z')"),
            ("c.part", 0o4777, 0o0777, "os.ftruncate(FD, 2)")]:
        p = m.inp(name)
        fd = os.open(p, os.O_CREAT | os.O_RDWR | os.O_APPEND, 0o600)
        try:
            os.write(fd, b"xy")
            os.fchmod(fd, mode)
            os.write(fd, b"")  # root's write: unchanged
            assert stat.S_IMODE(os.fstat(fd).st_mode) == mode
            by_nobody(fd, code)
            got = stat.S_IMODE(os.fstat(fd).st_mode)
            assert got == want, (name, oct(got), oct(want))
        finally:
            os.close(fd)
        assert read_file(p) == (b"xyz" if "write" in code else b"xy")


def mtime(p):
    return os.stat(p).st_mtime_ns


def test_folder_times_follow_entries(mounts):
    """Creating, removing or renaming an entry moves the folder's mtime and
    ctime (a poller or make sees the change); the times survive a remount."""
    m = mounts.new()
    d = m.inp("d")
    os.mkdir(d)
    os.utime(d, ns=(10**18, 10**18))
    t0 = mtime(d)
    assert t0 == 10**18
    steps = [
        lambda: write_file(os.path.join(d, "f.json"), b"{}\n"),      # create
        lambda: write_file(os.path.join(d, "x.tmp"), b"1"),          # create temp
        lambda: os.rename(os.path.join(d, "x.tmp"), os.path.join(d, "y.tmp")),
        lambda: os.unlink(os.path.join(d, "y.tmp")),                 # unlink
        lambda: os.mkdir(os.path.join(d, "sub")),                    # mkdir
        lambda: os.rmdir(os.path.join(d, "sub")),                    # rmdir
    ]
    last = t0
    for k, step in enumerate(steps):
        step()
        now = mtime(d)
        assert now > last, "step %d left the folder's mtime at %d" % (k, now)
        st = os.stat(d)
        assert st.st_ctime_ns >= now
        last = now
    # rename across folders moves both
    e = m.inp("e")
    os.mkdir(e)
    os.utime(e, ns=(10**18, 10**18))
    write_file(os.path.join(d, "g.part"), b"1")
    before = mtime(d)
    os.rename(os.path.join(d, "g.part"), os.path.join(e, "g.part"))
    assert mtime(e) > 10**18 and mtime(d) > before
    # an explicit time wins (rsync -a sets the folder's at the end)
    os.utime(d, ns=(5 * 10**17, 5 * 10**17))
    assert mtime(d) == 5 * 10**17
    write_file(os.path.join(e, "h.json"), b"{}\n")
    util.wait_for(lambda: m.landing()["filesLanded"] == 2, 10, "two files landed")
    want_e = mtime(e)
    m.unmount()
    m = mounts.remount(m)
    assert mtime(d) == 5 * 10**17
    assert mtime(e) == want_e


def test_atime_is_stored(mounts):
    """utimensat's atime is kept as given, in flight, landed and after a remount."""
    m = mounts.new()
    p = m.inp("f.json")
    write_file(p, b"{}\n")
    m.wait_landed()
    os.utime(p, ns=(123_000_000_000, 456_000_000_000))
    st = os.stat(p)
    assert (st.st_atime_ns, st.st_mtime_ns) == (123_000_000_000, 456_000_000_000)
    q = m.inp("g.part")
    write_file(q, b"1")
    os.utime(q, ns=(7_000_000_000, 8_000_000_000))
    assert os.stat(q).st_atime_ns == 7_000_000_000
    m.unmount()
    m = mounts.remount(m)
    st = os.stat(m.inp("f.json"))
    assert (st.st_atime_ns, st.st_mtime_ns) == (123_000_000_000, 456_000_000_000)


def test_unlinked_open_file_has_no_link(mounts):
    m = mounts.new()
    p = m.inp("f.part")
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.write(fd, b"abc")
        assert os.fstat(fd).st_nlink == 1
        os.unlink(p)
        assert os.fstat(fd).st_nlink == 0
        assert os.pread(fd, 10, 0) == b"abc"
    finally:
        os.close(fd)
    assert not os.path.exists(p)
    assert m.wait_landed()["filesLanded"] == 0


def test_sed_scratch_name_is_temporary(mounts):
    """sed -i writes sedXXXXXX (six alphanumerics) then renames it over the
    draft: the scratch file never lands; `sedan.txt` is an ordinary name."""
    m = mounts.new()
    write_file(m.inp("draft.tmp"), b"hello\n")
    r = util.run(["sed", "-i", "s/hello/world/", m.inp("draft.tmp")])
    assert r.returncode == 0, r.stderr
    os.rename(m.inp("draft.tmp"), m.inp("final.txt"))
    write_file(m.inp("sedan.txt"), b"car\n")
    write_file(m.inp("sedAb12Z9"), b"scratch\n")
    util.wait_for(lambda: m.landing()["filesLanded"] == 2, 10, "two files landed")
    time.sleep(0.2)
    d = m.landing()
    assert (d["filesLanded"], d["filesInFlight"]) == (2, 1), d
    assert read_file(m.inp("final.txt")) == b"world\n"
    # the temp one is still writable: not landed
    with open(m.inp("sedAb12Z9"), "ab") as f:
        f.write(b"more\n")
    expect_errno(errno.EPERM, os.open, m.inp("sedan.txt"), os.O_WRONLY)
    assert sorted(os.listdir(m.inp())) == ["final.txt", "sedAb12Z9", "sedan.txt"]


def test_abandoned_temp_file_counted_once(mounts):
    """A temp-named file released and never renamed is counted in
    tempAbandoned once (and logged once); a renamed one is not."""
    env = dict(os.environ, SLUICE_TEMP_ABANDON_MS="300")
    m = mounts.new(env=env)
    m.allow(r"never renamed: counted in tempAbandoned")
    write_file(m.inp("left.part"), b"1")
    write_file(m.inp("moved.part"), b"2")
    os.rename(m.inp("moved.part"), m.inp("moved.json"))
    fd = os.open(m.inp("open.part"), os.O_CREAT | os.O_WRONLY, 0o644)  # still open: not abandoned
    try:
        util.wait_for(lambda: m.landing().get("tempAbandoned") == 1, 10, "tempAbandoned == 1")
        time.sleep(1)
        assert m.landing()["tempAbandoned"] == 1
        assert m.stderr().count("never renamed") == 1
        assert "left.part" in m.stderr()
    finally:
        os.close(fd)
    m.unmount()
    m = mounts.remount(m)
    assert m.landing()["tempAbandoned"] == 1  # committed with the counters


def test_bundle_beside_a_processed_file_reaches_the_query(mounts, tmp_path):
    """A bundle renamed from a temp folder into a folder whose files a query
    already processed: its files land with their landing time as age clock
    (they were once skipped by maxFileAge as files from 1970)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "sluice.json").write_text(json.dumps({"queries": {"dev": {
        "source": {"format": "json", "path": "dev", "schema": "id STRING"},
        "sink": {"format": "json"}}}}))
    src = tmp_path / "src" / "b=1"
    src.mkdir(parents=True)
    for i in range(3):
        (src / ("p%d.json" % i)).write_text('{"id":"p%d"}\n' % i)
    m = mounts.new(data=data)
    os.mkdir(m.inp("dev"))
    write_file(m.inp("dev", "a.json"), b'{"id":"a"}\n')
    util.wait_for(lambda: os.path.isdir(m.p("out", "dev")) and util.list_out(m.p("out", "dev")),
                  10, "the first batch")
    r = util.run(["cp", "-r", str(src), m.inp("dev", ".b=1.stage")])
    assert r.returncode == 0, r.stderr
    os.rename(m.inp("dev", ".b=1.stage"), m.inp("dev", "b=1"))

    def rows():
        out = []
        for f in util.list_out(m.p("out", "dev")):
            out += [json.loads(l)["id"] for l in read_file(m.p("out", "dev", f)).splitlines()]
        return sorted(out)
    util.wait_for(lambda: len(rows()) == 4, 10, "four rows in out/")
    assert rows() == ["a", "p0", "p1", "p2"]
    report = json.loads(read_file(m.p("status", "dev.json")))
    assert report["skippedByMaxFileAge"] == 0
