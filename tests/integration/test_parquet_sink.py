"""The parquet sink (CONNECTORS.md §9; issue 15): every query shape writes
Parquet parts that DuckDB reads through the mount, row for row equal to the
same query's JSON Lines output; types, codecs, encodings and statistics as
DuckDB's parquet_schema()/parquet_metadata() show them; a batch of no rows
writes no part, an empty complete-mode snapshot one part of no rows; a
crash mid-part leaves nothing visible and the batch commits once.

DuckDB comes from npm (@duckdb/node-api, util.npm_modules()); without node
or npm these tests skip, saying so."""

import json
import os
import random
import re
import time

import pytest

import util

pytestmark = pytest.mark.timeout(300)

SCHEMA = "event_id STRING, user STRING, amount BIGINT, event_time TIMESTAMP"
T0 = 1791115200  # 2026-10-04T12:00:00Z
PART = re.compile(r"^part-(\d+)-(\d+)\.(jsonl|parquet)$")


# -- helpers -------------------------------------------------------------------

def need_duckdb():
    if util.npm_modules() is None:
        pytest.skip(util.npm_missing())


def write_config(data, queries):
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump({"queries": queries}, f)


def land(data, *files, to="ev"):
    p = util.sluice("land", data, *files, "--to", to)
    assert p.returncode == 0, p.stderr


def run(data, expect=0, env=None):
    p = util.sluice("run", "--available-now", data, timeout=120, env=env)
    assert p.returncode == expect, (p.returncode, p.stdout, p.stderr)
    return p


def both(shape, sink=None):
    """The same query twice: JSON Lines (q_json) and Parquet (q_pq)."""
    src = {"format": "json", "path": "ev", "schema": SCHEMA}
    src.update(shape.pop("source", {}))
    shape["source"] = src
    pq_sink = {"format": "parquet"}
    pq_sink.update(sink or {})
    js_sink = {"format": "json"}
    if "partitionBy" in pq_sink:
        js_sink["partitionBy"] = pq_sink["partitionBy"]
    return dict(shape, sink=js_sink), dict(shape, sink=pq_sink)


def list_parts(base):
    """{relative part path: (batch, part)} under base, folders included;
    Spark's _spark_metadata log is not a part."""
    out = {}
    for dirpath, dirs, names in os.walk(base):
        if "_spark_metadata" in dirs:
            dirs.remove("_spark_metadata")
        for n in names:
            m = PART.match(n)
            assert m, "unexpected file %s in %s" % (n, dirpath)
            rel = os.path.relpath(os.path.join(dirpath, n), base)
            out[rel] = (int(m.group(1)), int(m.group(2)))
    return out


def parts_in(folder):
    """The names in an out/ folder but Spark's _spark_metadata log."""
    return sorted(n for n in os.listdir(folder) if n != "_spark_metadata")


def us_of(text):
    """Microseconds since the epoch of DuckDB's '2026-10-04 12:00:00[.ffffff]+00'
    or the JSON sink's '2026-10-04T12:00:00.000Z'."""
    m = re.match(r"^(-?\d{4,})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:Z|\+00)$", text)
    assert m, text
    y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
    frac = (m.group(7) or "").ljust(6, "0")[:6]
    import calendar
    sec = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))
    return sec * 1_000_000 + int(frac)


def norm(v, typ):
    """A value of either reader in one canonical form, by DuckDB's column type."""
    if v is None:
        return None
    t = typ.upper()
    if t.startswith("STRUCT"):
        return {k: norm(v[k], "TIMESTAMP WITH TIME ZONE") for k in ("start", "end")}
    if t.startswith("TIMESTAMP"):
        return us_of(v) // 1000  # JSON keeps milliseconds, truncated toward the past
    if t in ("BIGINT", "INTEGER"):
        return int(v)
    if t == "DOUBLE":
        return v if isinstance(v, str) else float(v)
    return v


def duck_types(path):
    (desc,) = util.duckdb_json(["DESCRIBE SELECT * FROM read_parquet('%s', "
                                "hive_partitioning = false)" % path])
    return {r["column_name"]: r["column_type"] for r in desc}


