"""out/<query>/_spark_metadata/ (CONNECTORS §9, SPARK-NOTES §2.6-2.8): Spark's
file sink log rendered from the catalog for append-mode queries, byte for
byte as Spark writes it; `.compact` every 10 batches; paths as Hadoop's
Path.toUri under file://<mountpoint> or -o sparkroot; read-only; and, after
kill -9 at the engine's fault points, naming exactly the committed parts.
Tests land files with `sluice land`, run `sluice run --available-now`, then
mount to read."""

import errno
import json
import os
import random
import re
import shutil
import threading
import time

import pytest

import util

pytestmark = pytest.mark.timeout(180)

SM = "_spark_metadata"
PART = re.compile(r"^part-(\d+)-(\d+)\.")
URI_SAFE = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
               b"_-!.~'()*,;:$&+=/@")


def uri_encode(path):
    """Hadoop's Path.toUri for a path: java.net.URI's quoting, non-ASCII kept."""
    out = bytearray()
    for b in path.encode():
        if b in URI_SAFE or b >= 0x80:
            out.append(b)
        else:
            out += b"%%%02X" % b
    return out.decode()


def uri_decode(s):
    return re.sub(rb"%([0-9A-F]{2})", lambda m: bytes([int(m.group(1), 16)]),
                  s.encode()).decode()


def write_config(data, queries):
    """queries: {name: query dict}; each reads in/<its source path>."""
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump({"queries": queries}, f)


def query(path="ev", schema="id BIGINT, k STRING", sink=None, **source):
    src = {"format": "json", "path": path, "schema": schema, "maxFilesPerTrigger": 1}
    src.update(source)
    q = {"source": src}
    if sink:
        q["sink"] = sink
    return q


def put(tmp, name, rows):
    p = os.path.join(str(tmp), name)
    with open(p, "w") as f:
        for r in rows:
            f.write(r if isinstance(r, str) else json.dumps(r) + "\n")
    return p


def land(data, to, *files):
    p = util.sluice("land", data, *files, "--to", to)
    assert p.returncode == 0, p.stderr


def run(data, expect=0, env=None):
    p = util.sluice("run", "--available-now", data, timeout=90, env=env)
    assert p.returncode == expect, (p.returncode, p.stdout, p.stderr)
    return p


def read(path):
    with open(path, "rb") as f:
        return f.read()


def out_parts(m, q="q"):
    """[(batch, part, rel, st)] of the parts under out/<q>/, in log order."""
    base = os.path.join(m.mnt, "out", q)
    got = []
    for d, dirs, files in os.walk(base):
        if d == base and SM in dirs:
            dirs.remove(SM)
        for f in files:
            mt = PART.match(f)
            assert mt, f
            rel = os.path.relpath(os.path.join(d, f), base)
            got.append((int(mt.group(1)), int(mt.group(2)), rel, os.stat(os.path.join(d, f))))
    return sorted(got, key=lambda p: (p[0], p[1], p[2]))


def entry(root, q, rel, st):
    return {"path": root + "/out/" + q + "/" + uri_encode(rel), "size": st.st_size,
            "isDir": False, "modificationTime": st.st_mtime_ns // 1000000,
            "blockReplication": 1, "blockSize": 33554432, "action": "add"}


def serialize(entries):
    return ("v1" + "".join("\n" + json.dumps(e, separators=(",", ":"), ensure_ascii=False)
                           for e in entries)).encode()


def log_names(last):
    """What _spark_metadata lists after batch `last`."""
    k = (last + 1) // 10
    first = k * 10
    return (["%d.compact" % (first - 1)] if k else []) + [str(n) for n in range(first, last + 1)]


def file_root(m):
    return "file://" + uri_encode(os.path.realpath(m.mnt))


def check_log(m, q="q", root=None, last=None):
    """The log against out/<q>/: every listed file's bytes exactly as Spark
    serializes the parts of its batches, st_size equal to the bytes read.
    Returns the last batch listed."""
    root = root or file_root(m)
    meta = os.path.join(m.mnt, "out", q, SM)
    names = os.listdir(meta)
    ids = [int(n.split(".")[0]) for n in names]
    if last is None:
        last = max(ids)
    assert sorted(names, key=lambda n: int(n.split(".")[0])) == log_names(last)
    parts = out_parts(m, q)
    for name in names:
        n = int(name.split(".")[0])
        lo = 0 if name.endswith(".compact") else n
        want = serialize([entry(root, q, rel, st) for b, _, rel, st in parts if lo <= b <= n])
        got = read(os.path.join(meta, name))
        assert got == want, (name, got, want)
        st = os.stat(os.path.join(meta, name))
        assert st.st_size == len(got)
        assert (st.st_mode & 0o777) == 0o444
    return last


