"""Retention of out/ (`sink.retention`): `batches` keeps the parts of the
last N batches and `age` those committed within it, partition folders
left empty go too, in the batch's commit and at start for what a changed
config lets go; a reader holding a part open reads all its bytes; a
downstream `query` source keeps the parts it has not committed; a kill
between the commit and the blobs' unlink leaks nothing; _spark_metadata
lists only parts that exist; every blob is accounted for (`sluice check`)."""

import json
import os
import random
import re
import subprocess
import time
import urllib.parse

import pytest

import util

pytestmark = pytest.mark.timeout(240)

SCHEMA = "id STRING, user STRING, n BIGINT, pad STRING"
INLINE_MAX = 65536  # parts above this are blobs


def write_config(data, queries):
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump({"queries": queries}, f)


def rows(i, n=3, pad=0, user=None):
    return [{"id": "%d-%d" % (i, k), "user": user or "u%d" % i, "n": k, "pad": "x" * pad}
            for k in range(n)]


def land(tmp_path, data, name, rs, to="ev"):
    p = tmp_path / name
    p.write_text("".join(json.dumps(r) + "\n" for r in rs))
    r = util.sluice("land", data, str(p), "--to", to)
    assert r.returncode == 0, r.stderr


def run(data, expect=0, env=None):
    p = util.sluice("run", "--available-now", data, timeout=120, env=env)
    assert p.returncode == expect, (p.returncode, p.stdout, p.stderr)
    return p


def parts(base):
    """{relative path: batch id} of the parts under out/<q>/."""
    out = {}
    for dirpath, _dirs, names in util.walk_out(base):
        for n in names:
            m = re.match(r"part-(\d+)-(\d+)\.", n)
            assert m, n
            out[os.path.relpath(os.path.join(dirpath, n), base)] = int(m.group(1))
    return out


def folders(base):
    return sorted(os.path.relpath(d, base) for d, _dirs, _names in util.walk_out(base)
                  if d != base)


def blob_files(data):
    return util.count_files(os.path.join(data, "blobs"))


def big_files(root):
    n = 0
    for dirpath, _dirs, names in util.walk_out(root):
        n += sum(os.stat(os.path.join(dirpath, x)).st_size > INLINE_MAX for x in names)
    return n


def check_consistent(data):
    p = util.sluice("check", data)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[-1].endswith("consistent"), p.stdout
    return p.stdout


def check_spark_log(mnt, q, visible):
    """Each _spark_metadata/N lists exactly the visible parts of batch N, at
    paths that exist and with their sizes."""
    base = os.path.join(mnt, "out", q)
    log = os.path.join(base, "_spark_metadata")
    listed = {}
    for name in os.listdir(log):
        with open(os.path.join(log, name)) as f:
            lines = f.read().split("\n")
        assert lines[0] == "v1", (name, lines)
        for line in lines[1:]:
            if not line:
                continue
            e = json.loads(line)
            path = urllib.parse.unquote(urllib.parse.urlparse(e["path"]).path)
            st = os.stat(path)  # it exists
            assert st.st_size == e["size"], (path, e)
            rel = os.path.relpath(path, base)
            if not name.endswith(".compact"):
                assert visible[rel] == int(name), (name, rel)
            listed[rel] = visible[rel]
    # the latest .compact and the batches after it: every visible part once
    assert listed == visible


def query(fmt="json", retention=None, partition=True, **src):
    sink = {"format": fmt}
    if partition:
        sink["partitionBy"] = ["user"]
    if retention:
        sink["retention"] = retention
    source = {"format": "json", "path": "ev", "schema": SCHEMA, "maxFilesPerTrigger": 1}
    source.update(src)
    return {"source": source, "sink": sink}


def metric(mnt, name, q):
    with open(os.path.join(mnt, "status", "metrics")) as f:
        for line in f:
            if line.startswith('%s{query="%s"}' % (name, q)):
                return int(line.split()[-1])
    raise AssertionError("no %s for %s" % (name, q))


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_batches_keeps_the_last_n(mounts, tmp_path, fmt):
    data = str(tmp_path / "data")
    write_config(data, {"q": query(fmt, {"batches": 3})})
    for i in range(8):
        # every batch has a folder of its own, and one they share; even ones are blobs
        rs = rows(i, 400, pad=300 if i % 2 == 0 else 0) + rows(100 + i, 1, user="all")
        land(tmp_path, data, "f%d.json" % i, rs)
    run(data)
    m = mounts.new(data=data)
    base = os.path.join(m.mnt, "out", "q")
    visible = parts(base)
    assert sorted(set(visible.values())) == [5, 6, 7], visible
    assert folders(base) == ["user=all", "user=u5", "user=u6", "user=u7"]
    check_spark_log(m.mnt, "q", visible)
    assert metric(m.mnt, "sluice_query_parts_expired_total", "q") == 10  # 5 batches x 2
    big = big_files(base) + big_files(os.path.join(m.mnt, "in"))
    m.unmount()
    # the expired parts' blobs are gone: every blob is a visible file's
    assert blob_files(data) == big
    check_consistent(data)