def compare_query(m, qjson, qpq):
    """Every part of out/qjson has its twin in out/qpq (same batch, part and
    folder), holding the same rows in the same order. Returns the number of
    rows compared."""
    bj = os.path.join(m.mnt, "out", qjson)
    bp = os.path.join(m.mnt, "out", qpq)
    pj, pp = list_parts(bj), list_parts(bp)
    assert sorted(k.rsplit(".", 1)[0] for k in pj) == sorted(k.rsplit(".", 1)[0] for k in pp)
    files = sorted(pp)
    if not files:
        return 0
    sql = ["SELECT * FROM read_parquet('%s', hive_partitioning = false)" % os.path.join(bp, f)
           for f in files]
    results = util.duckdb_json(sql)
    types = duck_types(os.path.join(bp, files[0]))
    n = 0
    for f, rows in zip(files, results):
        with open(os.path.join(bj, f.rsplit(".", 1)[0] + ".jsonl"), "rb") as fh:
            want = [json.loads(l) for l in fh.read().decode().splitlines() if l]
        assert len(rows) == len(want), (f, len(rows), len(want))
        for k, (got, exp) in enumerate(zip(rows, want)):
            assert set(exp) <= set(got), (f, k, exp, got)
            g = {c: norm(got[c], types[c]) for c in got}
            e = {c: norm(exp.get(c), types[c]) for c in got}
            assert g == e, "%s row %d: parquet %r, json %r" % (f, k, g, e)
            n += 1
    return n


# -- the event-time corpus, through every query shape ------------------------------

def corpus(tmp_path, seed, nfiles=8):
    """Events with resends, late and null times, null amounts, unicode users."""
    r = random.Random(seed)
    users = ["ana", "bo", "čeněk", "dé", "", "zoë 🐟"]
    files, sent = [], []
    t = T0
    for k in range(nfiles):
        path = str(tmp_path / ("ev%02d.json" % k))
        with open(path, "w") as f:
            for _ in range(r.randint(30, 120)):
                if sent and r.random() < 0.1:
                    f.write(r.choice(sent))  # a resend, byte for byte
                    continue
                t += r.randint(0, 40)
                ev = {"event_id": "e%06d" % len(sent), "user": r.choice(users)}
                if r.random() > 0.1:
                    ev["amount"] = r.randint(-10**6, 10**6)
                et = t - (r.randint(600, 3000) if r.random() < 0.08 else 0)
                if r.random() > 0.05:
                    ev["event_time"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(et)) + \
                        (".%03dZ" % r.randint(0, 999))
                line = json.dumps(ev, ensure_ascii=False) + "\n"
                sent.append(line)
                f.write(line)
        files.append(path)
    return files


WM = {"column": "event_time", "delay": "5 minutes"}
AGGS = {"n": "count(*)", "total": "sum(amount)", "lo": "min(amount)", "hi": "max(amount)",
        "mean": "avg(amount)"}
SHAPES = {
    "plain": ({}, None),
    "dedup": ({"watermark": WM, "dropDuplicates": ["event_id", "event_time"]}, None),
    "win_append": ({"watermark": WM,
                    "groupBy": {"window": {"column": "event_time", "duration": "10 minutes"},
                                "columns": ["user"]},
                    "aggregate": AGGS, "outputMode": "append"}, None),
    "win_update": ({"watermark": WM,
                    "groupBy": {"window": {"column": "event_time", "duration": "10 minutes"},
                                "columns": ["user"]},
                    "aggregate": AGGS, "outputMode": "update"}, {"compression": "none"}),
    "sliding": ({"watermark": WM,
                 "groupBy": {"window": {"column": "event_time", "duration": "10 minutes",
                                        "slide": "5 minutes"}},
                 "aggregate": {"n": "count(*)"}, "outputMode": "append"}, None),
    "complete": ({"groupBy": {"columns": ["user"]}, "aggregate": AGGS,
                  "outputMode": "complete"}, None),
    "partitioned": ({}, {"partitionBy": ["user"]}),
}


