"""The test sources `rate` and `rate-micro-batch` (CONNECTORS §3, SPARK-NOTES §5):
Spark's vectors through `sluice run` with a manual clock (a -Dfaults build
reads SLUICE_FAULT_SIZE=rate.clock_ms:N, as Spark's tests use a manual
clock), offsets and sources/0/0 as Spark writes them, partitions, restarts
and replays, option errors, a mount that makes batches by itself, and the
event-time operators over rate-micro-batch, which needs no wall clock."""

import json
import os
import time

import pytest

import util

pytestmark = pytest.mark.timeout(120)

T0 = 1_700_000_000_000  # a manual clock's creation time, ms


def needs_faults():
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true: no manual clock")


def write_config(data, queries):
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump({"queries": queries}, f)


def run(data, clock_ms=None, expect=0, env=None):
    env = dict(env or os.environ)
    if clock_ms is not None:
        env["SLUICE_FAULT_SIZE"] = "rate.clock_ms:%d" % clock_ms
    p = util.sluice("run", "--available-now", data, timeout=60, env=env)
    assert p.returncode == expect, (p.returncode, p.stdout, p.stderr)
    return p


def mount_at(mounts, data, clock_ms):
    """A mount whose rate queries see the manual clock at clock_ms: they
    find no new second, so what the runs wrote stays as it is."""
    env = dict(os.environ, SLUICE_FAULT_SIZE="rate.clock_ms:%d" % clock_ms)
    return mounts.new(data=data, env=env)


def progress(m, q, batch):
    """Batch `batch`'s progress report, from status/<q>.jsonl."""
    for line in read(m, "status", q + ".jsonl").splitlines():
        r = json.loads(line)
        if r["batchId"] == batch:
            return r
    raise AssertionError("no progress report of batch %d" % batch)


def rows_of(m, q, batch=None, below=None):
    """[(timestamp ms, value)] of out/<q>/'s parts (of one batch), in part order."""
    base = os.path.join(m.mnt, "out", q)
    out = []
    for n in sorted(util.list_out(base)):
        b = int(n.split("-")[1])
        if (batch is not None and b != batch) or (below is not None and b >= below):
            continue
        with open(os.path.join(base, n)) as f:
            for line in f.read().splitlines():
                r = json.loads(line)
                out.append((ms_of(r["timestamp"]), r["value"]))
    return out


def ms_of(iso):
    """Milliseconds since the epoch of '2023-11-14T22:13:20.250Z'."""
    import calendar
    day, rest = iso.rstrip("Z").split("T")
    hms, frac = rest.split(".")
    secs = calendar.timegm(time.strptime(day + " " + hms, "%Y-%m-%d %H:%M:%S"))
    return secs * 1000 + int(frac)


def read(m, *path):
    with open(os.path.join(m.mnt, *path)) as f:
        return f.read()


# -- rate ------------------------------------------------------------------------

def test_rate_ten_per_second_after_one_second(mounts, tmp_path):
    """Spark: 10/s with a manual clock, after 1 s: rows (0 ms, 0) ... (900 ms, 9);
    creationTimeMs in sources/0/0; the offset is whole seconds."""
    needs_faults()
    data = str(tmp_path / "data")
    write_config(data, {"r": {"source": {"format": "rate", "rowsPerSecond": 10}}})
    p = run(data, T0)  # creates the query at T0: nothing elapsed, no batch
    assert "r: 0 batches" in p.stdout, p.stdout
    run(data, T0 + 1000)
    m = mount_at(mounts, data, T0 + 1000)
    try:
        assert read(m, "checkpoint", "r", "sources", "0", "0") == "v1\n%d" % T0
        assert rows_of(m, "r") == [(T0 + v * 100, v) for v in range(10)]
        assert read(m, "checkpoint", "r", "offsets", "0").split("\n")[2] == "1"
        prog = json.loads(read(m, "status", "r.json"))
        src = prog["sources"][0]
        assert src["description"] == \
            "RateStreamV2[rowsPerSecond=10, rampUpTimeSeconds=0, numPartitions=default"
        assert (src["startOffset"], src["endOffset"], src["numInputRows"]) == (None, 1, 10)
    finally:
        m.unmount()


