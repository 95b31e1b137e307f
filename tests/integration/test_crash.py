"""kill -9 of writers and of the daemon: the documented hazard, strict mode,
and recovery after a crash (DESIGN.md §1 durability and hazards)."""

import errno
import os
import signal
import subprocess
import sys
import time

import pytest

import util
from util import read_file, write_file, pattern

CHUNK = 64 * 1024


def slow_cp(src_fifo, dst):
    """A real cp reading from a FIFO: it writes what it is fed, when fed."""
    return subprocess.Popen(["cp", src_fifo, dst], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def feed_then_kill(fifo, cp, dst, data, nchunks):
    """Feed nchunks of data to cp, wait until the mount shows them, kill -9 cp."""
    w = os.open(fifo, os.O_WRONLY)  # blocks until cp opened the FIFO
    try:
        for i in range(nchunks):
            os.write(w, data[i * CHUNK:(i + 1) * CHUNK])
        util.wait_for(lambda: os.path.exists(dst) and os.stat(dst).st_size >= nchunks * CHUNK,
                      10, "cp to write %d bytes" % (nchunks * CHUNK))
        os.kill(cp.pid, signal.SIGKILL)
        cp.wait(timeout=10)
    finally:
        try:
            os.close(w)
        except OSError:
            pass
    assert cp.returncode == -signal.SIGKILL


def test_killed_cp_lands_what_it_wrote(mnt, tmp_path):
    """The documented hazard: the implicit close of a killed writer lands a prefix."""
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    data = pattern(10 * CHUNK, 11)
    dst = mnt.inp("big.json")
    cp = slow_cp(fifo, dst)
    feed_then_kill(fifo, cp, dst, data, 3)

    d = mnt.wait_landed()
    assert d["filesLanded"] == 1
    got = read_file(dst)
    assert 0 < len(got) < len(data)
    assert got == data[:len(got)], "landed file is not a prefix of what was written"
    assert len(got) == 3 * CHUNK
    assert d["bytesLanded"] == len(got)
    # and it is landed: immutable
    util.expect_errno(errno.EPERM, os.open, dst, os.O_WRONLY | os.O_APPEND)


def test_killed_python_writer_lands_prefix(mnt):
    """A writer pausing between writes to a final name, killed mid-way."""
    code = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
i = 0
while True:
    os.write(fd, (b"%08d\n" % i) * 1000)
    print(i, flush=True)
    i += 1
    time.sleep(0.05)
"""
    dst = mnt.inp("slow.json")
    w = subprocess.Popen([sys.executable, "-c", code, dst], stdout=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    try:
        for _ in range(5):  # five writes done
            assert w.stdout.readline()
    finally:
        os.kill(w.pid, signal.SIGKILL)
        w.wait(timeout=10)
        w.stdout.close()
    d = mnt.wait_landed()
    assert d["filesLanded"] == 1
    got = read_file(dst)
    assert len(got) >= 5 * 9000
    # a prefix of what it wrote (a write(2) cut by the kill may end mid-record)
    want = b"".join((b"%08d\n" % i) * 1000 for i in range(len(got) // 9000 + 1))
    assert got == want[:len(got)]
    assert d["bytesLanded"] == len(got)


def test_strict_mode_killed_writers_land_nothing(mounts, tmp_path):
    m = mounts.new(opts=["land=rename"])
    # cp into a final name: refused at create, nothing to land
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    cp = slow_cp(fifo, m.inp("big.json"))
    w = os.open(fifo, os.O_WRONLY)  # cp opens its source first, then the target
    os.close(w)
    _, err = cp.communicate(timeout=10)
    assert cp.returncode != 0
    assert b"Operation not permitted" in err, err
    assert m.landing()["filesLanded"] == 0
    assert os.listdir(m.inp()) == []

    # a writer on a temp name, killed: it stays in flight and never lands
    code = r"""
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"partial\n")
print("written", flush=True)
time.sleep(60)
"""
    w = subprocess.Popen([sys.executable, "-c", code, m.inp(".big.json.tmp")],
                         stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert w.stdout.readline() == b"written\n"
    finally:
        os.kill(w.pid, signal.SIGKILL)
        w.wait(timeout=10)
        w.stdout.close()
    d = util.wait_counters(m.mnt, filesInFlight=1)
    time.sleep(0.2)
    d = m.landing()
    assert d["filesLanded"] == 0 and d["bytesLanded"] == 0
    assert os.listdir(m.inp()) == [".big.json.tmp"]


def blob_count(data):
    return util.count_files(os.path.join(data, "blobs"))


@pytest.mark.timeout(90)
@pytest.mark.allow_stderr(r"recover")
def test_kill9_daemon_then_remount(mounts):
    m = mounts.new()
    # landed and settled
    small = b'{"small": 1}\n'
    big = pattern(300_000, 21)
    write_file(m.inp("small.json"), small, mtime_ns=1_650_000_000_000_000_000)
    os.mkdir(m.inp("d"))
    write_file(m.inp("d", "big.json"), big, mode=0o640)
    d = m.wait_landed()
    assert d["filesLanded"] == 2

    # close() returned success just before the kill: must survive
    os.mkdir(m.inp("late"))
    closed_big = pattern(200_000, 22)
    closed_small = b"closed just now\n"
    write_file(m.inp("late", "closed-big.json"), closed_big)
    write_file(m.inp("closed-small.json"), closed_small)
    blobs_before = blob_count(m.data)

    # written but never closed: a temp name and a final name
    fds = []
    try:
        for name in [".open.json.tmp", "open-final.json"]:
            fd = os.open(m.inp(name), os.O_WRONLY | os.O_CREAT, 0o644)
            fds.append(fd)
            os.write(fd, pattern(300_000, 23))
        m.kill9()
    finally:
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass
    assert m.proc.returncode == -signal.SIGKILL
    util.lazy_unmount(m.mnt)
    util.wait_for(lambda: not util.is_listed_mount(m.mnt), 10, "the dead mount to go")

    m2 = mounts.remount(m)
    d = m2.wait_landed()
    assert sorted(os.listdir(m2.inp())) == ["closed-small.json", "d", "late", "small.json"]
    assert os.listdir(m2.inp("late")) == ["closed-big.json"]
    assert read_file(m2.inp("small.json")) == small
    assert os.stat(m2.inp("small.json")).st_mtime_ns == 1_650_000_000_000_000_000
    assert read_file(m2.inp("d", "big.json")) == big
    assert os.stat(m2.inp("d", "big.json")).st_mode & 0o777 == 0o640
    assert read_file(m2.inp("late", "closed-big.json")) == closed_big
    assert read_file(m2.inp("closed-small.json")) == closed_small
    assert d["filesLanded"] == 4
    assert d["bytesLanded"] == len(small) + len(big) + len(closed_big) + len(closed_small)
    assert d["filesInFlight"] == 0
    # the recovered files are landed: immutable
    util.expect_errno(errno.EPERM, os.open, m2.inp("closed-small.json"), os.O_WRONLY)
    # the never-closed files left no blob behind
    assert blob_count(m2.data) == blobs_before, "leaked blobs after recovery"
    # and the names are free
    write_file(m2.inp("open-final.json"), b"fresh\n")
    d = m2.wait_landed()
    assert d["filesLanded"] == 5
    assert read_file(m2.inp("open-final.json")) == b"fresh\n"


@pytest.mark.allow_stderr(r"recover")
def test_kill9_daemon_twice_keeps_everything(mounts):
    """Recovery itself is crash-safe: kill again right after the remount."""
    m = mounts.new()
    for i in range(20):
        write_file(m.inp("f%02d.json" % i), b"%d\n" % i)
    m.kill9()
    util.lazy_unmount(m.mnt)
    m2 = mounts.remount(m)
    m2.kill9()
    util.lazy_unmount(m2.mnt)
    m3 = mounts.remount(m)
    d = m3.wait_landed()
    assert d["filesLanded"] == 20
    assert sorted(os.listdir(m3.inp())) == ["f%02d.json" % i for i in range(20)]
    for i in range(20):
        assert read_file(m3.inp("f%02d.json" % i)) == b"%d\n" % i


@pytest.mark.timeout(90)
@pytest.mark.allow_stderr(r"recover")
def test_kill9_during_concurrent_writes(mounts):
    """Every file whose close() returned success lands exactly once, complete;
    a file caught mid-write at the kill leaves no trace (no partial file)."""
    import threading
    m = mounts.new()
    writers = 4
    acked = [[] for _ in range(writers)]
    stop = threading.Event()

    def content(w, i):
        return pattern([10, 3000, 90_000][i % 3], seed=w * 100_000 + i)

    def work(w):
        os.mkdir(m.inp("t%d" % w))
        i = 0
        while not stop.is_set():
            name = m.inp("t%d" % w, "f%05d.json" % i)
            data = content(w, i)
            try:
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            except OSError:
                return
            try:
                third = len(data) // 3
                for part in (data[:third], data[third:2 * third], data[2 * third:]):
                    os.write(fd, part)
            except OSError:
                try:
                    os.close(fd)
                except OSError:
                    pass
                return
            try:
                os.close(fd)
            except OSError:
                return
            acked[w].append(i)
            i += 1

    threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(writers)]
    for t in threads:
        t.start()
    util.wait_for(lambda: sum(len(a) for a in acked) >= 200, 30, "200 files written")
    m.kill9()
    stop.set()
    for t in threads:
        t.join(timeout=15)
        assert not t.is_alive(), "a writer is stuck on the dead mount"
    util.lazy_unmount(m.mnt)

    m2 = mounts.remount(m)
    d = m2.wait_landed()
    total = 0
    for w in range(writers):
        names = sorted(os.listdir(m2.inp("t%d" % w)))
        listed = {int(n[1:6]) for n in names}
        assert len(listed) == len(names)
        missing = set(acked[w]) - listed
        assert not missing, "acknowledged files lost: t%d %r" % (w, sorted(missing)[:10])
        # at most the one file in progress at the kill beyond what was acked
        assert listed <= set(acked[w]) | {len(acked[w])}, (w, sorted(listed - set(acked[w])))
        for i in listed:
            got = read_file(m2.inp("t%d" % w, "f%05d.json" % i))
            assert got == content(w, i), "t%d/f%05d.json is partial (%d bytes)" % (w, i, len(got))
        total += len(listed)
    assert d["filesLanded"] == total


@pytest.mark.timeout(60)
def test_catalog_cut_short_is_refused_not_a_crash(tmp_path):
    """A data.mdb shorter than the pages its last commit uses (what a disk
    that loses acknowledged writes leaves) is refused with a clear error by
    the commands that open it, instead of a SIGBUS in LMDB."""
    data = str(tmp_path / "data")
    with open(tmp_path / "cfg.json", "w") as f:
        f.write('{"queries": {"q": {"source": {"format": "text", "path": "ev"}}}}')
    os.makedirs(data)
    os.rename(tmp_path / "cfg.json", os.path.join(data, "sluice.json"))
    for i in range(20):
        p = tmp_path / ("f%d.txt" % i)
        p.write_bytes(b"x" * 100000)
        r = util.sluice("land", data, str(p), "--to", "ev")
        assert r.returncode == 0, r.stderr
    mdb = os.path.join(data, "catalog", "data.mdb")
    os.truncate(mdb, 3 * 4096)  # the two meta pages and one more
    for args in (["status", data], ["run", "--available-now", data]):
        p = util.sluice(*args, timeout=30)
        assert p.returncode > 0, (args, p.returncode, p.stderr)  # an exit, not a signal
        assert "catalog/data.mdb is corrupt" in p.stderr, (args, p.stderr)