def test_parquet_equals_json_for_every_query_shape(mounts, tmp_path):
    need_duckdb()
    queries = {}
    for name, (shape, sink) in SHAPES.items():
        qj, qp = both(json.loads(json.dumps(shape)), sink)
        queries[name + "_json"] = qj
        queries[name + "_pq"] = qp
    data = str(tmp_path / "data")
    write_config(data, queries)
    files = corpus(tmp_path, 2026)
    for k in range(0, len(files), 2):  # several batches, some writing nothing
        land(data, *files[k:k + 2])
        run(data)
    m = mounts.new(data=data)
    counts = {name: compare_query(m, name + "_json", name + "_pq") for name in SHAPES}
    # every shape produced rows (a test comparing nothing proves nothing)
    assert all(counts.values()), counts
    # the partition column is in the folder names, not in the parquet parts
    pdir = os.path.join(m.mnt, "out", "partitioned_pq")
    assert any(d.startswith("user=") for d in os.listdir(pdir))
    one = next(os.path.join(dp, n) for dp, _, ns in os.walk(pdir) for n in ns)
    assert "user" not in duck_types(one)
    # read as a table, DuckDB takes the column back from the folder names
    (by_user,) = util.duckdb_json([
        "SELECT user, count(*) AS n FROM read_parquet('%s/**/*.parquet', hive_partitioning = "
        "true) GROUP BY user ORDER BY user" % pdir])
    assert sum(int(r["n"]) for r in by_user) == counts["partitioned"]
    assert {r["user"] for r in by_user} >= {"ana", "bo", "čeněk"}


# -- every type, through the mount ------------------------------------------------------

ALL = "s STRING, n BIGINT, i INT, x DOUBLE, ok BOOLEAN, ts TIMESTAMP, d DATE"
ALL_ROWS = [
    {"s": "plain", "n": 1, "i": 1, "x": 1.5, "ok": True, "ts": "2026-10-04T12:00:00.123Z",
     "d": "2026-10-04"},
    {"s": "", "n": -9223372036854775808, "i": -2147483648, "x": -0.0, "ok": False,
     "ts": "0001-01-01T00:00:00.000Z", "d": "0001-01-01"},
    {"s": "ünïcødé ✓ 𝄞", "n": 9223372036854775807, "i": 2147483647, "x": 1.7976931348623157e308,
     "ok": True, "ts": "9999-12-31T23:59:59.999Z", "d": "9999-12-31"},
    {"s": None, "n": None, "i": None, "x": None, "ok": None, "ts": None, "d": None},
    {"s": "tab\there \"quoted\" \\ back", "n": 0, "i": 0, "x": 5e-324, "ok": None,
     "ts": "1970-01-01T00:00:00.000Z", "d": "1970-01-01"},
    {"s": "z" * 300, "n": 42, "x": -1e-300, "ts": "1969-12-31T23:59:59.999Z",
     "d": "1969-12-31"},
]


def write_rows(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps({k: v for k, v in r.items() if v is not None},
                               ensure_ascii=False) + "\n")
    return path


@pytest.mark.parametrize("codec", ["zstd", "none"])
def test_every_type_read_by_duckdb(mounts, tmp_path, codec):
    need_duckdb()
    data = str(tmp_path / "data")
    sink = {"format": "parquet"}
    if codec == "none":
        sink["compression"] = "none"
    write_config(data, {
        "q": {"source": {"format": "json", "path": "ev", "schema": ALL}, "sink": sink},
        "j": {"source": {"format": "json", "path": "ev", "schema": ALL}}})
    land(data, write_rows(str(tmp_path / "all.json"), ALL_ROWS))
    run(data)
    m = mounts.new(data=data)
    part = os.path.join(m.mnt, "out", "q", "part-00000-00000.parquet")
    assert os.path.exists(part), os.listdir(os.path.join(m.mnt, "out", "q"))
    assert compare_query(m, "j", "q") == len(ALL_ROWS)
    schema, meta, stats = util.duckdb_json([
        "SELECT name, type, logical_type, converted_type FROM parquet_schema('%s')" % part,
        "SELECT path_in_schema, compression, encodings FROM parquet_metadata('%s')" % part,
        "SELECT path_in_schema, stats_min_value, stats_max_value, stats_null_count "
        "FROM parquet_metadata('%s')" % part])
    types = {r["name"]: (r["type"], r["logical_type"] or "", r["converted_type"] or "")
             for r in schema}
    assert types["s"][0] == "BYTE_ARRAY" and "String" in types["s"][1]
    assert types["n"][0] == "INT64" and types["i"][0] == "INT32"
    assert types["x"][0] == "DOUBLE" and types["ok"][0] == "BOOLEAN"
    assert types["ts"][0] == "INT64" and "MICROS" in types["ts"][1] \
        and "isAdjustedToUTC=1" in types["ts"][1]
    assert types["d"][0] == "INT32" and types["d"][2] == "DATE"
    want_codec = "ZSTD" if codec == "zstd" else "UNCOMPRESSED"
    assert {r["compression"] for r in meta} == {want_codec}
    enc = {r["path_in_schema"]: r["encodings"] for r in meta}
    assert "DICTIONARY" in enc["s"], enc
    st = {r["path_in_schema"]: r for r in stats}
    assert st["n"]["stats_min_value"] == "-9223372036854775808"
    assert st["n"]["stats_max_value"] == "9223372036854775807"
    assert st["i"]["stats_min_value"] == "-2147483648"
    assert st["s"]["stats_null_count"] == "1" and st["ok"]["stats_null_count"] == "3"
    assert st["s"]["stats_min_value"] == ""


