"""A simulated power loss (tests/powerloss/powerloss.c, LD_PRELOAD): what a
close(2), rename(2) or chmod(2) acknowledged survives it, and no file is half
there (DESIGN.md §1, durability).

kill -9 of the daemon leaves the page cache, so test_crash.py cannot show
that an acknowledgement waited for the disk. Here the daemon runs under a
shim that keeps the image a disk would hold after a power cut (what its
fsync, fdatasync, O_DSYNC writes and syncfs made durable, nothing else) and
cuts the power at the Nth durable operation. Each cut is a fresh run: the
producers land files until the daemon is gone, the data dir is rebuilt from
the image, `sluice check` must find it consistent, and a new mount must show
every acknowledged file with its exact bytes (and mode, when a chmod was
acknowledged), and every other final-named file either absent or complete.
"""

import errno
import os
import shutil
import threading

import pytest

import util

# SLUICE_POWERLOSS_CUTS=N (cut points per run) and _PRODUCERS=N for a longer search
PRODUCERS = int(os.environ.get("SLUICE_POWERLOSS_PRODUCERS", "4"))
FILES = 24  # per producer
CUTS = int(os.environ.get("SLUICE_POWERLOSS_CUTS", "30"))


def shim_path():
    p = os.environ.get("SLUICE_POWERLOSS_LIB")
    if p:
        return p
    build = os.path.dirname(os.path.dirname(os.path.abspath(util.sluice_bin())))
    return os.path.join(build, "tests", "powerloss", "sluice-powerloss.so")


def need_shim():
    if not os.path.exists(shim_path()):
        pytest.skip("no %s (build the tests)" % shim_path())


