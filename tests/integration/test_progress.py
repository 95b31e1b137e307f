"""Progress reports and what pollers see (DESIGN.md §1 "What a query exposes",
the maxFileAge and fileNameOnly source options, the note on out/ folder
mtimes; issue 11):

- every durationMs field of every report (status/<q>.json and each line of
  status/<q>.jsonl) is a non-negative integer, and the phases add up to at
  most triggerExecution, for plain, stateful and no-data batches, through
  `sluice run --available-now` and a live mount;
- a folder under out/ takes the time of the last commit that changed it;
- skippedByMaxFileAge and skippedAlreadySeen count every skip exactly once,
  in the next report, even when the skip happened while no batch ran.

Only relations between durations are asserted, never their magnitudes."""

import json
import math
import os
import time

import pytest

import util
from util import write_file

pytestmark = pytest.mark.timeout(90)

SCHEMA = "event_id STRING, user STRING, amount BIGINT, event_time TIMESTAMP"
T0 = 1791115200  # 2026-10-04T12:00:00Z
MIN = 60
DAY = 86400

PHASES = ("latestOffset", "walCommit", "addBatch", "commitOffsets")

STATEFUL = dict(watermark={"column": "event_time", "delay": "10 minutes"},
                dropDuplicates=["event_id", "event_time"],
                groupBy={"window": {"column": "event_time", "duration": "10 minutes"},
                         "columns": ["user"]},
                aggregate={"n": "count(*)", "total": "sum(amount)"},
                outputMode="append")


# -- helpers ------------------------------------------------------------------

def write_config(data, queries, trigger=None):
    """queries: {name: (in/ path, source options, other query keys)}."""
    os.makedirs(data, exist_ok=True)
    doc = {"queries": {}}
    for name, (path, src_opts, extra) in queries.items():
        src = {"format": "json", "path": path, "schema": SCHEMA}
        src.update(src_opts)
        q = {"source": src}
        q.update(extra)
        if trigger:
            q["trigger"] = trigger
        doc["queries"][name] = q
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump(doc, f)


def events(path, evs):
    """evs: (event_id, user, amount, epoch seconds)."""
    with open(path, "w") as f:
        for eid, user, amount, t in evs:
            f.write(json.dumps({"event_id": eid, "user": user, "amount": amount,
                                "event_time": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                            time.gmtime(t))}) + "\n")
    return str(path)


def one_row(path, ident, age_days=None):
    """A one-row file; age_days sets its mtime that many days back."""
    events(path, [(ident, "u1", 1, T0)])
    if age_days is not None:
        t = time.time() - age_days * DAY
        os.utime(path, (t, t))
    return str(path)


def land(data, *files, to):
    p = util.sluice("land", data, *files, "--to", to)
    assert p.returncode == 0, p.stderr


def run(data):
    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    return sorted(p.stdout.splitlines())


def read(m, *parts):
    with open(os.path.join(m.mnt, *parts), "rb") as f:
        return f.read()


def reports(m, query):
    """(status/<q>.json, [each line of status/<q>.jsonl])."""
    last = json.loads(read(m, "status", query + ".json"))
    lines = [json.loads(l) for l in read(m, "status", query + ".jsonl").decode().splitlines()]
    return last, lines


def check_durations(rep):
    """The invariants of one report's durations and rates."""
    where = "batch %s: %r" % (rep.get("batchId"), rep.get("durationMs"))
    d = rep["durationMs"]
    for k in PHASES + ("triggerExecution",):
        assert k in d, "no durationMs.%s in %s" % (k, where)
    for k, v in d.items():  # any other phase too
        assert isinstance(v, int) and not isinstance(v, bool), "%s is not an integer: %s" % (k, where)
        assert v >= 0, "%s is negative: %s" % (k, where)
    # the phases are disjoint parts of the trigger; each may round up by 1 ms
    parts = [k for k in d if k != "triggerExecution"]
    assert sum(d[k] for k in parts) <= d["triggerExecution"] + len(parts), where
    for holder in [rep] + rep["sources"]:
        for k in ("inputRowsPerSecond", "processedRowsPerSecond"):
            v = holder[k]
            assert isinstance(v, (int, float)) and math.isfinite(v) and v >= 0, (k, v, where)
    if rep["numInputRows"] == 0:
        assert rep["processedRowsPerSecond"] == 0 and rep["inputRowsPerSecond"] == 0


