"""Prometheus metrics (issue 16 item 2): status/metrics in a mount and
`sluice status --prometheus DATA_DIR` without one.

- both pass Prometheus's own linter (`promtool check metrics`, Debian's
  `prometheus`) and parse with `python3-prometheus-client`'s parser;
- their values agree with status/landing.json (files, bytes, in flight,
  refused by errno) and with the progress reports of status/<q>.jsonl
  (batches, input, output, malformed and late rows, state rows and bytes,
  the batch duration histogram against each report's triggerExecution, the
  watermark), and `sluice status` (backlog);
- a FAILFAST query stopped by a malformed row shows class "malformed";
- counters kept in the catalog go on across processes; the landing commit
  histogram is the last mount's, read from its shared page.

Durations are compared only with what the reports say, never with a bound."""

import calendar
import json
import os
import shutil
import subprocess
import time

import pytest

import util

pytestmark = pytest.mark.timeout(90)

SCHEMA = "event_id STRING, user STRING, amount BIGINT, event_time TIMESTAMP"
T0 = 1791115200  # 2026-10-04T12:00:00Z
MIN = 60

STATEFUL = dict(watermark={"column": "event_time", "delay": "10 minutes"},
                dropDuplicates=["event_id", "event_time"],
                groupBy={"window": {"column": "event_time", "duration": "10 minutes"},
                         "columns": ["user"]},
                aggregate={"n": "count(*)", "total": "sum(amount)"},
                outputMode="append")

# the families every output has, whatever the queries did
FAMILIES = {
    "sluice_landing_files": "counter",
    "sluice_landing_bytes": "counter",
    "sluice_landing_files_in_flight": "gauge",
    "sluice_landing_temp_abandoned": "counter",
    "sluice_landing_refused": "counter",
    "sluice_landing_commit_seconds": "histogram",
    "sluice_query_batches": "counter",
    "sluice_query_input_rows": "counter",
    "sluice_query_output_rows": "counter",
    "sluice_query_malformed_rows": "counter",
    "sluice_query_late_rows": "counter",
    "sluice_query_backlog": "gauge",
    "sluice_query_skipped_files": "counter",
    "sluice_query_backlog_files": "gauge",
    "sluice_query_backlog_bytes": "gauge",
    "sluice_query_backlog_oldest_age_seconds": "gauge",
    "sluice_query_watermark_timestamp_seconds": "gauge",
    "sluice_query_watermark_lag_seconds": "gauge",
    "sluice_query_state_rows": "gauge",
    "sluice_query_state_bytes": "gauge",
    "sluice_query_parts_expired": "counter",
    "sluice_query_batch_duration_seconds": "histogram",
    "sluice_query_error": "gauge",
}
# the config's last load (test_reload.py): shown once a mount has recorded one
CONFIG_FAMILIES = {
    "sluice_config_last_reload_successful": "gauge",
    "sluice_config_last_reload_success_timestamp_seconds": "gauge",
}
CLASSES = ("none", "malformed", "config", "no_space", "io", "other")
# values that move with the wall clock
TIMELY = ("sluice_query_watermark_lag_seconds", "sluice_query_backlog_oldest_age_seconds")


# -- helpers ------------------------------------------------------------------

def write_config(data, queries):
    """queries: {name: (in/ path, source options, other query keys)}."""
    os.makedirs(data, exist_ok=True)
    doc = {"queries": {}}
    for name, (path, src_opts, extra) in queries.items():
        src = {"format": "json", "path": path, "schema": SCHEMA}
        src.update(src_opts)
        q = {"source": src}
        q.update(extra)
        doc["queries"][name] = q
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump(doc, f)


def event_lines(evs):
    """evs: (event_id, user, amount, epoch seconds) -> JSON Lines bytes."""
    return "".join(json.dumps({"event_id": e, "user": u, "amount": a,
                               "event_time": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                           time.gmtime(t))}) + "\n"
                   for e, u, a, t in evs).encode()


def cp(tmp_path, data, dst):
    """Lands data at dst with cp(1), as an uploader would."""
    src = tmp_path / ("src-%d" % time.monotonic_ns())
    src.write_bytes(data)
    p = util.run(["cp", str(src), dst])
    assert p.returncode == 0, p.stderr


def read(*parts):
    with open(os.path.join(*parts), "rb") as f:
        return f.read().decode()


def reports(m, query):
    """Every progress report of query (fewer than 100 here: all of them)."""
    return [json.loads(l) for l in read(m.mnt, "status", query + ".jsonl").splitlines()]