def test_age_expires_parts_older_than_it(mounts, tmp_path):
    """Age 1 second: a batch committed 2 s after the first expires it, never
    itself (no wall-clock race: the wait only makes the first older)."""
    data = str(tmp_path / "data")
    write_config(data, {"q": query("json", {"age": "1 second"}, partition=False)})
    land(tmp_path, data, "f0.json", rows(0))
    run(data)
    time.sleep(2.1)
    land(tmp_path, data, "f1.json", rows(1))
    land(tmp_path, data, "f2.json", rows(2))
    run(data)  # batches 1 and 2, within a second of each other
    m = mounts.new(data=data)
    visible = parts(os.path.join(m.mnt, "out", "q"))
    assert sorted(visible.values()) == [1, 2], visible
    check_spark_log(m.mnt, "q", visible)
    m.unmount()
    check_consistent(data)


def test_a_config_change_expires_at_start(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"q": query("json")})
    for i in range(4):
        land(tmp_path, data, "f%d.json" % i, rows(i, 300, pad=300))
    run(data)
    m = mounts.new(data=data)
    assert sorted(parts(os.path.join(m.mnt, "out", "q")).values()) == [0, 1, 2, 3]
    m.unmount()
    write_config(data, {"q": query("json", {"batches": 1})})
    p = run(data)  # no new data: the start expires what the new config lets go
    assert "q: 0 batches" in p.stdout, p.stdout
    m = mounts.remount(m)
    base = os.path.join(m.mnt, "out", "q")
    visible = parts(base)
    assert sorted(visible.values()) == [3], visible
    assert folders(base) == ["user=u3"]
    check_spark_log(m.mnt, "q", visible)
    big = big_files(base) + big_files(os.path.join(m.mnt, "in"))
    m.unmount()
    assert blob_files(data) == big
    check_consistent(data)


def wait_gone(path, timeout=30):
    util.wait_for(lambda: not os.path.exists(path), timeout, "%s to leave out/" % path)


def deleted_blobs_open(pid):
    """The unlinked blobs process pid still has open: bytes not freed yet."""
    n = 0
    fds = "/proc/%d/fd" % pid
    for fd in os.listdir(fds):
        try:
            target = os.readlink(os.path.join(fds, fd))
        except OSError:
            continue
        n += "/blobs/" in target and target.endswith(" (deleted)")
    return n


def test_an_open_reader_keeps_reading(mounts, tmp_path):
    """A part open in a reader when retention removes it: the reader reads
    every byte; its blob is unlinked at once, the bytes freed at the close."""
    data = str(tmp_path / "data")
    write_config(data, {"q": query("json", {"batches": 1}, partition=False)})
    m = mounts.new(data=data)
    src = os.path.join(m.mnt, "in", "ev")
    os.makedirs(src, exist_ok=True)
    util.write_file(os.path.join(src, "a.json"),
                    "".join(json.dumps(r) + "\n" for r in rows(0, 2000, pad=100)).encode())
    first = os.path.join(m.mnt, "out", "q", "part-00000-00000.jsonl")
    util.wait_for(lambda: os.path.exists(first), 30, "batch 0's part")
    size = os.stat(first).st_size
    assert size > INLINE_MAX
    f = open(first, "rb")
    try:
        head = f.read(1000)
        util.write_file(os.path.join(src, "b.json"),
                        "".join(json.dumps(r) + "\n" for r in rows(1, 2000, pad=100)).encode())
        second = os.path.join(m.mnt, "out", "q", "part-00001-00000.jsonl")
        util.wait_for(lambda: os.path.exists(second), 30, "batch 1's part")
        wait_gone(first)
        assert sorted(os.listdir(os.path.join(m.mnt, "out", "q"))) == ["_spark_metadata",
                                                                "part-00001-00000.jsonl"]
        # the blob left the blob store: 2 inputs and batch 1's part remain
        util.wait_for(lambda: blob_files(data) == 3, 30, "the expired blob unlinked")
        # its bytes live on in the mount's descriptor, for this reader
        assert deleted_blobs_open(m.proc.pid) == 1
        rest = f.read()
    finally:
        f.close()
    # freed at the last close
    util.wait_for(lambda: deleted_blobs_open(m.proc.pid) == 0, 30, "the bytes freed")
    text = (head + rest).decode()
    assert len(head + rest) == size
    assert [json.loads(x)["id"] for x in text.splitlines()] == ["0-%d" % k
                                                                 for k in range(2000)]
    m.unmount()
    assert blob_files(data) == 3
    check_consistent(data)