def check_all(m, query):
    last, lines = reports(m, query)
    assert lines and last == lines[-1]
    for rep in [last] + lines:
        check_durations(rep)
    return lines


def stateful_files(tmp_path, nfiles):
    """Files of events whose event times rise, with resent events, so that
    windows close (append mode) and a final no-data batch is due."""
    files, sent = [], []
    for b in range(nfiles):
        evs = [("e%d-%d" % (b, i), "u%d" % (i % 3), i, T0 + b * 15 * MIN + i * MIN)
               for i in range(10)]
        evs += sent[-3:]  # resends: dropped as duplicates
        sent += evs
        files.append(events(tmp_path / ("st%02d.json" % b), evs))
    return files


# -- 1. durationMs ------------------------------------------------------------

def test_durations_of_available_now_batches(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"plain": ("plain", {"maxFilesPerTrigger": 1}, {}),
                        "st": ("ev", {"maxFilesPerTrigger": 1}, STATEFUL)})
    land(data, *[one_row(tmp_path / ("p%d.json" % i), "p%d" % i) for i in range(3)], to="plain")
    land(data, *stateful_files(tmp_path, 4), to="ev")
    assert run(data) == ["plain: 3 batches, 3 rows", "st: 5 batches, 49 rows"]
    # and once more: a second process, batch ids and reports go on
    land(data, one_row(tmp_path / "p9.json", "p9"), to="plain")
    assert run(data) == ["plain: 1 batches, 1 rows", "st: 0 batches, 0 rows"]
    m = mounts.new(data=data)
    assert [r["batchId"] for r in check_all(m, "plain")] == [0, 1, 2, 3]
    st = check_all(m, "st")
    assert [r["batchId"] for r in st] == [0, 1, 2, 3, 4]
    assert st[-1]["numInputRows"] == 0  # the final no-data batch
    assert st[-1]["stateOperators"] and "eventTime" in st[-1]
    # batch 1 ran after batch 0 in the same process: it has a previous trigger
    assert check_all(m, "plain")[1]["inputRowsPerSecond"] > 0


def test_durations_of_batches_in_a_mount(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"plain": ("plain", {}, {}), "st": ("ev", {}, STATEFUL)})
    m = mounts.new(data=data)  # event-driven: each landing is a batch
    os.mkdir(m.inp("plain"))
    os.mkdir(m.inp("ev"))
    for i in range(2):
        write_file(m.inp("plain", "p%d.json" % i),
                   open(one_row(tmp_path / ("p%d.json" % i), "p%d" % i), "rb").read())
        util.wait_for(lambda: len(reports(m, "plain")[1]) == i + 1, 20, "plain batch %d" % i)
    files = stateful_files(tmp_path, 2)
    write_file(m.inp("ev", "a.json"), open(files[0], "rb").read())
    util.wait_for(lambda: len(reports(m, "st")[1]) >= 1, 20, "stateful batch 0")
    write_file(m.inp("ev", "b.json"), open(files[1], "rb").read())
    # batch 1, then a no-data batch: its watermark closes a window
    util.wait_for(lambda: len(reports(m, "st")[1]) >= 3, 20, "stateful batches 1 and 2")
    check_all(m, "plain")
    st = check_all(m, "st")
    assert any(r["numInputRows"] == 0 for r in st), [r["numInputRows"] for r in st]


# -- 2. out/ folder mtimes ----------------------------------------------------

def mtime_ns(path):
    return os.stat(path).st_mtime_ns


def newest_part_ns(folder):
    """The newest mtime of the parts right under folder (a part's mtime is its commit's time)."""
    return max(mtime_ns(os.path.join(folder, n)) for n in os.listdir(folder)
               if os.path.isfile(os.path.join(folder, n)))


def wait_newer(path, than, what):
    """Polls: folder attributes may be cached for a second."""
    return util.wait_for(lambda: mtime_ns(path) > than and mtime_ns(path), 10, what)


