"""The console sink (CONNECTORS §8, SPARK-CONNECTORS §4): Spark's "Batch: N"
block and Dataset.show's table, byte for byte, on the standard output of
`sluice run` and of a foreground mount; numRows and truncate; at-least-once
(a batch whose commit did not happen prints again); option errors."""

import json
import os
import shutil

import pytest

import util

pytestmark = pytest.mark.timeout(120)

SCHEMA = "user STRING, n BIGINT, x DOUBLE, t TIMESTAMP"
ROWS = [
    {"user": "alice", "n": 1, "x": 1.5, "t": "2026-10-04T12:00:00Z"},
    {"user": "a much longer user name here", "n": 22, "x": 1e10,
     "t": "2026-10-04T12:03:00.250Z"},
    {"user": None, "n": None, "x": None, "t": "2026-10-04T12:13:00Z"},
    {"user": "日本語", "n": 3, "x": -0.0, "t": "2026-10-04T12:14:00Z"},
    {"user": "tab\there", "n": 4, "x": 0.001, "t": "2026-10-04T12:24:00Z"},
]

HEAD = ("-------------------------------------------\n"
        "Batch: %d\n"
        "-------------------------------------------\n")

# Spark's show(20, true) of ROWS: right-aligned, cut at 20 characters (17 +
# "..."), NULL, Java's Double.toString, timestamps as Spark casts them, the
# full-width characters counted twice, a tab escaped
PLAIN = (HEAD % 0 +
         "+--------------------+----+------+--------------------+\n"
         "|                user|   n|     x|                   t|\n"
         "+--------------------+----+------+--------------------+\n"
         "|               alice|   1|   1.5| 2026-10-04 12:00:00|\n"
         "|a much longer use...|  22|1.0E10|2026-10-04 12:03:...|\n"
         "|                NULL|NULL|  NULL| 2026-10-04 12:13:00|\n"
         "|              日本語|   3|  -0.0| 2026-10-04 12:14:00|\n"
         "|           tab\\there|   4| 0.001| 2026-10-04 12:24:00|\n"
         "+--------------------+----+------+--------------------+\n"
         "\n")

# show(2, false) of a complete-mode window count: left-aligned, whole cells
WINDOWS = (HEAD % 0 +
           "+------------------------------------------+----------------------------+---+---+\n"
           "|window                                    |user                        |cnt|s  |\n"
           "+------------------------------------------+----------------------------+---+---+\n"
           "|{2026-10-04 12:00:00, 2026-10-04 12:10:00}|a much longer user name here|1  |22 |\n"
           "|{2026-10-04 12:00:00, 2026-10-04 12:10:00}|alice                       |1  |1  |\n"
           "+------------------------------------------+----------------------------+---+---+\n"
           "only showing top 2 rows\n"
           "\n")


def write_config(data, queries):
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump({"queries": queries}, f, ensure_ascii=False)


def land_rows(tmp_path, data, rows, name="e.json"):
    p = tmp_path / name
    p.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n"
                         for r in rows))
    r = util.sluice("land", data, str(p), "--to", "ev")
    assert r.returncode == 0, r.stderr


def query(sink, **extra):
    q = {"source": {"format": "json", "path": "ev", "schema": SCHEMA}, "sink": sink}
    q.update(extra)
    return q


def test_run_prints_sparks_block_and_table(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"c": query({"format": "console"})})
    land_rows(tmp_path, data, ROWS)
    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == PLAIN + "c: 1 batches, 5 rows\n"


def test_num_rows_truncate_and_windows(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"w": query({"format": "console", "numRows": 2, "truncate": False},
                                   groupBy={"window": {"column": "t", "duration": "10 minutes"},
                                            "columns": ["user"]},
                                   aggregate={"cnt": "count(*)", "s": "sum(n)"},
                                   outputMode="complete")})
    land_rows(tmp_path, data, ROWS)
    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == WINDOWS + "w: 1 batches, 5 rows\n"