def status_prometheus(data):
    p = util.sluice("status", "--prometheus", data)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    assert p.stderr == ""
    return p.stdout


def promtool_check(text):
    """Prometheus's linter: silent and exit 0 for a clean exposition."""
    exe = shutil.which("promtool")
    if not exe:
        pytest.skip("promtool missing: apt-get install prometheus")
    p = subprocess.run([exe, "check", "metrics"], input=text, capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0 and p.stdout == "" and p.stderr == "", (
        p.returncode, p.stdout, p.stderr, text)


def parse(text):
    """{(sample name, ((label, value), ...)): value} through prometheus_client's
    parser, after checking the families' names and types."""
    parser = pytest.importorskip("prometheus_client.parser",
                                 reason="apt-get install python3-prometheus-client")
    samples, types = {}, {}
    for fam in parser.text_string_to_metric_families(text):
        assert fam.name not in types, "family %s twice" % fam.name
        types[fam.name] = fam.type
        assert fam.documentation, "no HELP for %s" % fam.name
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in samples, "sample %r twice" % (key,)
            samples[key] = s.value
    config = {k: v for k, v in types.items() if k in CONFIG_FAMILIES}
    assert config in ({}, CONFIG_FAMILIES), config
    assert {k: v for k, v in types.items() if k not in CONFIG_FAMILIES} == FAMILIES
    return samples


def val(samples, name, **labels):
    return samples[(name, tuple(sorted(labels.items())))]


def check_text(text):
    promtool_check(text)
    return parse(text)


def iso_seconds(ts):
    """'2026-10-04T12:00:00.000Z' -> Unix seconds."""
    base, frac = ts.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + int(frac) / 1000


def status_backlog(data, query):
    """(files, bytes) of `sluice status`'s line for query."""
    p = util.sluice("status", data)
    assert p.returncode == 0, p.stderr
    for line in p.stdout.splitlines():
        if line.startswith(query + " "):
            b = dict(kv.split("=", 1) for kv in line.split()[1:4])["backlog"]
            return tuple(int(x) for x in b.split("/"))
    raise AssertionError("no line for %s in %r" % (query, p.stdout))


def histogram(samples, name, **labels):
    """{le: cumulative count}, _sum, _count of one histogram."""
    buckets = {}
    for (n, lab), v in samples.items():
        d = dict(lab)
        if n == name + "_bucket" and all(d.get(k) == w for k, w in labels.items()):
            buckets[float(d["le"])] = v
    return buckets, val(samples, name + "_sum", **labels), val(samples, name + "_count", **labels)


def check_query(samples, reps, query, data):
    """The query's samples against its progress reports and `sluice status`."""
    last = reps[-1]
    assert val(samples, "sluice_query_batches_total", query=query) == last["batchId"] + 1
    assert len(reps) == last["batchId"] + 1  # every report is there: sums cover all batches
    assert val(samples, "sluice_query_input_rows_total", query=query) == sum(
        r["numInputRows"] for r in reps)
    assert val(samples, "sluice_query_output_rows_total", query=query) == sum(
        r["sink"]["numOutputRows"] for r in reps)
    assert val(samples, "sluice_query_malformed_rows_total", query=query) == sum(
        r["numMalformedRows"] for r in reps)
    assert val(samples, "sluice_query_late_rows_total", query=query) == sum(
        op["numRowsDroppedByWatermark"] for r in reps for op in r["stateOperators"])
    assert val(samples, "sluice_query_state_rows", query=query) == sum(
        op["numRowsTotal"] for op in last["stateOperators"])
    assert val(samples, "sluice_query_state_bytes", query=query) == sum(
        op["memoryUsedBytes"] for op in last["stateOperators"])
    files, nbytes = status_backlog(data, query)
    assert val(samples, "sluice_query_backlog_files", query=query) == files
    assert val(samples, "sluice_query_backlog_bytes", query=query) == nbytes
    assert val(samples, "sluice_query_backlog", query=query, unit="files") == files
    assert val(samples, "sluice_query_backlog", query=query, unit="bytes") == nbytes
    if files == 0:
        assert val(samples, "sluice_query_backlog_oldest_age_seconds", query=query) == 0
    buckets, total, count = histogram(samples, "sluice_query_batch_duration_seconds",
                                      query=query)
    ms = [r["durationMs"]["triggerExecution"] for r in reps]
    assert count == len(ms) and buckets[float("inf")] == len(ms)
    for le, n in buckets.items():
        assert n == sum(1 for d in ms if d <= le * 1000 + 1e-9), (le, n, ms)
    assert total == pytest.approx(sum(ms) / 1000, abs=1e-9)
    if "eventTime" in last:
        wm = iso_seconds(last["eventTime"]["watermark"])
        assert val(samples, "sluice_query_watermark_timestamp_seconds", query=query) == wm
        lag = val(samples, "sluice_query_watermark_lag_seconds", query=query)
        assert abs(lag - (time.time() - wm)) < 60
    else:
        assert ("sluice_query_watermark_timestamp_seconds", (("query", query),)) not in samples
    for c in CLASSES:
        assert val(samples, "sluice_query_error", query=query, **{"class": c}) == (c == "none")


def check_landing(samples, landing):
    assert val(samples, "sluice_landing_files_total") == landing["filesLanded"]
    assert val(samples, "sluice_landing_bytes_total") == landing["bytesLanded"]
    assert val(samples, "sluice_landing_files_in_flight") == landing["filesInFlight"]
    assert val(samples, "sluice_landing_temp_abandoned_total") == landing["tempAbandoned"]
    refused = {dict(lab)["errno"]: v for (n, lab), v in samples.items()
               if n == "sluice_landing_refused_total"}
    assert refused == landing["refused"]


def without_timely(samples):
    return {k: v for k, v in samples.items() if k[0] not in TIMELY}


# -- 1. a mount: landings, batches, a refusal ---------------------------------

def test_metrics_agree_with_the_progress_reports(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"plain": ("plain", {}, {}), "st": ("ev", {}, STATEFUL)})
    m = mounts.new(data=data)
    os.mkdir(m.inp("plain"))
    os.mkdir(m.inp("ev"))
    # a malformed line (PERMISSIVE keeps it), then a second plain file
    cp(tmp_path, event_lines([("p1", "u1", 1, T0)]) + b"not json\n", m.inp("plain", "a.json"))
    cp(tmp_path, event_lines([("p2", "u2", 2, T0)]), m.inp("plain", "b.json"))
    # event times rising past a window and the watermark ...
    cp(tmp_path, event_lines([("e%d" % i, "u%d" % (i % 2), i, T0 + i * 5 * MIN)
                              for i in range(6)]), m.inp("ev", "1.json"))
    util.wait_for(lambda: os.path.exists(m.p("status", "st.jsonl")) and
                  sum(r["numInputRows"] for r in reports(m, "st")) == 6, 20, "st's first rows")
    # ... then a late row (before the watermark) and a duplicate
    cp(tmp_path, event_lines([("late", "u1", 9, T0), ("e5", "u1", 5, T0 + 25 * MIN),
                              ("e9", "u1", 9, T0 + 40 * MIN)]), m.inp("ev", "2.json"))
    util.wait_for(lambda: sum(r["numInputRows"] for r in reports(m, "st")) == 9, 20,
                  "st's second file")
    util.wait_for(lambda: sum(r["numInputRows"] for r in reports(m, "plain")) == 3, 20,
                  "plain's rows")
    landing = m.wait_landed()
    # a landed file refuses a write: counted as EPERM
    util.expect_errno(1, open, m.inp("plain", "a.json"), "ab")
    util.wait_for(lambda: util.refused(m.landing()) == 1, 10, "the refusal counted")
    landing = m.landing()
    assert landing["refused"] == {"EPERM": 1}

    text = read(m.mnt, "status", "metrics")
    assert "metrics" in os.listdir(m.p("status"))
    samples = check_text(text)
    check_landing(samples, landing)
    for q in ("plain", "st"):
        check_query(samples, reports(m, q), q, data)
    assert val(samples, "sluice_query_malformed_rows_total", query="plain") == 1
    assert val(samples, "sluice_query_late_rows_total", query="st") >= 1
    # cp landed 4 files through the mount: each waited for a durable commit
    buckets, total, count = histogram(samples, "sluice_landing_commit_seconds")
    assert count >= 4 and buckets[float("inf")] == count and total > 0
    assert sorted(buckets.values()) == list(buckets.values())  # cumulative

    # the same without the mount's files: from the catalog and the shared page
    theirs = check_text(status_prometheus(data))
    assert without_timely(theirs) == without_timely(samples)
    # nothing moves while nothing happens: the output is deterministic
    assert without_timely(check_text(status_prometheus(data))) == without_timely(theirs)

    # after the unmount: counters kept, the last mount's landing latencies still shown
    m.unmount()
    after = check_text(status_prometheus(data))
    assert without_timely(after) == without_timely(samples)