def test_out_folder_mtime_follows_commits_in_a_mount(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"q": ("q", {}, {}),
                        "pq": ("pq", {}, {"sink": {"format": "json", "partitionBy": ["user"]}})})
    m = mounts.new(data=data)
    os.mkdir(m.inp("q"))
    os.mkdir(m.inp("pq"))
    out, pout = m.p("out", "q"), m.p("out", "pq")
    pdir = os.path.join(pout, "user=u1")
    write_file(m.inp("q", "a.json"), open(one_row(tmp_path / "a.json", "a"), "rb").read())
    write_file(m.inp("pq", "a.json"), open(one_row(tmp_path / "a.json", "a"), "rb").read())
    util.wait_for(lambda: os.path.isdir(out) and len(util.list_out(out)) == 1, 20, "q batch 0")
    util.wait_for(lambda: os.path.isdir(pdir) and len(os.listdir(pdir)) == 1, 20, "pq batch 0")
    first = mtime_ns(out)
    pfirst = mtime_ns(pdir)
    assert first >= newest_part_ns(out) and pfirst >= newest_part_ns(pdir)

    time.sleep(1.2)
    write_file(m.inp("q", "b.json"), open(one_row(tmp_path / "b.json", "b"), "rb").read())
    write_file(m.inp("pq", "b.json"), open(one_row(tmp_path / "b.json", "b"), "rb").read())
    util.wait_for(lambda: len(util.list_out(out)) == 2, 20, "q batch 1")
    util.wait_for(lambda: len(os.listdir(pdir)) == 2, 20, "pq batch 1")
    second = wait_newer(out, first, "out/q/'s mtime to move")
    assert second >= newest_part_ns(out)
    # a partition folder that got a new part moves too
    psecond = wait_newer(pdir, pfirst, "out/pq/user=u1/'s mtime to move")
    assert psecond >= newest_part_ns(pdir)
    assert os.stat(out).st_ctime_ns >= second  # ctime with it


def test_out_folder_mtime_follows_commits_across_runs(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"q": ("q", {}, {}),
                        "snap": ("snap", {}, {"groupBy": {"columns": ["user"]},
                                              "aggregate": {"n": "count(*)"},
                                              "outputMode": "complete"})})
    land(data, one_row(tmp_path / "a.json", "a"), to="q")
    land(data, one_row(tmp_path / "a.json", "a"), to="snap")
    assert run(data) == ["q: 1 batches, 1 rows", "snap: 1 batches, 1 rows"]
    m = mounts.new(data=data)
    out, snap = m.p("out", "q"), m.p("out", "snap")
    first, sfirst = mtime_ns(out), mtime_ns(snap)
    assert first >= newest_part_ns(out) and sfirst >= newest_part_ns(snap)
    m.unmount()

    time.sleep(1.2)
    land(data, one_row(tmp_path / "b.json", "b"), to="q")
    land(data, one_row(tmp_path / "b.json", "b"), to="snap")
    assert run(data) == ["q: 1 batches, 1 rows", "snap: 1 batches, 1 rows"]
    m = mounts.remount(m)
    second, ssecond = mtime_ns(out), mtime_ns(snap)
    assert second > first and second >= newest_part_ns(out)
    # complete mode: the snapshot replaced is a change of the folder too
    assert os.listdir(snap) == ["part-00001-00000.jsonl"]
    assert ssecond > sfirst and ssecond >= newest_part_ns(snap)


# -- 3. skip counters ---------------------------------------------------------

def skips(rep):
    return rep["skippedByMaxFileAge"], rep["skippedAlreadySeen"]


