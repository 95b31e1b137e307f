"""How files land: cp, rsync, temp name + mv, shell redirection, concurrent
writers, odd names, the temp patterns (DESIGN.md §1, landing rules)."""

import concurrent.futures
import errno
import os
import stat
import threading
import time

import pytest

import util
from util import read_file, write_file, pattern

OLD_MTIME_NS = 1_600_000_000_123_456_789  # 2020-09-13, with nanoseconds


def test_layout_and_initial_counters(mnt):
    assert set(os.listdir(mnt.mnt)) == util.LAYOUT
    d = mnt.landing()
    assert d["filesLanded"] == 0
    assert d["bytesLanded"] == 0
    assert d["filesInFlight"] == 0
    assert d["refused"] == {}
    assert os.listdir(mnt.inp()) == []


@pytest.mark.parametrize("path,op", [
    ("out/x.json", "create"),
    ("status/x.json", "create"),
    ("checkpoint/x", "mkdir"),
    ("archive/x.json", "create"),
])
def test_outside_in_is_read_only(mnt, path, op):
    p = mnt.p(path)
    if op == "create":
        util.expect_errno(errno.EROFS, os.open, p, os.O_WRONLY | os.O_CREAT, 0o644)
    else:
        util.expect_errno(errno.EROFS, os.mkdir, p)
    util.expect_errno(errno.EROFS, os.open, mnt.p("status", "landing.json"), os.O_WRONLY)


def test_cp_lands_one_file(mnt, src):
    data = pattern(200_000, seed=1)  # above the 64 KiB inline limit: a blob
    s = write_file(str(src / "a.json"), data, mode=0o640, mtime_ns=OLD_MTIME_NS)
    before = mnt.landing()

    util.run(["cp", "-p", s, mnt.inp("a.json")], check=True)
    d = mnt.wait_landed()

    assert d["filesLanded"] == before["filesLanded"] + 1
    assert d["bytesLanded"] == before["bytesLanded"] + len(data)
    assert os.listdir(mnt.inp()) == ["a.json"]
    assert read_file(mnt.inp("a.json")) == data
    st = os.stat(mnt.inp("a.json"))
    assert stat.S_ISREG(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o640
    assert st.st_mtime_ns == OLD_MTIME_NS, "cp -p mtime not kept"
    assert st.st_size == len(data)
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())


def test_cp_small_file_without_p(mnt, src):
    data = b'{"k": 1}\n'
    s = write_file(str(src / "small.json"), data, mode=0o600)
    t0 = time.time()
    util.run(["cp", s, mnt.inp("small.json")], check=True)
    d = mnt.wait_landed()
    assert d["filesLanded"] == 1 and d["bytesLanded"] == len(data)
    st = os.stat(mnt.inp("small.json"))
    assert read_file(mnt.inp("small.json")) == data
    assert stat.S_IMODE(st.st_mode) == 0o600  # cp keeps the source mode (minus umask)
    # mtime is the time it was written, not the landing or a zero
    assert t0 - 5 <= st.st_mtime <= time.time() + 1


def test_owner_is_the_caller(mounts):
    """A file written by another user keeps that user's uid/gid."""
    m = mounts.new(opts=["allow_other"])
    os.mkdir(m.inp("shared"))
    os.chmod(m.inp("shared"), 0o777)
    uid = gid = 65534
    # cwd is entered before the uid switch: the test's tmp dirs are 0700.
    p = util.run(["bash", "-c", "printf 'from nobody\\n' > mine.json"],
                 cwd=m.inp("shared"), user=uid, group=gid, extra_groups=[])
    assert p.returncode == 0, p.stderr
    m.wait_landed()
    st = os.stat(m.inp("shared", "mine.json"))
    assert (st.st_uid, st.st_gid) == (uid, gid)
    assert read_file(m.inp("shared", "mine.json")) == b"from nobody\n"