def land_batches(tmp, data, first, count, to="ev"):
    files = [put(tmp, "f%03d.json" % i, [{"id": i, "k": "a"}, {"id": i * 100, "k": "b"}])
             for i in range(first, first + count)]
    land(data, to, *files)


# -- the log across compactions --------------------------------------------------

def test_batches_and_compaction(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"q": query()})
    land_batches(tmp_path, data, 0, 5)
    run(data)
    m = mounts.new(data=data)
    assert check_log(m) == 4
    meta = os.path.join(m.mnt, "out", "q", SM)
    assert sorted(os.listdir(os.path.join(m.mnt, "out", "q"))) == [
        SM] + ["part-%05d-00000.jsonl" % b for b in range(5)]
    assert os.path.isdir(meta) and (os.stat(meta).st_mode & 0o777) == 0o555
    m.unmount()

    land_batches(tmp_path, data, 5, 11)  # batches 5..15
    run(data)
    m = mounts.new(data=data)
    assert check_log(m) == 15
    assert sorted(os.listdir(os.path.join(m.mnt, "out", "q", SM))) == sorted(
        ["9.compact", "10", "11", "12", "13", "14", "15"])
    m.unmount()

    land_batches(tmp_path, data, 16, 9)  # batches 16..24
    run(data)
    m = mounts.new(data=data)
    assert check_log(m) == 24
    meta = os.path.join(m.mnt, "out", "q", SM)
    assert sorted(os.listdir(meta)) == sorted(["19.compact", "20", "21", "22", "23", "24"])
    # the compact file holds every part of batches 0..19, one line each, in order
    lines = read(os.path.join(meta, "19.compact")).decode().split("\n")
    assert lines[0] == "v1" and len(lines) == 21
    assert [json.loads(l)["path"].rsplit("/", 1)[1] for l in lines[1:]] == [
        "part-%05d-00000.jsonl" % b for b in range(20)]
    one = json.loads(read(os.path.join(meta, "22")).decode().split("\n")[1])
    st = os.stat(os.path.join(m.mnt, "out", "q", "part-00022-00000.jsonl"))
    assert one == {"path": file_root(m) + "/out/q/part-00022-00000.jsonl", "size": st.st_size,
                   "isDir": False, "modificationTime": st.st_mtime_ns // 1000000,
                   "blockReplication": 1, "blockSize": 33554432, "action": "add"}
    assert file_root(m).startswith("file:///")
    # superseded files are not listed but still answer, with the same bytes,
    # so that a reader that listed before a compaction reads what it listed
    parts = out_parts(m)
    for name, lo, hi in (("9.compact", 0, 9), ("19", 19, 19), ("9", 9, 9), ("3", 3, 3)):
        want = serialize([entry(file_root(m), "q", rel, st)
                          for b, _, rel, st in parts if lo <= b <= hi])
        assert read(os.path.join(meta, name)) == want, name
        assert os.stat(os.path.join(meta, name)).st_size == len(want)
    # what never was does not answer
    for name in ("25", "25.compact", "020", "x", "20.compact", "8.compact", "-1", "9.compact.x"):
        util.expect_errno(errno.ENOENT, os.stat, os.path.join(meta, name))


def test_empty_batch_is_v1(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"q": query(mode="DROPMALFORMED")})
    land(data, "ev", put(tmp_path, "a.json", [{"id": 1, "k": "x"}]))
    land(data, "ev", put(tmp_path, "b.json", ["{not json\n", "[1,\n"]))
    land(data, "ev", put(tmp_path, "c.json", [{"id": 3, "k": "y"}]))
    run(data)
    m = mounts.new(data=data)
    meta = os.path.join(m.mnt, "out", "q", SM)
    assert sorted(os.listdir(meta)) == ["0", "1", "2"]
    assert read(os.path.join(meta, "1")) == b"v1"
    assert os.stat(os.path.join(meta, "1")).st_size == 2
    assert check_log(m) == 2