def test_one_row_shown_and_an_empty_batch(tmp_path):
    """numRows 1 says "row"; a batch whose rows were all dropped prints the
    header alone; numRows 0 shows no row."""
    data = str(tmp_path / "data")
    write_config(data, {
        "one": query({"format": "console", "numRows": 1}),
        "none": query({"format": "console", "numRows": 0}),
        "drop": {"source": {"format": "json", "path": "ev", "schema": "n BIGINT",
                            "mode": "DROPMALFORMED"}, "sink": {"format": "console"}}})
    land_rows(tmp_path, data, ['{"user":"u","n":"x"}', '{"user":"v","n":"y"}'])
    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert (HEAD % 0 + "+---+\n|  n|\n+---+\n+---+\n\n") in out  # drop: no row left
    assert ("|user|n   |" not in out)
    one = ("+----+----+----+----+\n|user|   n|   x|   t|\n+----+----+----+----+\n"
           "|   u|NULL|NULL|NULL|\n+----+----+----+----+\nonly showing top 1 row\n\n")
    assert one in out, out
    assert ("+----+---+---+---+\n|user|  n|  x|  t|\n+----+---+---+---+\n+----+---+---+---+\n"
            "only showing top 0 rows\n\n") in out, out


def test_a_batch_not_committed_prints_again(tmp_path):
    """At-least-once: killed after printing, before the commit, batch 0 is
    printed again by the next run, with the same rows; then it is done."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    data = str(tmp_path / "data")
    write_config(data, {"c": query({"format": "console"})})
    land_rows(tmp_path, data, ROWS)
    env = dict(os.environ, SLUICE_FAULT="engine.before_commit:1")
    p = util.sluice("run", "--available-now", data, timeout=60, env=env)
    assert p.returncode == 86, (p.returncode, p.stderr)
    assert p.stdout == PLAIN
    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.returncode == 0 and p.stdout == PLAIN + "c: 1 batches, 5 rows\n", p.stdout
    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.returncode == 0 and p.stdout == "c: 0 batches, 0 rows\n", p.stdout


def test_foreground_mount_prints_each_batch(mounts, tmp_path):
    """A mount in the foreground prints to its standard output; the progress
    report's sink says ConsoleTable with its rows; out/ gets no folder."""
    data = str(tmp_path / "data")
    write_config(data, {"c": query({"format": "console"})})
    m = mounts.new(data=data)
    os.mkdir(m.inp("ev"))
    src = tmp_path / "a.json"
    src.write_text(json.dumps(ROWS[0]) + "\n")
    shutil.copy(str(src), m.inp("ev", "a.json"))
    util.wait_for(lambda: "Batch: 0" in m.stderr(), 20, "batch 0 on the mount's stdout")
    src.write_text(json.dumps(ROWS[1]) + "\n")
    shutil.copy(str(src), m.inp("ev", "b.json"))
    util.wait_for(lambda: "Batch: 1" in m.stderr(), 20, "batch 1 on the mount's stdout")
    log = m.stderr()
    assert (HEAD % 1 + "+--------------------+---+------+--------------------+\n") in log
    with open(os.path.join(m.mnt, "status", "c.json")) as f:
        sink = json.load(f)["sink"]
    assert sink == {"description": "ConsoleTable", "numOutputRows": 1,
                    "guarantee": "at-least-once"}
    assert os.listdir(os.path.join(m.mnt, "out")) == []
    m.unmount()


@pytest.mark.parametrize("sink,msg", [
    ({"format": "console", "partitionBy": ["user"]},
     "queries.q.sink.partitionBy: not an option of the console sink"),
    ({"format": "console", "compression": "zstd"},
     "queries.q.sink.compression: not an option of the console sink"),
    ({"format": "json", "numRows": 5}, "queries.q.sink.numRows: only for the console format"),
    ({"format": "parquet", "truncate": False},
     "queries.q.sink.truncate: only for the console format"),
    ({"format": "console", "numRows": -1},
     "queries.q.sink.numRows: expected a non-negative integer, got -1"),
    ({"format": "console", "truncate": "maybe"}, "queries.q.sink.truncate"),
])
def test_option_errors_name_the_field(tmp_path, sink, msg):
    data = str(tmp_path / "data")
    write_config(data, {"q": query(sink)})
    p = util.sluice("run", "--available-now", data, timeout=30)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert msg in p.stderr, p.stderr