def test_row_groups_and_a_big_part_in_a_blob(mounts, tmp_path):
    """20,000 rows with rowGroupSize 64k: several row groups in one part,
    which is a blob (over the inline limit); DuckDB counts every row once."""
    need_duckdb()
    data = str(tmp_path / "data")
    write_config(data, {"q": {
        "source": {"format": "json", "path": "ev", "schema": SCHEMA},
        "sink": {"format": "parquet", "rowGroupSize": "64k", "compression": "none"}}})
    path = str(tmp_path / "big.json")
    with open(path, "w") as f:
        for k in range(20000):
            f.write(json.dumps({"event_id": "e%05d" % k, "user": "u%d" % (k % 97),
                                "amount": k, "event_time": "2026-10-04T12:00:00Z"}) + "\n")
    land(data, path)
    run(data)
    p = util.sluice("check", data)
    assert p.returncode == 0, p.stdout + p.stderr
    m = mounts.new(data=data)
    part = os.path.join(m.mnt, "out", "q", "part-00000-00000.parquet")
    assert os.path.getsize(part) > 64 * 1024
    agg, groups = util.duckdb_json([
        "SELECT count(*) AS n, count(DISTINCT event_id) AS d, sum(amount) AS s "
        "FROM read_parquet('%s')" % part,
        "SELECT row_group_id, any_value(row_group_num_rows) AS r FROM parquet_metadata('%s') "
        "GROUP BY row_group_id ORDER BY row_group_id" % part])
    assert agg == [{"n": "20000", "d": "20000", "s": str(sum(range(20000)))}]
    assert len(groups) > 1, groups
    assert sum(int(g["r"]) for g in groups) == 20000


# -- empty batches and snapshots --------------------------------------------------------

def test_no_rows_no_part_and_an_empty_snapshot_has_one(mounts, tmp_path):
    """A batch of malformed lines only (DROPMALFORMED): the append query
    writes no part; the complete-mode query's snapshot of no groups is one
    zero-row part whose schema DuckDB reads. A later batch replaces it."""
    need_duckdb()
    data = str(tmp_path / "data")
    src = {"format": "json", "path": "ev", "schema": SCHEMA, "mode": "DROPMALFORMED"}
    write_config(data, {
        "app": {"source": src, "sink": {"format": "parquet"}},
        "comp": {"source": src, "groupBy": {"columns": ["user"]},
                 "aggregate": {"n": "count(*)"}, "outputMode": "complete",
                 "sink": {"format": "parquet"}},
        "compj": {"source": src, "groupBy": {"columns": ["user"]},
                  "aggregate": {"n": "count(*)"}, "outputMode": "complete"}})
    bad = str(tmp_path / "bad.json")
    with open(bad, "w") as f:
        f.write("not json\n{\"amount\": \"x\"\n")
    land(data, bad)
    run(data)
    m = mounts.new(data=data)
    # the append query's batch wrote no part: Spark's log says so with "v1"
    assert os.listdir(os.path.join(m.mnt, "out", "app")) == ["_spark_metadata"]
    with open(os.path.join(m.mnt, "out", "app", "_spark_metadata", "0")) as f:
        assert f.read() == "v1"
    assert os.listdir(os.path.join(m.mnt, "out", "compj")) == []
    parts = os.listdir(os.path.join(m.mnt, "out", "comp"))
    assert parts == ["part-00000-00000.parquet"], parts
    part = os.path.join(m.mnt, "out", "comp", parts[0])
    rows, desc = util.duckdb_json(["SELECT * FROM read_parquet('%s')" % part,
                                   "DESCRIBE SELECT * FROM read_parquet('%s')" % part])
    assert rows == []
    assert [(r["column_name"], r["column_type"]) for r in desc] == \
        [("user", "VARCHAR"), ("n", "BIGINT")]
    m.unmount()
    good = write_rows(str(tmp_path / "good.json"),
                      [{"event_id": "a", "user": "u", "amount": 1}])
    land(data, good)
    run(data)
    m2 = mounts.new(data=data)
    assert os.listdir(os.path.join(m2.mnt, "out", "comp")) == ["part-00001-00000.parquet"]
    assert compare_query(m2, "compj", "comp") == 1