def test_skip_counters_follow_the_design_order(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": ("dev", {}, {})})
    land(data, one_row(tmp_path / "a.json", "a"), to="dev")
    run(data)
    m = mounts.new(data=data)
    keys = list(json.loads(read(m, "status", "dev.json")))
    i = keys.index("skippedByMaxFileAge")
    assert keys[i + 1] == "skippedAlreadySeen", keys
    assert keys[keys.index("backlog") + 1] == "skippedByMaxFileAge", keys


def test_relanded_after_clean_source_counts_already_seen(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": ("dev", {"cleanSource": "delete"}, {})})
    a = one_row(tmp_path / "a.json", "a")
    land(data, a, to="dev")
    assert run(data) == ["dev: 1 batches, 1 rows"]
    # the same path again (a resend after cleanSource removed it), with a new file
    land(data, a, one_row(tmp_path / "b.json", "b"), to="dev")
    assert run(data) == ["dev: 1 batches, 1 rows"]
    m = mounts.new(data=data)
    last, lines = reports(m, "dev")
    assert skips(last) == (0, 1)
    assert [skips(r) for r in lines] == [(0, 0), (0, 1)]
    # b.json was cleaned; the skipped a.json stays, and can be deleted
    assert os.listdir(m.inp("dev")) == ["a.json"]
    os.unlink(m.inp("dev", "a.json"))
    assert os.listdir(m.inp("dev")) == []


def test_already_seen_skip_while_no_batch_runs_counts_in_the_next(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": ("dev", {"cleanSource": "delete"}, {})})
    a = one_row(tmp_path / "a.json", "a")
    land(data, a, to="dev")
    run(data)
    land(data, a, to="dev")
    # skipped at planning: no batch, no report yet, but deletable at once
    assert run(data) == ["dev: 0 batches, 0 rows"]
    m = mounts.new(data=data)
    assert [skips(r) for r in reports(m, "dev")[1]] == [(0, 0)]
    os.unlink(m.inp("dev", "a.json"))
    m.unmount()
    land(data, one_row(tmp_path / "c.json", "c"), to="dev")
    assert run(data) == ["dev: 1 batches, 1 rows"]
    land(data, one_row(tmp_path / "d.json", "d"), to="dev")
    assert run(data) == ["dev: 1 batches, 1 rows"]
    m = mounts.remount(m)
    # counted once, in the report after the skip
    assert [skips(r) for r in reports(m, "dev")[1]] == [(0, 0), (0, 1), (0, 0)]


def test_file_name_only_collision_counts_already_seen(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": ("dev", {"fileNameOnly": True}, {})})
    x = one_row(tmp_path / "x.json", "x")
    land(data, x, to="dev/date=1")
    land(data, x, to="dev/date=2")
    assert run(data) == ["dev: 1 batches, 1 rows"]
    m = mounts.new(data=data)
    assert skips(reports(m, "dev")[0]) == (0, 1)
    os.unlink(m.inp("dev", "date=2", "x.json"))  # skipped: deletable


def test_max_file_age_skip_while_no_batch_runs_counts_in_the_next(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": ("dev", {"fileAgeBy": "mtime"}, {})})  # maxFileAge 7 days
    land(data, one_row(tmp_path / "fresh.json", "fresh"), to="dev")
    assert run(data) == ["dev: 1 batches, 1 rows"]
    # `sluice land` keeps the old mtimes: both are skipped when planned, and
    # no batch runs
    land(data, one_row(tmp_path / "old0.json", "old0", age_days=30),
         one_row(tmp_path / "old1.json", "old1", age_days=30), to="dev")
    assert run(data) == ["dev: 0 batches, 0 rows"]
    # the next report, by another process, counts them
    land(data, one_row(tmp_path / "next.json", "next"), to="dev")
    assert run(data) == ["dev: 1 batches, 1 rows"]
    land(data, one_row(tmp_path / "later.json", "later"), to="dev")
    assert run(data) == ["dev: 1 batches, 1 rows"]
    m = mounts.new(data=data)
    assert [skips(r) for r in reports(m, "dev")[1]] == [(0, 0), (2, 0), (0, 0)]
    os.unlink(m.inp("dev", "old0.json"))


@pytest.mark.allow_stderr(r"resource busy")
def test_max_file_age_skip_in_a_mount_counts_in_the_next(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": ("dev", {"fileAgeBy": "mtime", "maxFileAge": "1 day"}, {})})
    m = mounts.new(data=data)  # event-driven: a landing wakes the query
    os.mkdir(m.inp("dev"))
    write_file(m.inp("dev", "fresh.json"), open(one_row(tmp_path / "f.json", "f"), "rb").read())
    util.wait_for(lambda: len(reports(m, "dev")[1]) == 1, 20, "batch 0")
    old = time.time_ns() - 30 * DAY * 10**9
    write_file(m.inp("dev", "old.json"), open(one_row(tmp_path / "o.json", "o"), "rb").read(),
               mtime_ns=old)
    m.wait_landed()
    # planned and skipped without a batch: deletable once the query got to it

    def deleted():
        try:
            os.unlink(m.inp("dev", "old.json"))
            return True
        except OSError:
            return False
    util.wait_for(deleted, 10, "the skipped file to become deletable", interval=0.1)
    assert len(reports(m, "dev")[1]) == 1
    write_file(m.inp("dev", "next.json"), open(one_row(tmp_path / "n.json", "n"), "rb").read())
    util.wait_for(lambda: len(reports(m, "dev")[1]) == 2, 20, "batch 1")
    assert [skips(r) for r in reports(m, "dev")[1]] == [(0, 0), (1, 0)]