# -- 2. the error state -------------------------------------------------------

@pytest.mark.allow_stderr(r"query 'ff' stopped")
def test_failfast_query_shows_class_malformed(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"ff": ("ff", {"mode": "FAILFAST"}, {}), "ok": ("ok", {}, {})})
    m = mounts.new(data=data)
    os.mkdir(m.inp("ff"))
    os.mkdir(m.inp("ok"))
    cp(tmp_path, event_lines([("a", "u1", 1, T0)]), m.inp("ok", "a.json"))
    cp(tmp_path, event_lines([("a", "u1", 1, T0)]) + b"{broken\n", m.inp("ff", "bad.json"))
    util.wait_for(lambda: "lastError" in (json.loads(read(m.mnt, "status", "ff.json")) or {}),
                  20, "ff's lastError")
    util.wait_for(lambda: reports(m, "ok"), 20, "ok's batch")
    m.wait_landed()
    for text in (read(m.mnt, "status", "metrics"), status_prometheus(data)):
        samples = check_text(text)
        for c in CLASSES:
            assert val(samples, "sluice_query_error", query="ff", **{"class": c}) == (
                c == "malformed"), c
            assert val(samples, "sluice_query_error", query="ok", **{"class": c}) == (
                c == "none"), c
        # the error text is never in the metrics
        assert "broken" not in text and "line 2" not in text
        assert val(samples, "sluice_query_batches_total", query="ff") == 0
        check_query(samples, reports(m, "ok"), "ok", data)
        check_landing(samples, m.landing())