def make_tree(root, n=100):
    """100 files, a date=2026-10-04/ folder among them, varied modes and mtimes."""
    files = {}
    layout = ([("events/date=2026-10-04", "part-%03d.json" % i) for i in range(60)]
              + [("events", "top-%03d.json" % i) for i in range(20)]
              + [("other/deep/er", "x-%03d.csv" % i) for i in range(19)]
              + [("", "root.json")])
    assert len(layout) == n
    modes = [0o644, 0o640, 0o600, 0o664, 0o444]
    for i, (d, name) in enumerate(layout):
        os.makedirs(os.path.join(root, d), exist_ok=True)
        rel = os.path.join(d, name) if d else name
        size = [0, 1, 100, 4096, 70_000][i % 5]  # includes empty and blob-sized files
        data = pattern(size, seed=1000 + i)
        mt = OLD_MTIME_NS + i * 1_000_000_007
        write_file(os.path.join(root, rel), data, mode=modes[i % len(modes)], mtime_ns=mt)
        files[rel] = (data, modes[i % len(modes)], mt)
    for d in ["events/date=2026-10-04", "events", "other/deep/er", "other/deep", "other"]:
        os.utime(os.path.join(root, d), ns=(OLD_MTIME_NS, OLD_MTIME_NS))
    return files


def itemized_file_lines(out):
    """rsync --itemize-changes lines that concern a regular file."""
    lines = []
    for line in out.splitlines():
        if len(line) > 2 and line[1] == "f":
            lines.append(line)
    return lines


def test_rsync_tree_twice(mnt, src):
    files = make_tree(str(src))
    dst = mnt.inp("tree")

    p = util.run(["rsync", "-a", str(src) + "/", dst + "/"], timeout=60)
    assert p.returncode == 0, p.stderr
    p = util.run(["diff", "-r", str(src), dst])
    assert p.returncode == 0, p.stdout
    d = mnt.wait_landed()
    assert d["filesLanded"] == 100
    assert d["bytesLanded"] == sum(len(v[0]) for v in files.values())
    assert d["refused"] == {}, "rsync's temp+rename was refused somewhere"

    # stat shows what landed: mode, owner, mtime as rsync set them
    stats = {}
    for rel, (data, mode, mt) in files.items():
        st = os.stat(os.path.join(dst, rel))
        assert stat.S_IMODE(st.st_mode) == mode, rel
        assert st.st_mtime_ns == mt, rel
        assert st.st_size == len(data), rel
        assert (st.st_uid, st.st_gid) == (0, 0) or (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())
        stats[rel] = (st.st_ino, st.st_mode, st.st_mtime_ns, st.st_size)
    # rsync's temp files .name.XXXXXX are gone
    for dirpath, dirs, names in os.walk(dst):
        assert not [n for n in names if n.startswith(".")], (dirpath, names)

    # again: nothing to do, exit 0, nothing changed
    p = util.run(["rsync", "-a", "--itemize-changes", str(src) + "/", dst + "/"], timeout=60)
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()
    assert itemized_file_lines(out) == [], out
    d2 = mnt.wait_landed()
    assert d2["filesLanded"] == 100
    assert d2["refused"] == {}
    for rel in files:
        st = os.stat(os.path.join(dst, rel))
        assert (st.st_ino, st.st_mode, st.st_mtime_ns, st.st_size) == stats[rel], rel


def test_rsync_partial_dir_never_lands(mnt, src):
    # what rsync --partial-dir=.rsync-partial leaves behind after an interruption
    os.makedirs(mnt.inp("sub", ".rsync-partial"))
    os.mkdir(mnt.inp(".rsync-partial"))
    write_file(mnt.inp(".rsync-partial", "a.json"), b"half of a")
    write_file(mnt.inp("sub", ".rsync-partial", "b.json"), pattern(100_000, 7))
    d = util.wait_counters(mnt.mnt, filesInFlight=2)
    time.sleep(0.3)  # any landing would show by now
    d = mnt.landing()
    assert d["filesLanded"] == 0 and d["bytesLanded"] == 0
    assert d["filesInFlight"] == 2
    assert os.listdir(mnt.inp(".rsync-partial")) == ["a.json"]

    # a real rsync with --partial-dir that completes lands only the final file
    write_file(str(src / "c.json"), b"complete\n")
    p = util.run(["rsync", "-a", "--partial-dir=.rsync-partial", str(src / "c.json"),
                  mnt.inp("sub") + "/"])
    assert p.returncode == 0, p.stderr
    d = util.wait_counters(mnt.mnt, filesLanded=1, filesInFlight=2)
    assert read_file(mnt.inp("sub", "c.json")) == b"complete\n"


