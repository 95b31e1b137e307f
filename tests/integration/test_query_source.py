"""The `query` source (CONNECTORS §6): another query's committed output as
a stream. A two-stage pipeline (a cleaning query, then an aggregating query
reading its output) through `sluice run --available-now`, which runs
upstreams first, and through a mount, where the upstream's commit wakes the
downstream; exactly once end to end across crashes at fault points and
`kill -9` of a live mount at random moments; the upstream's columns (a
window struct, partition folders, zstd parts, non-finite doubles) read
back as they were written; update mode's changelog; offsets naming the
upstream's checkpoint id; config errors."""

import json
import os
import random
import shutil
import subprocess
import time

import pytest

import util

pytestmark = pytest.mark.timeout(300)

SCHEMA = "id STRING, user STRING, n BIGINT"


def write_config(data, queries):
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump({"queries": queries}, f)


def land(tmp_path, data, name, rows, to="ev"):
    p = tmp_path / name
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = util.sluice("land", data, str(p), "--to", to)
    assert r.returncode == 0, r.stderr


def run(data, expect=0, env=None):
    p = util.sluice("run", "--available-now", data, timeout=120, env=env)
    assert p.returncode == expect, (p.returncode, p.stdout, p.stderr)
    return p


def rows_in(base):
    """Every row of out/<q>/'s parts (zstd ones decompressed), with each
    partition folder's `k=v` put back, as dicts."""
    out = []
    for dirpath, _dirs, names in util.walk_out(base):
        part = {}
        for comp in os.path.relpath(dirpath, base).split(os.sep):
            if "=" in comp:
                k, v = comp.split("=", 1)
                part[k] = v
        for n in sorted(names):
            p = os.path.join(dirpath, n)
            if n.endswith(".zst"):
                text = subprocess.run(["zstdcat", p], capture_output=True, check=True,
                                      timeout=30).stdout.decode()
            else:
                with open(p) as f:
                    text = f.read()
            for line in text.splitlines():
                r = json.loads(line)
                r.update(part)
                out.append(r)
    return out


CLEAN = {"source": {"format": "json", "path": "ev", "schema": SCHEMA, "maxFilesPerTrigger": 2},
         "dropDuplicates": ["id"]}
# downstream first in the file: run --available-now still runs "clean" first
PIPELINE = {"totals": {"source": {"format": "query", "query": "clean"},
                       "groupBy": {"columns": ["user"]},
                       "aggregate": {"rows": "count(*)", "sum": "sum(n)"},
                       "outputMode": "complete"},
            "clean": CLEAN}


def events(i, per=5):
    """File i's rows: ids repeat across files (the resends clean drops)."""
    return [{"id": "e%d" % ((i * per + k) % 37), "user": "u%d" % (k % 3), "n": i * per + k}
            for k in range(per)]


def expected_totals(files):
    seen, tot = set(), {}
    for i in files:
        for r in events(i):
            if r["id"] in seen:
                continue
            seen.add(r["id"])
            t = tot.setdefault(r["user"], [0, 0])
            t[0] += 1
            t[1] += r["n"]
    return {u: {"rows": c, "sum": s} for u, (c, s) in tot.items()}


def totals_of(mnt):
    return {r["user"]: {"rows": r["rows"], "sum": r["sum"]}
            for r in rows_in(os.path.join(mnt, "out", "totals"))}


def totals_settled(mnt, want):
    """Whether out/totals holds want. A complete-mode batch that commits
    between the listing and the open replaces the part just listed
    (ENOENT): the poll reads again, as any reader of a live out/ would."""
    try:
        return (os.path.isdir(os.path.join(mnt, "out", "totals")) and
                totals_of(mnt) == want)
    except FileNotFoundError:
        return False