# -- 3. without a mount -------------------------------------------------------

def test_status_prometheus_without_a_mount(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"plain": ("plain", {"maxFilesPerTrigger": 1}, {}),
                        "st": ("ev", {}, STATEFUL)})
    # a new data dir: every family, zeros
    samples = check_text(status_prometheus(data))
    assert val(samples, "sluice_landing_files_total") == 0
    assert val(samples, "sluice_query_batches_total", query="plain") == 0
    assert val(samples, "sluice_query_error", query="st", **{"class": "none"}) == 1

    files = []
    for i in range(3):
        f = tmp_path / ("p%d.json" % i)
        f.write_bytes(event_lines([("p%d" % i, "u", i, T0), ("q%d" % i, "u", i, T0)]))
        files.append(str(f))
    p = util.sluice("land", data, *files[:2], "--to", "plain")
    assert p.returncode == 0, p.stderr
    # backlogged: two files, the oldest landed a moment ago
    samples = check_text(status_prometheus(data))
    assert val(samples, "sluice_query_backlog_files", query="plain") == 2
    assert val(samples, "sluice_query_backlog_bytes", query="plain") == sum(
        os.path.getsize(f) for f in files[:2])
    assert 0 <= val(samples, "sluice_query_backlog_oldest_age_seconds", query="plain") < 60
    # `sluice land` waited for two durable commits, counted in the shared page
    assert histogram(samples, "sluice_landing_commit_seconds")[2] == 2

    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.returncode == 0, p.stderr
    first = check_text(status_prometheus(data))
    assert val(first, "sluice_query_batches_total", query="plain") == 2
    assert val(first, "sluice_query_input_rows_total", query="plain") == 4
    # a second process: the counters go on from the catalog
    p = util.sluice("land", data, files[2], "--to", "plain")
    assert p.returncode == 0, p.stderr
    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.returncode == 0, p.stderr
    second = check_text(status_prometheus(data))
    assert val(second, "sluice_query_batches_total", query="plain") == 3
    assert val(second, "sluice_query_input_rows_total", query="plain") == 6
    assert val(second, "sluice_query_output_rows_total", query="plain") == 6
    _, _, count = histogram(second, "sluice_query_batch_duration_seconds", query="plain")
    assert count == 3
    assert val(second, "sluice_landing_files_total") == 3
    assert val(second, "sluice_query_backlog_files", query="plain") == 0


def test_status_prometheus_usage(tmp_path):
    p = util.sluice("status", "--prometheus")
    assert p.returncode == 2
    p = util.sluice("status", "--bogus", str(tmp_path))
    assert p.returncode == 2
    p = util.sluice("status", "--help")
    assert p.returncode == 0 and "--prometheus" in p.stdout
