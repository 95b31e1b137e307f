"""Full disks through the engine (DESIGN.md §1 "Failures", the landing table's
"out of space" row, §2 "A small reserve file..."; issue 5). The data dir
lives on a small tmpfs next to a filler file that takes the free space:

(a) `sluice run`: writing a batch's output hits ENOSPC: the batch fails,
    nothing of it is visible in out/, the run exits 1 with one clear line,
    and once space is freed the next run commits the batch exactly once;
(b) a mount with an event-driven query: the batch retries with growing
    backoff and commits once space is freed, without a remount;
(c) the catalog (LMDB) cannot grow: landing returns ENOSPC to the writer
    (at close(2) or rename(2)), deletions of files no query holds still
    commit, and everything resumes once space is freed.

`sluice check DATA_DIR` is clean at the end of each."""

import errno
import json
import os
import subprocess

import pytest

import util
from util import write_file

pytestmark = pytest.mark.timeout(60)

MiB = 1024 * 1024
SCHEMA = "event_id STRING, pad STRING"
NOSPACE = "No space left on device"


# -- a small tmpfs --------------------------------------------------------------

@pytest.fixture
def tmpfs(request, tmp_path, mounts):
    """make(size) mounts a tmpfs and returns it; the data dir goes in
    tmpfs/data, so that tmpfs/filler can take the free space. Unmounted after
    the FUSE mounts, whatever happened."""
    made = []

    def make(size="32m"):
        d = tmp_path / ("tmpfs%d" % len(made))
        d.mkdir()
        util.mount_tmpfs(d, size)
        made.append(d)
        return d

    yield make
    mounts.finish(request)  # unmount FUSE first: the daemon holds files on the tmpfs
    for d in made:
        util.umount_tmpfs(d)


def fill(fs, leave=0):
    """Grows fs/filler until at most `leave` bytes are free on the tmpfs."""
    path = os.path.join(fs, "filler")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        size = os.fstat(fd).st_size
        want = util.free_bytes(fs) - leave
        if want > 0:
            os.posix_fallocate(fd, size, want)
            size += want
        if leave == 0:
            # whatever is left, a page at a time
            while True:
                try:
                    os.posix_fallocate(fd, size, 4096)
                    size += 4096
                except OSError as e:
                    assert e.errno == errno.ENOSPC, e
                    break
    finally:
        os.close(fd)
    return path


def unfill(fs):
    os.unlink(os.path.join(fs, "filler"))


def write_config(data, **source):
    os.makedirs(data, exist_ok=True)
    src = {"format": "json", "path": "dev", "schema": SCHEMA}
    src.update(source)
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump({"queries": {"dev": {"source": src}}}, f)


def rows_text(fileno, n, pad=100):
    return "".join(json.dumps({"event_id": "e-%02d-%05d" % (fileno, i), "pad": "x" * pad}) + "\n"
                   for i in range(n)).encode()


def zst(data):
    return subprocess.run(["zstd", "-q", "-c"], input=data, stdout=subprocess.PIPE,
                          check=True, timeout=30).stdout


def make_inputs(src, nfiles, nrows, compress=True):
    """nfiles inputs of nrows rows each; zstd makes MiBs of output from KiBs of input."""
    paths, ids = [], []
    for f in range(nfiles):
        body = rows_text(f, nrows)
        ids += ["e-%02d-%05d" % (f, i) for i in range(nrows)]
        p = os.path.join(str(src), "b%02d.json%s" % (f, ".zst" if compress else ""))
        with open(p, "wb") as out:
            out.write(zst(body) if compress else body)
        paths.append(p)
    return paths, ids


def out_ids(m):
    base = os.path.join(m.mnt, "out", "dev")
    ids = []
    if not os.path.isdir(base):
        return ids
    for name in sorted(util.list_out(base)):
        p = util.run(["jq", "-r", ".event_id", os.path.join(base, name)], timeout=60)
        assert p.returncode == 0, p.stderr
        ids += p.stdout.decode().split()
    return ids


def status_line(data):
    p = util.sluice("status", data)
    assert p.returncode == 0, p.stderr
    return [l for l in p.stdout.splitlines() if l.startswith("dev ")][0]


def check_clean(data):
    p = util.sluice("check", data)
    assert p.returncode == 0, (p.stdout, p.stderr)


def blob_files(data):
    return sum(len(names) for _, _, names in os.walk(os.path.join(data, "blobs")))


# -- (a) sluice run ---------------------------------------------------------------