def test_a_lagging_downstream_holds_parts(mounts, tmp_path):
    """A downstream query source whose sink fails has committed nothing: the
    upstream's parts all stay; once it has read them, they go."""
    data = str(tmp_path / "data")
    flag = tmp_path / "ok"
    write_config(data, {
        "up": query("json", {"batches": 1}),
        "down": {"source": {"format": "query", "query": "up"},
                 "sink": {"format": "exec",
                          "command": ["sh", "-c", "cat >/dev/null; test -e %s" % flag]}}})
    for i in range(5):
        land(tmp_path, data, "f%d.json" % i, rows(i))
    p = run(data, expect=1)
    assert "up: 5 batches" in p.stdout, p.stdout
    m = mounts.new(data=data)
    m.allow(r"down")  # it fails again in the mount
    base = os.path.join(m.mnt, "out", "up")
    assert sorted(parts(base).values()) == [0, 1, 2, 3, 4]
    m.unmount()
    flag.write_text("")
    p = run(data)  # the downstream catches up; the upstream started before it
    assert "down: 1 batches, 15 rows" in p.stdout, p.stdout
    m = mounts.remount(m)
    util.wait_for(lambda: sorted(parts(base).values()) == [4], 30,
                  "the read parts to expire at the upstream's start")
    assert folders(base) == ["user=u4"]
    check_spark_log(m.mnt, "up", parts(base))
    m.unmount()
    check_consistent(data)


def test_a_removed_downstream_stops_holding(mounts, tmp_path):
    data = str(tmp_path / "data")
    down = {"source": {"format": "query", "query": "up"},
            "sink": {"format": "exec", "command": ["false"]}}
    write_config(data, {"up": query("json", {"batches": 2}), "down": down})
    for i in range(4):
        land(tmp_path, data, "f%d.json" % i, rows(i))
    run(data, expect=1)
    write_config(data, {"up": query("json", {"batches": 2})})
    run(data)
    m = mounts.new(data=data)
    assert sorted(parts(os.path.join(m.mnt, "out", "up")).values()) == [2, 3]
    m.unmount()
    check_consistent(data)