def test_pipeline_drains_in_one_run_upstream_first(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, PIPELINE)
    for i in range(5):
        land(tmp_path, data, "f%d.json" % i, events(i))
    p = run(data)
    # reports come in dependency order: the upstream's first
    assert p.stdout.index("clean") < p.stdout.index("totals"), p.stdout
    m = mounts.new(data=data)
    assert totals_of(m.mnt) == expected_totals(range(5))
    # offsets name the upstream's checkpoint id and its last batch read
    with open(os.path.join(m.mnt, "checkpoint", "clean", "metadata")) as f:
        uid = json.load(f)["id"]
    with open(os.path.join(m.mnt, "checkpoint", "totals", "offsets", "0")) as f:
        lines = f.read().split("\n")
    assert json.loads(lines[2]) == {"query": uid, "batchId": 2}  # 5 files, 2 per batch
    prog = json.loads(open(os.path.join(m.mnt, "status", "totals.json")).read())
    src = prog["sources"][0]
    assert src["description"] == "QuerySource[out/clean]"
    assert src["startOffset"] is None and src["endOffset"] == {"query": uid, "batchId": 2}
    m.unmount()


def test_mount_wakes_on_the_upstream_commit(mounts, tmp_path):
    """In a mount the downstream runs when its upstream commits, not on a
    timer: files copied into in/ reach out/totals, and an idle pipeline
    makes no batches."""
    data = str(tmp_path / "data")
    write_config(data, PIPELINE)
    m = mounts.new(data=data)
    os.mkdir(m.inp("ev"))
    for i in range(4):
        src = tmp_path / ("f%d.json" % i)
        src.write_text("".join(json.dumps(r) + "\n" for r in events(i)))
        shutil.copy(str(src), m.inp("ev", "f%d.json" % i))
        util.wait_for(lambda: totals_settled(m.mnt, expected_totals(range(i + 1))), 30,
                      "the totals after file %d" % i)
    commits = os.path.join(m.mnt, "checkpoint", "totals", "commits")
    n = len(os.listdir(commits))
    time.sleep(1.0)  # idle: nothing new upstream, so no batch downstream
    assert len(os.listdir(commits)) == n
    m.unmount()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_exactly_once_across_fault_point_crashes(mounts, tmp_path, seed):
    """Killed at every step of a batch of either query (after the offsets,
    before and after the commit, before a part's fsync, after the catalog
    commit), at random hits, while files keep landing: the totals count
    each event once."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    rnd = random.Random(seed)
    data = str(tmp_path / "data")
    write_config(data, PIPELINE)
    points = ["engine.after_offsets", "engine.before_commit", "engine.after_commit",
              "engine.before_part_fsync", "catalog.after_commit"]
    died, landed = 0, 0
    for step in range(14):
        if rnd.random() < 0.6:
            land(tmp_path, data, "f%d.json" % landed, events(landed))
            landed += 1
        point = "%s:%d" % (rnd.choice(points), rnd.randint(1, 4))
        p = util.sluice("run", "--available-now", data, timeout=120,
                        env=dict(os.environ, SLUICE_FAULT=point))
        assert p.returncode in (0, 86), (point, p.returncode, p.stdout, p.stderr)
        died += p.returncode == 86
    run(data)
    assert died >= 4
    m = mounts.new(data=data)
    assert totals_of(m.mnt) == expected_totals(range(landed))
    m.unmount()


def test_exactly_once_across_kill9_of_a_live_mount(mounts, tmp_path):
    """A mount killed with SIGKILL at random moments while files land and
    both queries run, remounted each time: in the end the totals count each
    event once."""
    rnd = random.Random(7)
    data = str(tmp_path / "data")
    write_config(data, PIPELINE)
    landed = 0
    for round_ in range(6):
        m = mounts.new(data=data)
        m.allow(r".*")
        os.makedirs(m.inp("ev"), exist_ok=True)
        for _ in range(rnd.randint(1, 4)):
            src = tmp_path / ("f%d.json" % landed)
            src.write_text("".join(json.dumps(r) + "\n" for r in events(landed)))
            shutil.copy(str(src), m.inp("ev", "f%d.json" % landed))
            landed += 1
        time.sleep(rnd.uniform(0.0, 0.3))
        m.kill9()
        m.cleanup()
    m = mounts.new(data=data)
    util.wait_for(lambda: totals_settled(m.mnt, expected_totals(range(landed))), 60,
                  "the totals of %d files" % landed)
    m.unmount()


def test_upstream_columns_round_trip(mounts, tmp_path):
    """What the json sink wrote is what the downstream reads: a window
    struct, a partition column from its folder, zstd parts, a NaN and
    infinities, nulls, unicode; the downstream's own json output of the same
    rows equals the upstream's."""
    data = str(tmp_path / "data")
    write_config(data, {
        "win": {"source": {"format": "json", "path": "ev",
                           "schema": "ts TIMESTAMP, user STRING, x DOUBLE"},
                "watermark": {"column": "ts", "delay": "0 seconds"},
                "groupBy": {"window": {"column": "ts", "duration": "10 minutes"},
                            "columns": ["user"]},
                "aggregate": {"n": "count(*)", "s": "sum(x)"},
                "outputMode": "update",
                "sink": {"format": "json", "compression": "zstd", "partitionBy": ["user"]}},
        "copy": {"source": {"format": "query", "query": "win"}},
    })
    land(tmp_path, data, "a.json", [
        {"ts": "2026-10-04T12:01:00Z", "user": "ann", "x": 1.5},
        {"ts": "2026-10-04T12:02:00Z", "user": "ann", "x": "NaN"},
        {"ts": "2026-10-04T12:03:00Z", "user": "bé/ø", "x": "Infinity"},
        {"ts": "2026-10-04T12:14:00Z", "user": None, "x": "-Infinity"},
        {"ts": "2026-10-04T12:15:00Z", "user": "cy", "x": None},
    ])
    run(data)
    m = mounts.new(data=data)
    up = rows_in(os.path.join(m.mnt, "out", "win"))
    down = rows_in(os.path.join(m.mnt, "out", "copy"))
    assert len(up) == 4

    def key(r):
        return json.dumps(r, sort_keys=True)
    # the upstream's partition values come back from folders as text: compare
    # the downstream's rows with the upstream's, user as written in rows
    # (the json sink leaves null fields out, as Spark's does)
    want = []
    for r in up:
        r = dict(r)
        u = r.pop("user")
        if u != "__HIVE_DEFAULT_PARTITION__":
            r["user"] = u.replace("%2F", "/")
        want.append(r)
    assert sorted(map(key, down)) == sorted(map(key, want))
    got = {r.get("user"): r for r in down}
    assert got["ann"]["s"] == "NaN" and got["bé/ø"]["s"] == "Infinity"
    assert got[None]["s"] == "-Infinity" and "s" not in got["cy"]
    assert got["ann"]["window"] == {"start": "2026-10-04T12:00:00.000Z",
                                    "end": "2026-10-04T12:10:00.000Z"}
    m.unmount()