# -- paths -------------------------------------------------------------------------

def test_partitioned_paths_are_url_encoded(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"q": query(sink={"format": "json", "partitionBy": ["k"]})})
    land(data, "ev", put(tmp_path, "a.json", [
        {"id": 1, "k": "a b"}, {"id": 2, "k": "x%y#z:w"}, {"id": 3, "k": "caf\u00e9"},
        {"id": 4, "k": "p@q"}, {"id": 5, "k": "2026-10-04 12:00:00"}, {"id": 6}]))
    land(data, "ev", put(tmp_path, "b.json", [{"id": 7, "k": "a b"}, {"id": 8, "k": "plain"}]))
    run(data)
    # a mountpoint given with '..', whose real name needs encoding too
    real = tmp_path / "mnt %@#x"
    os.makedirs(real)
    os.makedirs(tmp_path / "sub")
    m = mounts.new(data=data, mnt=str(tmp_path / "sub" / ".." / "mnt %@#x"))
    root = file_root(m)
    assert root == "file://" + uri_encode(str(real.resolve()))
    assert "/sub/" not in read(os.path.join(m.mnt, "out", "q", SM, "0")).decode()
    assert "mnt%20%25@%23x" in root
    assert check_log(m) == 1
    dirs = sorted(os.listdir(os.path.join(m.mnt, "out", "q")))
    assert SM in dirs and "k=2026-10-04 12%3A00%3A00" in dirs
    text = read(os.path.join(m.mnt, "out", "q", SM, "0")).decode()
    assert "/out/q/k=2026-10-04%2012%253A00%253A00/part-00000-" in text
    assert "/out/q/k=caf\u00e9/part-00000-" in text
    assert "/out/q/k=p@q/part-00000-" in text
    # every entry decodes back to a part that exists with that size
    for line in text.split("\n")[1:]:
        e = json.loads(line)
        p = uri_decode(e["path"][len(root):])
        assert os.stat(m.mnt + p).st_size == e["size"]


def test_sparkroot_changes_the_prefix(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"q": query()})
    land_batches(tmp_path, data, 0, 2)
    run(data)
    m = mounts.new(data=data, opts=["sparkroot=hdfs://nn/x/"])
    assert check_log(m, root="hdfs://nn/x") == 1
    text = read(os.path.join(m.mnt, "out", "q", SM, "1")).decode()
    assert '{"path":"hdfs://nn/x/out/q/part-00001-00000.jsonl",' in text


def test_sparkroot_empty_is_refused(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"q": query()})
    mnt = tmp_path / "mnt"
    os.makedirs(mnt)
    p = util.sluice("mount", data, mnt, "-o", "sparkroot=")
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "sparkroot=" in p.stderr
    assert not os.path.ismount(str(mnt))


# -- which queries -----------------------------------------------------------------

def test_only_append_queries_have_a_log(mounts, tmp_path):
    data = str(tmp_path / "data")
    agg = {"groupBy": {"columns": ["k"]}, "aggregate": {"n": "count(*)"}}
    write_config(data, {
        "app": query(),
        "upd": dict(query(), outputMode="update", **agg),
        "cmp": dict(query(), outputMode="complete", **agg),
        "pq": query(sink={"format": "csv"}),
    })
    land_batches(tmp_path, data, 0, 3)
    run(data)
    m = mounts.new(data=data)
    for q in ("app", "pq"):
        assert SM in os.listdir(os.path.join(m.mnt, "out", q))
        assert check_log(m, q) == 2
    for q in ("upd", "cmp"):
        base = os.path.join(m.mnt, "out", q)
        assert os.listdir(base) and SM not in os.listdir(base)
        util.expect_errno(errno.ENOENT, os.stat, os.path.join(base, SM))
    # nowhere else either
    for d in ("", "out", "in", "in/ev", "checkpoint/app"):
        util.expect_errno(errno.ENOENT, os.stat, os.path.join(m.mnt, d, SM))