@pytest.mark.parametrize("where", ["blob", "catalog"])
@pytest.mark.allow_stderr(r".")
def test_run_output_enospc_then_commits_once(tmpfs, mounts, src, where):
    """blob: a 10 MiB part with 2 MiB free; catalog: a small part (kept inside
    the commit) with nothing free, so the LMDB commit itself cannot grow."""
    tmpfs = tmpfs()
    data = str(tmpfs / "data")
    write_config(data)
    if where == "blob":
        files, ids = make_inputs(src, 4, 20000)
        leave = 2 * MiB
    else:
        files, ids = make_inputs(src, 2, 200, compress=False)
        leave = 0
    p = util.sluice("land", data, *files, "--to", "dev")
    assert p.returncode == 0, p.stderr
    blobs0 = blob_files(data)
    fill(tmpfs, leave)

    for _ in range(2):  # it fails the same way each time, and leaves nothing behind
        p = util.sluice("run", "--available-now", data, timeout=60)
        assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
        err = util.one_line(p.stderr)
        assert "'dev'" in err and NOSPACE in err, err
        assert p.stdout == "dev: 0 batches, 0 rows\n"
        assert blob_files(data) == blobs0
        st = status_line(data)
        assert st.startswith("dev batch=- rows=0 "), st
    check_clean(data)

    # nothing of the batch is visible (in a mount, whose engine retries the
    # batch and fails the same way while the disk is full)
    m = mounts.new(data=data)
    assert not os.path.exists(os.path.join(m.mnt, "out", "dev")) or \
        util.list_out(os.path.join(m.mnt, "out", "dev")) == []
    ck = os.path.join(m.mnt, "checkpoint", "dev")
    assert os.listdir(os.path.join(ck, "commits")) == []
    # no report: nothing committed, only why
    assert json.loads(util.read_file(os.path.join(m.mnt, "status", "dev.json"))) == \
        {"lastError": "cannot commit batch 0: No space left on device"}
    m.unmount()

    # space comes back: the same batch 0 commits, every row exactly once
    unfill(tmpfs)
    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert p.stdout == "dev: 1 batches, %d rows\n" % len(ids)
    assert p.stderr == ""
    assert status_line(data).startswith("dev batch=0 rows=%d " % len(ids))
    assert status_line(data).endswith(" error=-")
    m = mounts.remount(m)
    assert util.list_out(os.path.join(m.mnt, "out", "dev")) == ["part-00000-00000.jsonl"]
    assert sorted(out_ids(m)) == sorted(ids)
    assert os.listdir(os.path.join(m.mnt, "checkpoint", "dev", "commits")) == ["0"]
    m.unmount()
    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.stdout == "dev: 0 batches, 0 rows\n"
    check_clean(data)


# -- (b) a mount: retry with backoff ------------------------------------------------

@pytest.mark.allow_stderr(r"query 'dev': cannot commit batch 0: No space left on device "
                          r"\(retrying in \d+ s\)")
def test_mount_retries_with_backoff_and_commits_once(tmpfs, mounts, src):
    tmpfs = tmpfs()
    data = str(tmpfs / "data")
    write_config(data)
    # one file (~100 KiB landed, ~10 MiB of output): one batch
    files, ids = make_inputs(src, 1, 80000)
    m = mounts.new(data=data)
    os.mkdir(m.inp("dev"))
    m.wait_landed()
    fill(tmpfs, 2 * MiB)
    for f in files:
        util.run(["cp", f, m.inp("dev")], check=True)

    # the batch fails, is retried after 1 s, then after 2 s
    def failures():
        return m.stderr().count("cannot commit batch 0: %s" % NOSPACE)
    util.wait_for(lambda: failures() >= 2, 20, "two failed attempts", interval=0.1)
    log = m.stderr()
    assert "(retrying in 1 s)" in log and "(retrying in 2 s)" in log, log
    # nothing of it is visible; the daemon answers; lastError says why
    assert not os.path.exists(os.path.join(m.mnt, "out", "dev")) or \
        util.list_out(os.path.join(m.mnt, "out", "dev")) == []
    assert os.listdir(os.path.join(m.mnt, "checkpoint", "dev", "commits")) == []
    # no report: nothing committed, only why
    assert json.loads(util.read_file(os.path.join(m.mnt, "status", "dev.json"))) == \
        {"lastError": "cannot commit batch 0: No space left on device"}
    st = status_line(data)
    assert st.startswith("dev batch=- ") and NOSPACE in st, st
    assert m.proc.poll() is None
    # landing and deletion go on meanwhile
    write_file(m.inp("notes.txt"), b"no query reads this\n")
    m.wait_landed()
    os.unlink(m.inp("notes.txt"))

    # space comes back: the next attempt commits, no remount
    unfill(tmpfs)
    util.wait_for(lambda: os.path.isdir(os.path.join(m.mnt, "out", "dev")) and
                  util.list_out(os.path.join(m.mnt, "out", "dev")), 20,
                  "the batch to commit after the space came back", interval=0.1)
    assert util.list_out(os.path.join(m.mnt, "out", "dev")) == ["part-00000-00000.jsonl"]
    assert sorted(out_ids(m)) == sorted(ids)
    last = json.loads(util.read_file(os.path.join(m.mnt, "status", "dev.json")))
    assert last["batchId"] == 0 and last["numInputRows"] == len(ids)
    assert status_line(data).endswith(" error=-")
    n = failures()
    # later landings go on as usual
    write_file(m.inp("dev", "late.json"), rows_text(99, 3))
    util.wait_for(lambda: len(util.list_out(os.path.join(m.mnt, "out", "dev"))) == 2, 10,
                  "the next batch")
    assert len(out_ids(m)) == len(ids) + 3
    assert failures() == n
    m.unmount()
    check_clean(data)