TEMP_NAMES = [".x.json.tmp", ".x.json.AbC123", "x.json.part", "x.json.tmp", "x.json.partial",
              "x.json.filepart", "x.json.crdownload", "x.json._COPYING_", "x.json~",
              "#x.json#", "4913", ".goutputstream-XYZ123"]


@pytest.mark.parametrize("tmpname", TEMP_NAMES)
def test_temp_name_then_mv_lands_at_rename(mnt, tmpname):
    data = pattern(5000, 3)
    write_file(mnt.inp(tmpname), data)
    d = util.wait_counters(mnt.mnt, filesInFlight=1)
    assert d["filesLanded"] == 0, "a temp name landed: %s" % tmpname
    time.sleep(0.1)
    assert mnt.landing()["filesLanded"] == 0

    util.run(["mv", mnt.inp(tmpname), mnt.inp("x.json")], check=True)
    d = mnt.wait_landed()
    assert d["filesLanded"] == 1 and d["bytesLanded"] == len(data)
    assert os.listdir(mnt.inp()) == ["x.json"]
    assert read_file(mnt.inp("x.json")) == data


def test_temp_in_temp_folder_then_mv_across_folders(mnt):
    os.mkdir(mnt.inp("dst"))
    os.mkdir(mnt.inp(".staging"))
    write_file(mnt.inp(".staging", "y.json"), b"staged\n")  # a temp component
    util.wait_counters(mnt.mnt, filesInFlight=1)
    assert mnt.landing()["filesLanded"] == 0
    os.rename(mnt.inp(".staging", "y.json"), mnt.inp("dst", "y.json"))
    d = mnt.wait_landed()
    assert d["filesLanded"] == 1
    assert read_file(mnt.inp("dst", "y.json")) == b"staged\n"