def test_rate_1500_per_second_rounds_like_spark(mounts, tmp_path):
    needs_faults()
    data = str(tmp_path / "data")
    write_config(data, {"r": {"source": {"format": "rate", "rowsPerSecond": 1500}}})
    run(data, T0)
    run(data, T0 + 1000)
    m = mount_at(mounts, data, T0 + 1000)
    try:
        got = rows_of(m, "r")
        assert [v for _, v in got] == list(range(1500))
        # Math.round(v * 1000 / 1500): half up
        assert [t - T0 for t, _ in got] == [(v * 2000 + 1500) // 3000 for v in range(1500)]
    finally:
        m.unmount()


@pytest.mark.parametrize("rate,ramp,ends", [(10, 4, [0, 2, 6, 12, 20, 30, 40]),
                                            (5, 2, [0, 1, 3, 8])])
def test_rate_ramp_up(mounts, tmp_path, rate, ramp, ends):
    """One run per second: batch k holds the values [v(k), v(k+1)) of Spark's
    ramp-up vectors; at 10/s with rampUp 4 s, second 2 is 6..11 at 2000, 2167,
    2333, 2500, 2667, 2833 ms."""
    needs_faults()
    data = str(tmp_path / "data")
    write_config(data, {"r": {"source": {"format": "rate", "rowsPerSecond": rate,
                                         "rampUpTime": "%ds" % ramp}}})
    run(data, T0)
    for k in range(1, len(ends)):
        run(data, T0 + k * 1000)
    m = mount_at(mounts, data, T0 + (len(ends) - 1) * 1000)
    try:
        for k in range(len(ends) - 1):
            vals = [v for _, v in rows_of(m, "r", batch=k)]
            assert vals == list(range(ends[k], ends[k + 1])), (k, vals)
        if rate == 10:
            assert [t - T0 for t, _ in rows_of(m, "r", batch=2)] == \
                [2000, 2167, 2333, 2500, 2667, 2833]
    finally:
        m.unmount()


def test_rate_partitions_and_catch_up(mounts, tmp_path):
    """numPartitions 3: partition p holds v(s)+p, v(s)+p+3, ...; a query down
    for a while catches up in one batch, its timestamps spread over the gap."""
    needs_faults()
    data = str(tmp_path / "data")
    write_config(data, {"r": {"source": {"format": "rate", "rowsPerSecond": 4,
                                         "numPartitions": 3}}})
    run(data, T0)
    run(data, T0 + 5500)  # 5 whole seconds: 20 rows
    m = mount_at(mounts, data, T0 + 5500)
    try:
        got = rows_of(m, "r")
        want_vals = [v for p in range(3) for v in range(p, 20, 3)]
        assert [v for _, v in got] == want_vals
        assert sorted(got) == [(T0 + v * 250, v) for v in range(20)]
        src = json.loads(read(m, "status", "r.json"))["sources"][0]
        assert src["description"].endswith("numPartitions=3")
    finally:
        m.unmount()


# -- rate-micro-batch ----------------------------------------------------------------

def test_micro_batch_basic_and_restart(mounts, tmp_path):
    """Spark's "basic" (10 rows, start 1000, advance 50): batch 0 is 0-9 at
    1000 ms, batch 1 10-19 at 1050, batch 2 20-29 at 1100; each availableNow
    run makes exactly one batch, and a restart continues from the checkpoint."""
    data = str(tmp_path / "data")
    write_config(data, {"mb": {"source": {"format": "rate-micro-batch", "rowsPerBatch": 10,
                                          "startTimestamp": 1000,
                                          "advanceMillisPerBatch": 50}}})
    for _ in range(3):
        p = run(data)
        assert "mb: 1 batches, 10 rows" in p.stdout, p.stdout
    m = mounts.new(data=data)
    try:
        for k in range(3):
            assert rows_of(m, "mb", batch=k) == [(1000 + 50 * k, v)
                                                 for v in range(10 * k, 10 * k + 10)]
        off = read(m, "checkpoint", "mb", "offsets", "2").split("\n")[2]
        assert json.loads(off) == {"offset": 30, "timestamp": 1150}
        assert off == '{"offset":30,"timestamp":1150}'
        assert not os.path.exists(os.path.join(m.mnt, "checkpoint", "mb", "sources", "0", "0"))
        # the mount goes on making batches (no trigger): look at batch 2's report
        src = progress(m, "mb", 2)["sources"][0]
        assert src["description"] == ("RatePerMicroBatchStream[rowsPerBatch=10, "
                                      "numPartitions=1, startTimestamp=1000, "
                                      "advanceMsPerBatch=50]")
        assert src["startOffset"] == {"offset": 20, "timestamp": 1100}
        assert src["endOffset"] == {"offset": 30, "timestamp": 1150}
    finally:
        m.unmount()


def test_micro_batch_replays_a_crashed_batch(mounts, tmp_path):
    """Killed after offsets/N was logged: the next run reads the same range, once."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    data = str(tmp_path / "data")
    write_config(data, {"mb": {"source": {"format": "rate-micro-batch", "rowsPerBatch": 7,
                                          "numPartitions": 2}}})
    run(data)
    env = dict(os.environ, SLUICE_FAULT="engine.before_commit:1")
    p = util.sluice("run", "--available-now", data, timeout=60, env=env)
    assert p.returncode == 86, (p.returncode, p.stderr)
    run(data)
    run(data)
    m = mounts.new(data=data)
    try:
        vals = [v for _, v in rows_of(m, "mb", below=4)]  # the mount makes more
        assert sorted(vals) == list(range(28)), vals
        # partition 0 then 1 within a batch
        assert [v for _, v in rows_of(m, "mb", batch=1)] == [7, 9, 11, 13, 8, 10, 12]
        assert [t for t, _ in rows_of(m, "mb", batch=3)] == [3000] * 7
    finally:
        m.unmount()


def test_micro_batch_feeds_event_time_operators(mounts, tmp_path):
    """No wall clock: rows at 1-minute steps, a 5-minute window count in append
    mode with a zero-delay watermark. A window is written once the watermark
    passes its end, with all 5 x 10 rows."""
    data = str(tmp_path / "data")
    write_config(data, {"w": {
        "source": {"format": "rate-micro-batch", "rowsPerBatch": 10,
                   "startTimestamp": 0, "advanceMillisPerBatch": 60000},
        "watermark": {"column": "timestamp", "delay": "0 seconds"},
        "groupBy": {"window": {"column": "timestamp", "duration": "5 minutes"}},
        "aggregate": {"n": "count(*)", "top": "max(value)"},
        "outputMode": "append"}})
    for _ in range(12):
        run(data)
    m = mounts.new(data=data)
    try:
        got = []
        base = os.path.join(m.mnt, "out", "w")
        for n in sorted(util.list_out(base)):
            with open(os.path.join(base, n)) as f:
                got += [json.loads(l) for l in f.read().splitlines()]
        # batches at minutes 0..11 close windows [0,5) and [5,10); the mount's
        # own batches (no trigger) may close more, later ones
        assert [(r["window"]["start"], r["n"], r["top"]) for r in got][:2] == [
            ("1970-01-01T00:00:00.000Z", 50, 49), ("1970-01-01T00:05:00.000Z", 50, 99)]
    finally:
        m.unmount()


def test_a_mount_makes_batches_by_itself(mounts, tmp_path):
    """No trigger, no landing: a rate query asks again every pollInterval, and
    its rows go on across a remount with none lost or repeated."""
    data = str(tmp_path / "data")
    write_config(data, {
        "mb": {"source": {"format": "rate-micro-batch", "rowsPerBatch": 5,
                          "pollInterval": "50 milliseconds"}},
        "r": {"source": {"format": "rate", "rowsPerSecond": 20}}})
    m = mounts.new(data=data)
    util.wait_for(lambda: len(util.list_out(os.path.join(m.mnt, "out", "mb"))) >= 4
                  if os.path.isdir(os.path.join(m.mnt, "out", "mb")) else False,
                  20, "rate-micro-batch batches")
    util.wait_for(lambda: os.path.isdir(os.path.join(m.mnt, "out", "r")) and
                  len(util.list_out(os.path.join(m.mnt, "out", "r"))) >= 2,
                  20, "rate batches")
    m.unmount()
    m = mounts.remount(m)
    n_before = len(rows_of(m, "r"))
    util.wait_for(lambda: len(rows_of(m, "r")) > n_before, 20, "rate after a remount")
    m.unmount()
    m = mounts.remount(m)  # parts commit whole and in order: a listing is a prefix
    try:
        for q in ("mb", "r"):
            vals = sorted(v for _, v in rows_of(m, q))
            assert vals == list(range(len(vals))), q
        creation = int(read(m, "checkpoint", "r", "sources", "0", "0").split("\n")[1])
        for t, v in rows_of(m, "r"):
            assert creation + v * 50 - 1 <= t <= creation + v * 50 + 1
    finally:
        m.unmount()


# -- options -----------------------------------------------------------------------

@pytest.mark.parametrize("source,msg", [
    ({"format": "rate", "schema": "value BIGINT"},
     "queries.q.source.schema: the rate format has the fixed schema "
     "'timestamp TIMESTAMP, value BIGINT'"),
    ({"format": "rate", "path": "x"}, "queries.q.source.path: the rate format reads no files"),
    ({"format": "rate", "rowsPerSecond": 0}, "queries.q.source.rowsPerSecond: expected a positive"),
    ({"format": "rate", "numPartitions": -2}, "queries.q.source.numPartitions: expected a positive"),
    ({"format": "rate", "rowsPerBatch": 3}, "queries.q.source.rowsPerBatch: unknown option"),
    ({"format": "rate", "rampUpTime": "-1s"}, "queries.q.source.rampUpTime"),
    ({"format": "rate", "rowsPerSecond": 4611686018427387904, "rampUpTime": "3s"},
     "queries.q.source.rampUpTime: max offset with 4611686018427387904 rowsPerSecond is 1"),
    ({"format": "rate-micro-batch"}, "queries.q.source.rowsPerBatch"),
    ({"format": "rate-micro-batch", "rowsPerBatch": 1, "advanceMillisPerBatch": -1},
     "queries.q.source.advanceMillisPerBatch: expected a non-negative integer, got -1"),
    ({"format": "rate-micro-batch", "rowsPerBatch": 1, "startTimestamp": "x"},
     "queries.q.source.startTimestamp"),
    ({"format": "rate-micro-batch", "rowsPerBatch": 1, "rowsPerSecond": 1},
     "queries.q.source.rowsPerSecond: unknown option"),
    ({"format": "rate", "pollInterval": "0 seconds"},
     "queries.q.source.pollInterval: expected at least 1ms"),
])
def test_option_errors_name_the_field(tmp_path, source, msg):
    data = str(tmp_path / "data")
    write_config(data, {"q": {"source": source}})
    p = util.sluice("run", "--available-now", data, timeout=30)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert msg in p.stderr, p.stderr