# -- (c) the catalog cannot grow ----------------------------------------------------

def land_held_open(path, data, fs, how):
    """Writes data to a new file, fills the disk, then lands it by close(2)
    (how="close") or by rename(2) of a temporary name (how="rename").
    Returns the errno the writer saw, or 0."""
    tmp = path + ".tmp" if how == "rename" else path
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, data)
        fill(fs)
    finally:
        try:
            os.close(fd)
        except OSError as e:
            if how == "close":
                return e.errno
            raise
    if how == "rename":
        try:
            os.rename(tmp, path)
        except OSError as e:
            return e.errno
    return 0


@pytest.mark.timeout(90)
@pytest.mark.allow_stderr(r"ENOSPC|No space left|space|map")
def test_catalog_growth_enospc(tmpfs, mounts):
    tmpfs = tmpfs("96m")
    data = str(tmpfs / "data")
    write_config(data)
    m = mounts.new(data=data)
    os.mkdir(m.inp("dev"))
    os.mkdir(m.inp("free"))
    # a file the query commits: deletable afterwards
    write_file(m.inp("dev", "done.json"), rows_text(0, 5))
    util.wait_for(lambda: os.path.isdir(os.path.join(m.mnt, "out", "dev")), 10, "batch 0")

    # small files live inside the catalog: land them until the disk is full,
    # past the initial 64 MiB map (so it grows) and into ENOSPC
    landed = []
    err = None
    for i in range(3000):
        body = util.pattern(60 * 1024, seed=i)
        name = m.inp("free", "f%04d.bin" % i)
        try:
            write_file(name, body)
        except OSError as e:
            err = e
            break
        landed.append((name, body))
    assert err is not None, "3000 x 60 KiB fitted in a 96 MiB tmpfs"
    assert err.errno == errno.ENOSPC, err
    # landing does not eat the reserve: it is kept for deletions
    assert os.path.getsize(os.path.join(data, "reserve")) > 0
    mdb = os.path.join(data, "catalog", "data.mdb")
    assert os.path.getsize(mdb) > 64 * MiB, "the catalog never outgrew its first map"
    d = m.wait_landed()
    assert util.refused(d, "ENOSPC") >= 1, d
    assert d["filesLanded"] == 1 + len(landed)
    assert sorted(os.listdir(m.inp("free"))) == sorted(os.path.basename(n) for n, _ in landed)

    # with the disk full, a record the catalog cannot take fails at close(2):
    # ENOSPC, the file is poisoned and never lands
    refused0 = util.refused(m.wait_landed(), "ENOSPC")
    name = m.inp("free", "full-close.bin")
    got = land_held_open(name, util.pattern(60 * 1024, seed=7), tmpfs, "close")
    assert got == errno.ENOSPC, errno.errorcode.get(got, got)
    d = m.wait_landed()
    assert not os.path.exists(name)
    assert util.refused(d, "ENOSPC") == refused0 + 1, d
    assert d["filesLanded"] == 1 + len(landed)
    # ...and at rename(2) of a temporary name: ENOSPC, nothing lands, the
    # temporary file stays as it was (a rename that failed did nothing)
    rname = m.inp("free", "full-rename.bin")
    rbody = util.pattern(60 * 1024, seed=8)
    got = land_held_open(rname, rbody, tmpfs, "rename")
    assert got == errno.ENOSPC, errno.errorcode.get(got, got)
    assert not os.path.exists(rname)
    assert util.read_file(rname + ".tmp") == rbody
    assert m.landing()["filesLanded"] == 1 + len(landed)

    # deletions of files no query holds still commit on the full disk
    fill(tmpfs)
    assert util.free_bytes(tmpfs) == 0
    for name, _ in landed[:20]:
        os.unlink(name)
    os.unlink(m.inp("dev", "done.json"))  # committed by its query
    kept = landed[20:]
    assert m.proc.poll() is None
    assert sorted(os.listdir(m.inp("free"))) == \
        sorted([os.path.basename(n) for n, _ in kept] + ["full-rename.bin.tmp"])

    # space comes back: landing and the query resume, no remount
    unfill(tmpfs)
    os.rename(rname + ".tmp", rname)  # the same rename now lands
    assert util.read_file(rname) == rbody
    write_file(m.inp("free", "after.bin"), b"after\n")
    write_file(m.inp("dev", "after.json"), rows_text(1, 5))
    util.wait_for(lambda: len(util.list_out(os.path.join(m.mnt, "out", "dev"))) == 2, 10, "batch 1")
    assert util.read_file(m.inp("free", "after.bin")) == b"after\n"
    for p, b in kept[::50]:
        assert util.read_file(p) == b
    d = m.wait_landed()
    assert d["filesLanded"] == 1 + len(landed) + 3
    m.unmount()
    check_clean(data)
    m = mounts.remount(m)
    assert os.path.getsize(os.path.join(data, "reserve")) > 0  # made again at start
    assert len(os.listdir(m.inp("free"))) == len(kept) + 2
    m.unmount()
    check_clean(data)