def test_rename_while_open_lands_at_release(mnt):
    """The kernel can deliver RENAME before RELEASE: both orders land it."""
    fd = os.open(mnt.inp(".z.tmp"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"first ")
        os.rename(mnt.inp(".z.tmp"), mnt.inp("z.json"))
        os.write(fd, b"second\n")
        time.sleep(0.2)
        assert mnt.landing()["filesLanded"] == 0, "landed while a writable handle is open"
    finally:
        os.close(fd)
    d = mnt.wait_landed()
    assert d["filesLanded"] == 1
    assert read_file(mnt.inp("z.json")) == b"first second\n"


def test_final_name_lands_only_at_last_close(mnt):
    fd = os.open(mnt.inp("late.json"), os.O_WRONLY | os.O_CREAT, 0o644)
    fd2 = os.dup(fd)
    try:
        os.write(fd, b"abc")
        os.close(fd)
        time.sleep(0.2)
        d = mnt.landing()
        assert d["filesLanded"] == 0 and d["filesInFlight"] == 1
        os.write(fd2, b"def")
    finally:
        os.close(fd2)
    d = mnt.wait_landed()
    assert d["filesLanded"] == 1 and d["bytesLanded"] == 6
    assert read_file(mnt.inp("late.json")) == b"abcdef"


@pytest.mark.parametrize("script,name,want", [
    ("echo hello > in/f.json", "f.json", b"hello\n"),
    ("for i in 1 2 3; do echo $i; done > in/g.json", "g.json", b"1\n2\n3\n"),
    ("{ echo a; sleep 0.2; echo b; } > in/h.json", "h.json", b"a\nb\n"),
    ("exec 3> in/k.json; echo one >&3; echo two >&3; exec 3>&-; true", "k.json", b"one\ntwo\n"),
])
def test_shell_redirection_lands_full_content(mnt, script, name, want):
    p = util.run(["bash", "-c", script], cwd=mnt.mnt)
    d = mnt.wait_landed()
    assert p.returncode == 0, p.stderr
    assert read_file(mnt.inp(name)) == want
    assert d["filesLanded"] == 1 and d["bytesLanded"] == len(want)


@pytest.mark.timeout(120)
def test_concurrent_writers(mnt):
    writers, per = 8, 100

    def content(w, i):
        return (b"writer=%d file=%d\n" % (w, i)) * (1 + (i % 7) * 50)

    for w in range(writers):
        os.mkdir(mnt.inp("w%d" % w))

    def work(w):
        for i in range(per):
            write_file(mnt.inp("w%d" % w, "f%03d.json" % i), content(w, i))
        return w

    with concurrent.futures.ThreadPoolExecutor(max_workers=writers) as ex:
        assert sorted(ex.map(work, range(writers))) == list(range(writers))

    d = mnt.wait_landed(timeout=60)
    assert d["filesLanded"] == writers * per
    assert d["bytesLanded"] == sum(len(content(w, i)) for w in range(writers) for i in range(per))
    inos = set()
    for w in range(writers):
        names = sorted(os.listdir(mnt.inp("w%d" % w)))
        assert names == ["f%03d.json" % i for i in range(per)]
        for i in range(per):
            p = mnt.inp("w%d" % w, "f%03d.json" % i)
            assert read_file(p) == content(w, i), p
            inos.add(os.stat(p).st_ino)
    assert len(inos) == writers * per, "inode numbers (ids) are not distinct"


@pytest.mark.timeout(120)
def test_small_files_land_at_close_while_a_writer_stays_open(mnt):
    """A writer that keeps its file open (a long upload) while others land
    small files: every small file lands with its content while the long one
    is still open, and the long one lands whole at its own close."""
    writers, per = 4, 40
    long_fd = os.open(mnt.inp("long.json"), os.O_WRONLY | os.O_CREAT, 0o644)
    long_lines = []
    try:
        def work(w):
            for i in range(per):
                p = mnt.inp("s%d-%03d.json" % (w, i))
                write_file(p, b'{"w": %d, "i": %d}\n' % (w, i))
            return w

        with concurrent.futures.ThreadPoolExecutor(max_workers=writers) as ex:
            futs = [ex.submit(work, w) for w in range(writers)]
            while not all(f.done() for f in futs):
                line = b'{"long": %d}\n' % len(long_lines)
                os.write(long_fd, line)
                long_lines.append(line)
                time.sleep(0.005)
            assert sorted(f.result() for f in futs) == list(range(writers))
        deadline = time.monotonic() + 30
        while mnt.landing()["filesLanded"] < writers * per and time.monotonic() < deadline:
            time.sleep(0.05)
        d = mnt.landing()
        assert d["filesLanded"] == writers * per and d["filesInFlight"] == 1
        for w in range(writers):
            for i in range(per):
                assert read_file(mnt.inp("s%d-%03d.json" % (w, i))) == b'{"w": %d, "i": %d}\n' % (w, i)
    finally:
        os.close(long_fd)
    d = mnt.wait_landed()
    assert d["filesLanded"] == writers * per + 1
    assert read_file(mnt.inp("long.json")) == b"".join(long_lines)


ODD_NAMES = [
    "with space.json",
    "café ☕.json",
    "a" * 245 + ".json",           # 250 bytes
    ("é" * 122) + ".json",         # 249 bytes of UTF-8
    "tab\there.json",
    "new\nline.json",
    "-leading-dash.json",
    "quote\"'and\\back.json",
    "k=v",
]


@pytest.mark.parametrize("name", ODD_NAMES, ids=lambda n: repr(n)[:30])
def test_odd_names(mnt, name):
    data = ("content of %r\n" % name).encode()
    os.mkdir(mnt.inp("odd dir ☕"))
    path = mnt.inp("odd dir ☕", name)
    write_file(path, data)
    d = mnt.wait_landed()
    assert d["filesLanded"] == 1
    assert os.listdir(mnt.inp("odd dir ☕")) == [name]
    assert read_file(path) == data
    # a landed file with that name is immutable like any other
    util.expect_errno(errno.EPERM, os.open, path, os.O_WRONLY)


def test_temp_option_replaces_list(mounts):
    m = mounts.new(opts=["temp=*.inprogress:*.wip"])
    write_file(m.inp("a.json.inprogress"), b"a\n")
    write_file(m.inp("b.json.wip"), b"b\n")
    write_file(m.inp(".dot.json"), b"dot\n")   # '.*' is no longer a temp pattern
    write_file(m.inp("c.json.tmp"), b"c\n")    # nor '*.tmp'
    d = util.wait_counters(m.mnt, filesLanded=2, filesInFlight=2)
    assert read_file(m.inp(".dot.json")) == b"dot\n"
    time.sleep(0.2)
    assert m.landing()["filesLanded"] == 2
    # .dot.json landed: immutable
    util.expect_errno(errno.EPERM, os.open, m.inp(".dot.json"), os.O_WRONLY | os.O_APPEND)
    # the .inprogress file is in flight: writable, lands at rename
    with open(m.inp("a.json.inprogress"), "ab") as f:
        f.write(b"more\n")
    os.rename(m.inp("a.json.inprogress"), m.inp("a.json"))
    d = util.wait_counters(m.mnt, filesLanded=3, filesInFlight=1)
    assert read_file(m.inp("a.json")) == b"a\nmore\n"


def test_strict_mode_create_refused_rename_lands(mounts, src):
    m = mounts.new(opts=["land=rename"])
    util.expect_errno(errno.EPERM, os.open, m.inp("x.json"), os.O_WRONLY | os.O_CREAT, 0o644)
    s = write_file(str(src / "s.json"), b"src\n")
    p = util.run(["cp", s, m.inp("y.json")])
    assert p.returncode != 0
    assert b"Operation not permitted" in p.stderr
    assert os.listdir(m.inp()) == []
    assert m.landing()["filesLanded"] == 0

    write_file(m.inp(".x.json.tmp"), b"via rename\n")
    util.wait_counters(m.mnt, filesInFlight=1)
    assert m.landing()["filesLanded"] == 0
    os.rename(m.inp(".x.json.tmp"), m.inp("x.json"))
    d = m.wait_landed()
    assert d["filesLanded"] == 1
    assert read_file(m.inp("x.json")) == b"via rename\n"

    # rsync (temp + rename) works unchanged in strict mode
    p = util.run(["rsync", "-a", s, m.inp() + "/"])
    assert p.returncode == 0, p.stderr
    d = m.wait_landed()
    assert d["filesLanded"] == 2
    assert read_file(m.inp("s.json")) == b"src\n"


@pytest.mark.timeout(180)
def test_closes_waiting_on_the_disk_hold_no_worker(mounts):
    """A close (FLUSH) waits for its group's flush without holding one of
    the mount's 64 FUSE workers: with each group commit of records held 6 s
    (a test build's slow disk), 100 producers closing files at once leave the
    mount answering a stat and a read of a landed file while every one of
    those closes still waits; then all 100 land, each whole."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    m = mounts.new(env=dict(os.environ, SLUICE_FAULT_SIZE="land.record_delay_ms:6000"))
    write_file(m.inp("first.json"), b"landed before\n")
    n = 100
    closed = []
    lock = threading.Lock()
    errors = []

    def produce(i):
        try:
            write_file(m.inp("p%03d.json" % i), pattern(3000, i))
            with lock:
                closed.append(i)
        except OSError as e:
            errors.append((i, e))

    threads = [threading.Thread(target=produce, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    time.sleep(1.5)  # the closes reach the daemon (not a pass/fail time)
    st = os.stat(m.inp("first.json"))
    data = read_file(m.inp("first.json"))
    with lock:
        done_before = len(closed)
    assert st.st_size == len(b"landed before\n") and data == b"landed before\n"
    assert done_before == 0, "%d closes returned before the stat and read" % done_before
    for t in threads:
        t.join(150)
        assert not t.is_alive(), "a producer hung"
    assert not errors, errors
    # each publish waits for a slow commit too
    util.wait_counters(m.mnt, timeout=120, filesLanded=n + 1, filesInFlight=0)
    for i in range(n):
        assert read_file(m.inp("p%03d.json" % i)) == pattern(3000, i)