def test_read_only(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"q": query()})
    land_batches(tmp_path, data, 0, 1)
    run(data)
    m = mounts.new(data=data)
    base = os.path.join(m.mnt, "out", "q")
    meta = os.path.join(base, SM)
    f0 = os.path.join(meta, "0")
    before = read(f0)
    util.expect_errno(errno.EROFS, os.open, os.path.join(meta, "new"), os.O_CREAT | os.O_WRONLY)
    util.expect_errno(errno.EROFS, os.open, f0, os.O_WRONLY)
    util.expect_errno(errno.EROFS, os.open, f0, os.O_RDONLY | os.O_TRUNC)
    util.expect_errno(errno.EROFS, os.unlink, f0)
    util.expect_errno(errno.EROFS, os.mkdir, os.path.join(meta, "d"))
    util.expect_errno(errno.EROFS, os.rename, f0, os.path.join(meta, "1"))
    util.expect_errno(errno.EROFS, os.rename, meta, os.path.join(base, "x"))
    util.expect_errno(errno.EROFS, os.rmdir, meta)
    util.expect_errno(errno.EROFS, os.truncate, f0, 0)
    util.expect_errno(errno.EROFS, os.chmod, f0, 0o666)
    util.expect_errno(errno.EROFS, os.utime, f0, (0, 0))
    assert read(f0) == before and sorted(os.listdir(meta)) == ["0"]


# -- consistency after kill -9 -----------------------------------------------------