def test_update_mode_is_a_changelog(mounts, tmp_path):
    """An update-mode upstream's batches are each group's new values: the
    downstream reads them as a changelog, every version in order."""
    data = str(tmp_path / "data")
    write_config(data, {
        "counts": {"source": {"format": "json", "path": "ev", "schema": SCHEMA,
                              "maxFilesPerTrigger": 1},
                   "groupBy": {"columns": ["user"]}, "aggregate": {"c": "count(*)"},
                   "outputMode": "update"},
        "log": {"source": {"format": "query", "query": "counts"}},
    })
    land(tmp_path, data, "a.json", [{"id": "1", "user": "a", "n": 1}])
    land(tmp_path, data, "b.json", [{"id": "2", "user": "a", "n": 1},
                                    {"id": "3", "user": "b", "n": 1}])
    run(data)
    m = mounts.new(data=data)
    got = rows_in(os.path.join(m.mnt, "out", "log"))
    assert sorted((r["user"], r["c"]) for r in got) == [("a", 1), ("a", 2), ("b", 1)]
    m.unmount()


def test_an_upstream_without_batches_gives_nothing_yet(tmp_path):
    """The downstream of a query that has not run (no landed file): runs
    cleanly, plans nothing; once files land, the next run reads them."""
    data = str(tmp_path / "data")
    write_config(data, PIPELINE)
    run(data)
    st = util.sluice("status", data).stdout
    assert "totals batch=- rows=0 backlog=0:batches watermark=- error=-" in st, st
    land(tmp_path, data, "a.json", events(0))
    run(data)
    st = util.sluice("status", "--json", data)
    doc = json.loads(st.stdout)
    q = {x["name"]: x for x in doc["queries"]}
    assert q["totals"]["batch"] is not None, doc