def content(p, i):
    """File i of producer p: every 7th is past the 64 KiB inline limit (a blob)."""
    size = 100 * 1024 + i if i % 7 == 3 else (i * 389 + p * 97) % 8192
    head = b"p%d-%03d|" % (p, i)
    body = (head * (size // len(head) + 1))[:size]
    return body


def name_of(p, i):
    return "p%d-%03d.json" % (p, i)


def write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class Record:
    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {}       # name -> bytes, once close/rename returned 0
        self.mode = {}        # name -> mode, once chmod returned 0
        self.errors = []      # errnos the producers stopped on


def producer(inp, p, rec):
    """Lands FILES files: write+close on the final name, temp+rename, and
    write+close followed by a chmod. Stops at the first error (the daemon is gone)."""
    try:
        for i in range(FILES):
            name = name_of(p, i)
            final = os.path.join(inp, name)
            data = content(p, i)
            if i % 4 == 2:
                tmp = os.path.join(inp, ".%s.tmp" % name)
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                try:
                    write_all(fd, data)
                finally:
                    os.close(fd)
                os.rename(tmp, final)
            else:
                fd = os.open(final, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                try:
                    write_all(fd, data)
                finally:
                    os.close(fd)  # its FLUSH: the landing's acknowledgement
            with rec.lock:
                rec.acked[name] = data
            if i % 4 == 3:
                os.chmod(final, 0o600)
                with rec.lock:
                    rec.mode[name] = 0o600
    except OSError as e:
        with rec.lock:
            rec.errors.append(e.errno)


def run_producers(mnt, rec):
    threads = [threading.Thread(target=producer, args=(mnt.inp(), p, rec), daemon=True)
               for p in range(PRODUCERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(util.CMD_TIMEOUT)
        assert not t.is_alive(), "a producer hung"


def rebuild(shadow, dest):
    """The data dir as the disk holds it after the cut (powerloss.c's image)."""
    with open(os.path.join(shadow, "root")) as f:
        root = f.read().strip()
    made = {}

    def build(key, path, mode):
        os.mkdir(path, mode)
        listing = os.path.join(shadow, "dir", key)
        if not os.path.exists(listing):
            return  # a folder whose entries never were synced
        with open(listing) as f:
            for line in f:
                typ, k, m, name = line.rstrip("\n").split(" ", 3)
                m = int(m, 8)
                target = os.path.join(path, name)
                if typ == "d":
                    build(k, target, m)
                elif k in made:
                    os.link(made[k], target)
                else:
                    img = os.path.join(shadow, "ino", k)
                    if os.path.exists(img):
                        shutil.copyfile(img, target)
                    else:
                        open(target, "wb").close()  # named, bytes never synced
                    os.chmod(target, m)
                    made[k] = target

    build(root, dest, 0o755)


def durable_ops(shadow):
    try:
        with open(os.path.join(shadow, "ops.log")) as f:
            return sum(1 for line in f if not line.startswith("0 "))
    except FileNotFoundError:
        return 0


def run_once(mounts, tmp, pristine, n, cut, env_extra=None):
    """One run with the power cut at durable operation `cut` (0: never; then
    a clean unmount). Returns (record, whether the cut happened, ops seen)."""
    data = os.path.join(tmp, "data-%d" % n)
    shadow = os.path.join(tmp, "image-%d" % n)
    shutil.copytree(pristine, data, symlinks=True)
    os.mkdir(shadow)
    env = dict(os.environ, LD_PRELOAD=shim_path(), PL_DATA=data, PL_SHADOW=shadow,
               PL_CUT=str(cut),
               # the shim drops LD_PRELOAD for the daemon's children: the
               # restart with huge pages (tools/thp.c) would run without it
               SLUICE_THP="0")
    # an ASan build: the shim comes before ASan's runtime in the library list
    asan = env.get("ASAN_OPTIONS", "")
    env["ASAN_OPTIONS"] = (asan + ":" if asan else "") + "verify_asan_link_order=0"
    env.update(env_extra or {})
    m = mounts.new(data=data, mnt=os.path.join(tmp, "mnt-%d" % n), start=False, env=env)
    rec = Record()
    try:
        m.start()
    except pytest.fail.Exception:
        # the power went while it started: nothing was acknowledged
        assert os.path.exists(os.path.join(shadow, "cut")), m.stderr()
    else:
        run_producers(m, rec)
    cut_file = os.path.join(shadow, "cut")
    if not os.path.exists(cut_file):
        assert not rec.errors, rec.errors
        try:
            m.unmount()
        except AssertionError:
            if not os.path.exists(cut_file):
                raise  # else the power went during the unmount
    cut_done = os.path.exists(cut_file)
    if cut_done:
        m.proc.wait(timeout=util.UNMOUNT_TIMEOUT)
        assert m.proc.returncode == -9, m.stderr()
        m.killed = True
        m.cleanup()
        assert all(e in (errno.ENOTCONN, errno.ECONNABORTED) for e in rec.errors), rec.errors
    after = os.path.join(tmp, "after-%d" % n)
    rebuild(shadow, after)
    shutil.rmtree(data)
    return rec, cut_done, durable_ops(shadow), after


def verify(mounts, tmp, n, rec, after):
    """The rebuilt data dir: consistent, and every acknowledgement kept."""
    p = util.sluice("check", after)
    problems = [] if p.returncode == 0 else [p.stdout + p.stderr]
    # check is the first writer to open the catalog: it applies the journal
    replayed = "applied the journal's record" in p.stderr
    try:
        m = mounts.new(data=after, mnt=os.path.join(tmp, "check-%d" % n))
    except pytest.fail.Exception as e:
        # a catalog too broken to mount: everything acknowledged is lost
        shutil.rmtree(after)
        return sorted(rec.acked), [], problems + [str(e)], replayed
    try:
        lost, half = read_back(m, rec)
    except OSError as e:
        # a catalog broken past what reads survive (EIO, or the daemon gone)
        m.kill9()
        m.cleanup()
        shutil.rmtree(after)
        return sorted(rec.acked), [], problems + ["reading the mount: %s" % e], replayed
    m.unmount()
    shutil.rmtree(after)
    return lost, half, problems, replayed


def read_back(m, rec):
    """The acknowledged files that are missing or differ, and the
    unacknowledged ones that are there but not whole."""
    lost = []
    for name, want in sorted(rec.acked.items()):
        try:
            got = util.read_file(m.inp(name))
        except FileNotFoundError:
            lost.append(name)
            continue
        if got != want:
            lost.append(name + " (%d bytes, want %d)" % (len(got), len(want)))
    for name, mode in sorted(rec.mode.items()):
        if name in rec.acked and name not in lost:
            got = os.stat(m.inp(name)).st_mode & 0o777
            if got != mode:
                lost.append(name + " (mode %o, want %o)" % (got, mode))
    half = []
    wanted = {name_of(p, i): content(p, i) for p in range(PRODUCERS) for i in range(FILES)}
    for name in os.listdir(m.inp()):
        if name.startswith("."):
            continue  # an in-flight temp name: not landed
        assert name in wanted, name
        if name not in rec.acked and util.read_file(m.inp(name)) != wanted[name]:
            half.append(name)
    return lost, half


def make_pristine(mounts, tmp):
    pristine = os.path.join(tmp, "pristine")
    m = mounts.new(data=pristine, mnt=os.path.join(tmp, "mnt-pristine"))
    m.unmount()
    return pristine


def cut_points(total, count):
    """count points spread over 1..total, the first and last included."""
    if total <= count:
        return list(range(1, total + 1))
    return sorted({1 + (total - 1) * j // (count - 1) for j in range(count)})


@pytest.mark.timeout(900)
@pytest.mark.parametrize("limit,torn", [(None, False), (12288, False), (None, True)],
                         ids=["journal", "mixed", "torn"])
def test_powerloss_keeps_every_acknowledgement(mounts, tmp_path, limit, torn):
    """With the journal, and with journal records limited to 12 KiB (a
    build with fault points), so that groups of small files go the journal's
    way and bigger groups the two-flush way, cut after cut. Torn: at each
    cut a random half of the pages written since their file's last sync
    reach the disk too (PL_TORN), as a writeback cut short would leave
    them: the order LMDB keeps (a commit's pages flushed before its meta
    page is written) and the journal's checksum must hold against it."""
    need_shim()
    env = None
    if limit:
        if not util.faults_compiled():
            pytest.skip("needs a build with -Dfaults=true")
        env = {"SLUICE_JOURNAL_LIMIT": str(limit)}
    tmp = str(tmp_path)
    pristine = make_pristine(mounts, tmp)

    # a run without a cut: how many durable operations a run makes, and the
    # image after a clean unmount holds everything
    rec, cut, total, after = run_once(mounts, tmp, pristine, 0, 0, env)
    assert not cut and len(rec.acked) == PRODUCERS * FILES
    lost, half, problems, replayed = verify(mounts, tmp, 0, rec, after)
    assert not lost and not half and not problems, (lost, half, problems)
    assert not replayed  # a clean unmount leaves nothing to apply
    assert total > PRODUCERS * FILES // 4

    report = []
    for n, c in enumerate(cut_points(total, CUTS), 1):
        cut_env = dict(env or {}, PL_TORN=str(c)) if torn else env
        rec, cut, _, after = run_once(mounts, tmp, pristine, n, c, cut_env)
        lost, half, problems, replayed = verify(mounts, tmp, n, rec, after)
        report.append((c, cut, len(rec.acked), lost, half, problems, replayed))
    print("cuts (op, cut, acknowledged, journal applied): %r"
          % [r[:3] + r[6:] for r in report])
    bad = [r for r in report if r[3] or r[4] or r[5]]
    assert not bad, "\n".join(
        "cut at op %d: %d acknowledged, lost %r, half there %r, sluice check: %r" % (c, a, l, h, pr)
        for c, _, a, l, h, pr, _ in bad)
    # some cuts came between a group's acknowledgement and its meta page's
    # flush: the journal's record was what kept the group
    assert any(r[6] for r in report), report
    # the cuts did cut, and some after acknowledgements
    assert sum(1 for r in report if r[1]) >= len(report) // 2, report
    assert any(r[2] > 0 and r[1] for r in report), report


@pytest.mark.timeout(600)
# what a daemon says over a catalog that a broken sync left torn
@pytest.mark.allow_stderr(r"corrupt", r"Assertion", r"Input/output error", r"MDB_")
@pytest.mark.parametrize("mode", ["nosync", "early-ack", "bad-journal", "one-flush"])
def test_powerloss_catches_a_broken_sync(mounts, tmp_path, mode):
    """The harness can fail: a catalog that never flushes, a pipelined
    commit without the journal that acknowledges a group before the flush
    that makes its meta page durable, a journal whose records are never
    applied, or a commit that writes its meta page before the flush of its
    pages (one flush for both: only a torn cut, PL_TORN, shows it), loses
    acknowledged files or breaks the catalog at some cut."""
    need_shim()
    if not util.faults_compiled():
        pytest.skip("needs a build with -Dfaults=true")
    tmp = str(tmp_path)
    pristine = make_pristine(mounts, tmp)
    unsafe = {"SLUICE_FAULT_SYNC": mode}
    if mode == "early-ack":
        unsafe["SLUICE_JOURNAL"] = "0"  # with the journal an early ack is durable
    _, _, total, after = run_once(mounts, tmp, pristine, 0, 0, unsafe)
    shutil.rmtree(after)
    caught = []
    # a torn cut catches one-flush only where it falls on a group's flush
    # and its coins let the meta page through (about 1 cut in 4): more cuts
    for n, c in enumerate(cut_points(total, 40 if mode == "one-flush" else 12), 1):
        cut_env = dict(unsafe, PL_TORN=str(c)) if mode == "one-flush" else unsafe
        rec, cut, _, after = run_once(mounts, tmp, pristine, n, c, cut_env)
        lost, _, problems, _ = verify(mounts, tmp, n, rec, after)
        if lost or problems:
            caught.append((c, len(rec.acked), len(lost), len(problems)))
    print("SLUICE_FAULT_SYNC=%s: %d durable ops in a full run; cuts losing acknowledged files "
          "(op, acknowledged, lost, check failed): %r" % (mode, total, caught))
    assert caught, "no cut lost an acknowledged file under SLUICE_FAULT_SYNC=%s" % mode


@pytest.mark.timeout(120)
@pytest.mark.allow_stderr(r"catalog flush failed")
def test_failed_flush_fails_the_unacknowledged_and_stops_landing(mounts):
    """A failed catalog flush: what it would have made durable is refused
    (EIO), landing stays stopped until a remount, and the remount shows each
    refused file absent or complete."""
    if not util.faults_compiled():
        pytest.skip("needs a build with -Dfaults=true")
    env = dict(os.environ, SLUICE_FAULT_ERR="catalog.sync:1:EIO")
    m = mounts.new(env=env)
    failed = []
    for i in range(4):
        name = "f%d.json" % i
        try:
            util.write_file(m.inp(name), content(9, i))
        except OSError as e:
            assert e.errno == errno.EIO, e
            failed.append(name)
    # the first flush failed, and nothing lands after it
    assert failed == ["f%d.json" % i for i in range(4)], failed
    assert m.landing()["filesLanded"] == 0
    m.unmount()

    m.env = None  # the remount without the fault
    m2 = mounts.remount(m)
    for i, name in enumerate(failed):
        path = m2.inp(name)
        if os.path.exists(path):
            assert util.read_file(path) == content(9, i)
    util.write_file(m2.inp("after.json"), b"lands again\n")
    assert util.read_file(m2.inp("after.json")) == b"lands again\n"


@pytest.mark.timeout(300)
def test_many_producers_race_the_pipelined_commit(mounts):
    """48 producers (more than libfuse's default 10 workers) land 20 files
    each, with renames and chmods mixed in: every one lands once, whole."""
    m = mounts.new()
    errors = []

    def run(p):
        try:
            for i in range(20):
                name = "s%02d-%02d.json" % (p, i)
                data = content(p, i) if i % 7 != 3 else content(p, i)[:9000]
                if i % 3 == 0:
                    tmp = m.inp("." + name + ".tmp")
                    util.write_file(tmp, data)
                    os.rename(tmp, m.inp(name))
                else:
                    util.write_file(m.inp(name), data)
                if i % 5 == 4:
                    os.chmod(m.inp(name), 0o600)
        except OSError as e:
            errors.append((p, e))

    threads = [threading.Thread(target=run, args=(p,), daemon=True) for p in range(48)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(240)
        assert not t.is_alive(), "a producer hung"
    assert not errors, errors
    # (a RELEASE is asynchronous: the in-flight count follows the closes)
    util.wait_counters(m.mnt, filesLanded=48 * 20, filesInFlight=0)
    for p in range(48):
        for i in range(20):
            name = "s%02d-%02d.json" % (p, i)
            want = content(p, i) if i % 7 != 3 else content(p, i)[:9000]
            assert util.read_file(m.inp(name)) == want, name
            if i % 5 == 4:
                assert os.stat(m.inp(name)).st_mode & 0o777 == 0o600, name