def check_consistent(m, q="q"):
    """Every listed entry names a part that exists with that size and mtime;
    every part of a listed batch is in exactly one entry. Returns the last
    batch listed, or -1. (The mount's engine may commit meanwhile: parts of
    later batches than the log listed are left for the next look.)"""
    base = os.path.join(m.mnt, "out", q)
    if not os.path.isdir(base):
        return -1
    meta = os.path.join(base, SM)
    names = os.listdir(meta)
    if not names:
        return -1
    last = max(int(n.split(".")[0]) for n in names)
    assert sorted(names, key=lambda n: int(n.split(".")[0])) == log_names(last)
    root = file_root(m)
    seen = {}
    for name in names:
        data = read(os.path.join(meta, name))
        assert os.stat(os.path.join(meta, name)).st_size == len(data)
        lines = data.decode().split("\n")
        assert lines[0] == "v1"
        for line in lines[1:]:
            e = json.loads(line)
            assert e["path"].startswith(root + "/out/" + q + "/")
            rel = uri_decode(e["path"][len(root + "/out/" + q + "/"):])
            seen[rel] = seen.get(rel, 0) + 1
            st = os.stat(os.path.join(base, rel))
            assert (e["size"], e["modificationTime"]) == (st.st_size, st.st_mtime_ns // 1000000)
    for b, _, rel, _ in out_parts(m, q):
        if b <= last:
            assert seen.get(rel) == 1, (rel, seen.get(rel))
    assert all(int(PART.match(os.path.basename(r)).group(1)) <= last for r in seen)
    return last


@pytest.mark.parametrize("point", ["engine.before_commit", "catalog.after_commit",
                                   "engine.after_commit", "engine.after_offsets"])
def test_consistent_after_kill_at_fault_points(mounts, tmp_path, point):
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    data = str(tmp_path / "data")
    q = query(sink={"format": "json", "partitionBy": ["k"]})
    q["trigger"] = {"processingTime": "1 hour"}  # a mount runs at most one batch
    write_config(data, {"q": q})
    land_batches(tmp_path, data, 0, 14)
    died = 0
    last = -1
    seen = []
    for n in (1, 2, 3, 1, 2, 4, 1):
        p = util.sluice("run", "--available-now", data, timeout=90,
                        env=dict(os.environ, SLUICE_FAULT="%s:%d" % (point, n)))
        assert p.returncode in (0, 86), (p.returncode, p.stderr)
        died += p.returncode == 86
        m = mounts.new(data=data)
        now = check_consistent(m)
        assert now >= last
        last = now
        seen.append(now)
        m.unmount()
    assert died >= 1
    assert seen[0] < 13, seen  # crash states were looked at, not only the end
    run(data)
    m = mounts.new(data=data)
    assert check_consistent(m) == 13
    assert check_log(m) == 13
    # two parts per batch (k=a, k=b), all of them in 9.compact and 10..13
    assert len(out_parts(m)) == 28


PAD_ROWS = 20000


@pytest.mark.allow_stderr(r"recover")
def test_consistent_after_kill9_of_a_live_mount(mounts, tmp_path):
    """A mount whose query commits a batch per landed file, killed with
    kill -9 at random moments while files land through in/: after each
    kill a new mount's log names exactly the committed parts (no entry
    without its part, no part of a listed batch without its entry), and at
    the end every landed row is in out/ exactly once and the log is
    byte-exact, past a compaction."""
    seed = int(os.environ.get("SLUICE_KILL_SEED", random.randrange(1 << 30)))
    rnd = random.Random(seed)
    print("SLUICE_KILL_SEED=%d" % seed)  # shown with a failure
    data = str(tmp_path / "data")
    write_config(data, {"q": query(sink={"format": "json", "partitionBy": ["k"]})})
    m = mounts.new(data=data)
    os.mkdir(os.path.join(m.mnt, "in", "ev"))
    landed = 0
    kills = 0
    last = -1
    while landed < 24:
        for _ in range(rnd.randint(1, 4)):
            # big enough that a batch takes a while: kills land inside batches
            src = put(tmp_path, "f%03d.json" % landed,
                      [{"id": landed, "k": "a"}, {"id": 1000 + landed, "k": "b"}] +
                      ['{"id": -1, "k": "p%d"}\n' % (i % 8) for i in range(PAD_ROWS)])
            shutil.copy(src, os.path.join(m.mnt, "in", "ev"))  # lands at close
            landed += 1
        time.sleep(rnd.choice((0, rnd.uniform(0, 0.05), rnd.uniform(0, 0.25))))
        m.kill9()
        kills += 1
        util.lazy_unmount(m.mnt)
        util.wait_for(lambda: not util.is_listed_mount(m.mnt), 10, "the dead mount to go")
        if os.environ.get("SLUICE_KILL_TRACE"):  # where the kill left the query
            print(util.sluice("status", data).stdout.strip().splitlines()[-1])
        m = mounts.remount(m)
        now = check_consistent(m)
        assert now >= last, "seed %d: log went back from %d to %d" % (seed, last, now)
        last = now
        if os.environ.get("SLUICE_KILL_TRACE"):
            print("landed %d, log at %d" % (landed, now))
    util.wait_for(lambda: check_consistent(m) == landed - 1, 60,
                  "every landed file committed (seed %d)" % seed)
    assert check_log(m) == landed - 1
    ids = []
    pads = 0
    for _b, _p, rel, _st in out_parts(m):
        for line in read(os.path.join(m.mnt, "out", "q", rel)).decode().splitlines():
            i = json.loads(line)["id"]
            if i == -1:
                pads += 1
            else:
                ids.append(i)
    assert pads == landed * PAD_ROWS, seed
    assert sorted(ids) == sorted(list(range(landed)) + [1000 + i for i in range(landed)]), seed
    assert kills >= 6


def test_readers_racing_compactions(mounts, tmp_path):
    """Readers list the log and read what they listed while a live query
    commits a batch per landed file and compacts every 10: a file listed
    before a compaction still reads (Spark keeps superseded log files for
    cleanupDelay for the same reason), always with its batch's bytes."""
    data = str(tmp_path / "data")
    write_config(data, {"q": query(sink={"format": "json", "partitionBy": ["k"]})})
    m = mounts.new(data=data)
    os.mkdir(os.path.join(m.mnt, "in", "ev"))
    meta = os.path.join(m.mnt, "out", "q", SM)
    stop = threading.Event()
    errors = []
    reads = [0]

    def reader():
        while not stop.is_set():
            try:
                names = os.listdir(meta)
            except FileNotFoundError:
                continue  # before the first batch
            for name in names:
                try:
                    lines = read(os.path.join(meta, name)).decode().split("\n")
                except OSError as e:
                    errors.append((name, sorted(names), e.errno))
                    continue
                reads[0] += 1
                if lines[0] != "v1" or any(json.loads(l)["action"] != "add" for l in lines[1:]):
                    errors.append((name, "bad bytes", lines[:2]))

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for i in range(45):
            src = put(tmp_path, "f%03d.json" % i, [{"id": i, "k": "a"}, {"id": i, "k": "b"}])
            shutil.copy(src, os.path.join(m.mnt, "in", "ev"))
        util.wait_for(lambda: check_consistent(m) == 44, 60, "45 batches committed")
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert errors == [], errors[:5]
    assert reads[0] > 45
    assert check_log(m) == 44