def test_changing_the_upstream_is_refused(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, PIPELINE)
    land(tmp_path, data, "a.json", events(0))
    run(data)
    other = dict(PIPELINE, clean2=CLEAN)
    other["totals"] = dict(PIPELINE["totals"], source={"format": "query", "query": "clean2"})
    write_config(data, other)
    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert "queries.totals.source.query: changed since the checkpoint was made " \
           "(was clean, now clean2)" in p.stderr


@pytest.mark.parametrize("queries,msg", [
    ({"a": {"source": {"format": "query", "query": "b"}},
      "b": {"source": {"format": "query", "query": "a"}}},
     "queries.b.source.query: a cycle: 'a' reads 'b' reads 'a'"),
    ({"a": {"source": {"format": "query", "query": "zz"}}},
     "queries.a.source.query: no query named 'zz' in this file"),
    ({"c": dict(CLEAN, sink={"format": "csv"}), "a": {"source": {"format": "query", "query": "c"}}},
     "queries.a.source.query: query 'c' writes with the csv sink"),
])
def test_config_errors_name_the_field(tmp_path, queries, msg):
    data = str(tmp_path / "data")
    write_config(data, queries)
    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert msg in p.stderr, p.stderr


def test_status_shows_the_backlog_in_upstream_batches(tmp_path):
    """`sluice status`, its --json and the metrics count a query source's
    backlog in upstream batches, the file source's in files and bytes."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    data = str(tmp_path / "data")
    write_config(data, PIPELINE)
    for i in range(5):
        land(tmp_path, data, "f%d.json" % i, events(i))
    # clean commits batches 0 and 1, then dies after planning its batch 2
    p = util.sluice("run", "--available-now", data, timeout=60,
                    env=dict(os.environ, SLUICE_FAULT="engine.after_offsets:3"))
    assert p.returncode == 86, (p.returncode, p.stderr)
    st = util.sluice("status", data).stdout
    assert "totals batch=- rows=0 backlog=2:batches " in st, st
    doc = json.loads(util.sluice("status", "--json", data).stdout)
    q = {x["name"]: x for x in doc["queries"]}
    assert q["totals"]["backlog"] == {"batches": 2} and q["totals"]["source"] == "query"
    assert q["clean"]["backlog"] == {"files": 0, "bytes": 0}  # its batch 2 took the last
    prom = util.sluice("status", "--prometheus", data).stdout
    assert 'sluice_query_backlog{query="totals",unit="batches"} 2' in prom, prom
    assert 'sluice_query_backlog{query="clean",unit="files"} 0' in prom, prom
    run(data)
    st = util.sluice("status", data).stdout
    assert "totals batch=0 rows=" in st and "backlog=0:batches" in st, st
    doc = json.loads(util.sluice("status", "--json", data).stdout)
    assert {x["name"]: x["guarantee"] for x in doc["queries"]} == \
        {"totals": "exactly-once", "clean": "exactly-once"}


def test_downstream_of_a_source_that_reads_no_files(mounts, tmp_path):
    """A query source reading a rate-micro-batch query in a mount: each of
    the upstream's commits (made every pollInterval, inside one long run)
    wakes the downstream, which copies every value exactly once."""
    data = str(tmp_path / "data")
    write_config(data, {
        "tick": {"source": {"format": "rate-micro-batch", "rowsPerBatch": 5,
                            "pollInterval": "50ms"}},
        "copy": {"source": {"format": "query", "query": "tick"}},
    })
    m = mounts.new(data=data)

    def values():
        base = os.path.join(m.mnt, "out", "copy")
        return [r["value"] for r in rows_in(base)] if os.path.isdir(base) else []
    util.wait_for(lambda: len(values()) >= 40, 60, "40 values copied")
    m.unmount()
    m = mounts.new(data=data, start=False)
    m.start()
    got = sorted(values())
    assert got == list(range(len(got))), got[:50]
    up = sorted(r["value"] for r in rows_in(os.path.join(m.mnt, "out", "tick")))
    assert up[:len(got)] == got
    m.unmount()