# -- crashes -------------------------------------------------------------------------------

@pytest.mark.parametrize("fault", [
    {"SLUICE_FAULT": "engine.before_part_fsync:1"},
    {"SLUICE_FAULT_ERR": "blob.write:1:ENOSPC"},
    {"SLUICE_FAULT_ERR": "blob.fsync:1:EIO"},
    {"SLUICE_FAULT": "catalog.before_commit:1"},
])
def test_crash_mid_part_leaves_nothing_and_commits_once(mounts, tmp_path, fault):
    """A big part (a blob) killed or failed while it is written: `sluice
    check` is clean, out/ shows no part of the batch, and the next run
    commits the batch once: DuckDB reads every row exactly once."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    need_duckdb()
    data = str(tmp_path / "data")
    write_config(data, {"q": {"source": {"format": "json", "path": "ev", "schema": SCHEMA},
                              "sink": {"format": "parquet", "compression": "none"}}})
    path = str(tmp_path / "big.json")
    with open(path, "w") as f:
        for k in range(8000):
            f.write(json.dumps({"event_id": "e%05d" % k, "user": "u%d" % k, "amount": k}) + "\n")
    land(data, path)
    p = util.sluice("run", "--available-now", data, timeout=120, env=dict(os.environ, **fault))
    assert p.returncode in (1, 86), (p.returncode, p.stderr)
    p = util.sluice("check", data)  # no blob that nothing names, no record without its blob
    assert p.returncode == 0, p.stdout + p.stderr
    # no batch committed, so out/ (rendered from commits) shows no part of it
    p = util.sluice("status", data)
    assert re.search(r"^q batch=- ", p.stdout, re.M), p.stdout
    run(data)
    m2 = mounts.new(data=data)
    parts = parts_in(os.path.join(m2.mnt, "out", "q"))
    assert len(parts) == 1, parts
    (agg,) = util.duckdb_json(["SELECT count(*) AS n, count(DISTINCT event_id) AS d "
                               "FROM read_parquet('%s/out/q/*.parquet')" % m2.mnt])
    assert agg == [{"n": "8000", "d": "8000"}]


# -- config --------------------------------------------------------------------------------

@pytest.mark.parametrize("sink,msg", [
    ({"format": "json", "rowGroupSize": "1m"},
     "queries.q.sink.rowGroupSize: only for the parquet format"),
    ({"format": "parquet", "rowGroupSize": "1k"},
     "queries.q.sink.rowGroupSize: expected at least 4k"),
    ({"format": "parquet", "rowGroupSize": "lots"}, "queries.q.sink.rowGroupSize"),
    ({"format": "parquet", "compression": "snappy"}, "queries.q.sink.compression"),
    ({"format": "parquet", "partitionBy": ["nope"]}, "queries.q.sink.partitionBy"),
])
def test_parquet_options_are_checked_at_load(tmp_path, sink, msg):
    data = str(tmp_path / "data")
    write_config(data, {"q": {"source": {"format": "json", "path": "ev", "schema": SCHEMA},
                              "sink": sink}})
    p = util.sluice("run", "--available-now", data)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert msg in p.stderr, p.stderr


def test_parquet_is_the_default_codec_zstd_and_names_have_no_zst(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"q": {"source": {"format": "json", "path": "ev", "schema": SCHEMA},
                              "sink": {"format": "parquet"}}})
    land(data, write_rows(str(tmp_path / "a.json"), [{"event_id": "a", "user": "u"}]))
    run(data)
    m = mounts.new(data=data)
    parts = parts_in(os.path.join(m.mnt, "out", "q"))
    assert parts == ["part-00000-00000.parquet"]
    with open(os.path.join(m.mnt, "out", "q", parts[0]), "rb") as f:
        b = f.read()
    assert b[:4] == b"PAR1" and b[-4:] == b"PAR1"