def test_a_kill_before_the_unlink_leaks_nothing(mounts, tmp_path):
    """Killed after a commit that expired parts, before their blobs were
    unlinked: `sluice check` counts them as leftovers, and the next start
    unlinks them; nothing expired is visible."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    data = str(tmp_path / "data")
    write_config(data, {"q": query("json", {"batches": 1}, partition=False)})
    for i in range(4):
        land(tmp_path, data, "f%d.json" % i, rows(i, 300, pad=300))
    # batches 0 and 1 commit, the process dies before batch 1's unlinks
    run(data, expect=86, env=dict(os.environ, SLUICE_FAULT="engine.after_commit:2"))
    assert blob_files(data) == 4 + 2  # inputs, batch 1's part, batch 0's leftover
    check_consistent(data)
    run(data)
    m = mounts.new(data=data)
    base = os.path.join(m.mnt, "out", "q")
    assert sorted(parts(base).values()) == [3]
    big = big_files(base) + big_files(os.path.join(m.mnt, "in"))
    m.unmount()
    assert big == 5
    assert blob_files(data) == big
    check_consistent(data)


def test_kill9_at_random_then_a_final_run(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"q": query("json", {"batches": 2}, partition=False)})
    for i in range(10):
        land(tmp_path, data, "f%d.json" % i, rows(i, 300, pad=300))
    rnd = random.Random(1612)
    for _ in range(6):
        proc = subprocess.Popen([util.sluice_bin(), "run", "--available-now", data],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            proc.wait(timeout=rnd.uniform(0.02, 0.3))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
    run(data)
    m = mounts.new(data=data)
    base = os.path.join(m.mnt, "out", "q")
    visible = parts(base)
    assert sorted(visible.values()) == [8, 9], visible
    check_spark_log(m.mnt, "q", visible)
    big = big_files(base) + big_files(os.path.join(m.mnt, "in"))
    m.unmount()
    assert blob_files(data) == big
    check_consistent(data)


@pytest.mark.parametrize("sink,want", [
    ({"format": "console", "retention": {"batches": 1}},
     "queries.q.sink.retention: only for the file sinks"),
    ({"format": "json", "retention": {"batches": 0}},
     "queries.q.sink.retention.batches: expected a positive integer"),
    ({"format": "json", "retention": {"age": "soon"}},
     "queries.q.sink.retention.age: expected a duration"),
    ({"format": "json", "retention": {"keep": 1}},
     "queries.q.sink.retention.keep: unknown option"),
])
def test_config_errors(tmp_path, sink, want):
    data = str(tmp_path / "data")
    write_config(data, {"q": {"source": {"format": "json", "path": "ev", "schema": SCHEMA},
                              "sink": sink}})
    p = util.sluice("run", "--available-now", data)
    assert p.returncode == 4, (p.stdout, p.stderr)
    assert want in p.stderr, p.stderr


def test_complete_mode_is_refused(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"q": {"source": {"format": "json", "path": "ev", "schema": SCHEMA},
                              "groupBy": {"columns": ["user"]},
                              "aggregate": {"n": "count(*)"}, "outputMode": "complete",
                              "sink": {"format": "json", "retention": {"batches": 2}}}})
    p = util.sluice("run", "--available-now", data)
    assert p.returncode == 4
    assert "queries.q.sink.retention: not with outputMode complete" in p.stderr, p.stderr


def test_a_live_pipeline_loses_no_row(mounts, tmp_path):
    """In a mount the downstream runs as the upstream commits; with the
    upstream keeping one batch, every row still reaches the downstream once
    (the parts it has not committed are held), and the upstream ends with
    its last batch."""
    data = str(tmp_path / "data")
    write_config(data, {
        "up": query("json", {"batches": 1}, partition=False),
        "down": {"source": {"format": "query", "query": "up"}, "sink": {"format": "json"}}})
    m = mounts.new(data=data)
    src = os.path.join(m.mnt, "in", "ev")
    os.makedirs(src, exist_ok=True)
    n = 12
    for i in range(n):
        util.write_file(os.path.join(src, "f%02d.json" % i),
                        "".join(json.dumps(r) + "\n" for r in rows(i, 50)).encode())

    def down_ids():
        out = []
        for dirpath, _dirs, names in util.walk_out(os.path.join(m.mnt, "out", "down")):
            for x in names:
                with open(os.path.join(dirpath, x)) as f:
                    out += [json.loads(line)["id"] for line in f]
        return out

    want = sorted("%d-%d" % (i, k) for i in range(n) for k in range(50))
    util.wait_for(lambda: os.path.isdir(os.path.join(m.mnt, "out", "down")) and
                  len(down_ids()) >= len(want), 60, "every row downstream")
    assert sorted(down_ids()) == want
    # the upstream's next commit or start lets the read batches go
    m.unmount()
    m = mounts.remount(m)
    base = os.path.join(m.mnt, "out", "up")
    util.wait_for(lambda: sorted(parts(base).values()) == [n - 1], 30, "up's last batch only")
    m.unmount()
    check_consistent(data)


def test_age_expires_parts_of_an_idle_query(mounts, tmp_path):
    """A mount expires parts by age while no new data comes: the idle query
    runs again every twentieth of the age (at least each second)."""
    data = str(tmp_path / "data")
    write_config(data, {"q": query("json", {"age": "2 seconds"}, partition=False)})
    land(tmp_path, data, "f0.json", rows(0))
    land(tmp_path, data, "f1.json", rows(1))
    m = mounts.new(data=data)
    base = os.path.join(m.mnt, "out", "q")
    util.wait_for(lambda: os.path.exists(os.path.join(m.mnt, "checkpoint", "q", "commits", "1")),
                  timeout=60, what="batches 0 and 1")
    # nothing lands from here on: batch 0's part goes once 2 s old, batch 1's
    # (the newest) stays
    util.wait_for(lambda: sorted(parts(base).values()) == [1], timeout=60,
                  what="batch 0's part to expire without a new batch")
    assert metric(m.mnt, "sluice_query_parts_expired_total", "q") == 1
    check_spark_log(m.mnt, "q", parts(base))
    m.unmount()
    check_consistent(data)
