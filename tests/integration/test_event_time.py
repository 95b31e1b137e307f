"""Event time (DESIGN.md §1 Operators; issue 4): the watermark, windows,
dropDuplicates, the three output modes, no-data batches, and state that
survives restarts and kill -9. The seed lab's second part is the first test.
Tests land their files first and count batches with `sluice run
--available-now`; output is read through a mount."""

import json
import os
import random
import subprocess
import time

import pytest

import util

pytestmark = pytest.mark.timeout(120)

SCHEMA = "event_id STRING, user STRING, amount BIGINT, event_time TIMESTAMP"
T0 = 1791115200  # 2026-10-04T12:00:00Z
MIN = 60


def iso(sec):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)) + ".000Z"


def write_config(data, **q):
    os.makedirs(data, exist_ok=True)
    src = {"format": "json", "path": "ev", "schema": SCHEMA}
    src.update(q.pop("source", {}))
    q["source"] = src
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump({"queries": {q.pop("name", "q"): q}}, f)


def events(path, evs):
    """evs: (event_id, user, amount, epoch seconds or None)."""
    with open(path, "w") as f:
        for eid, user, amount, t in evs:
            r = {"event_id": eid, "user": user, "amount": amount}
            if t is not None:
                r["event_time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
            f.write(json.dumps(r) + "\n")
    return path


def land(data, *files):
    p = util.sluice("land", data, *files, "--to", "ev")
    assert p.returncode == 0, p.stderr


def run(data, expect=0, env=None):
    p = util.sluice("run", "--available-now", data, timeout=60, env=env)
    assert p.returncode == expect, (p.returncode, p.stdout, p.stderr)
    return p


def read(m, *parts):
    with open(os.path.join(m.mnt, *parts), "rb") as f:
        return f.read()


def parts(m, query="q"):
    """{batch id: [rows]} of out/<query>/, read with cat. A complete-mode
    snapshot can be replaced between the listing and the reads, as for any
    poller: then it lists again (a missing part is never half read)."""
    base = os.path.join(m.mnt, "out", query)
    for _ in range(50):
        out = {}
        if not os.path.isdir(base):
            return out
        for n in sorted(util.list_out(base)):
            batch = int(n.split("-")[1])
            p = subprocess.run(["cat", os.path.join(base, n)], capture_output=True)
            if p.returncode != 0:
                assert b"No such file" in p.stderr, p.stderr
                break
            out[batch] = [json.loads(l) for l in p.stdout.decode().splitlines() if l]
        else:
            return out
    raise AssertionError("out/%s/ kept changing under its reader" % query)


def progress(m, query="q"):
    return [json.loads(l) for l in read(m, "status", query + ".jsonl").decode().splitlines()]


def offsets(m, batch, query="q"):
    lines = read(m, "checkpoint", query, "offsets", str(batch)).decode().split("\n")
    return json.loads(lines[1]), json.loads(lines[2])


def commit_wm(m, batch, query="q"):
    text = read(m, "checkpoint", query, "commits", str(batch)).decode()
    assert text.startswith("v1\n")
    return json.loads(text[3:])["nextBatchWatermarkMs"]


def simulate_append(batches, delay, size):
    """Spark's append mode over per-batch event times (seconds): windows
    written once when end <= watermark; late rows (t <= watermark) dropped."""
    wm = 0
    state, written, dropped = {}, {}, 0
    for evs in batches + [[]]:
        for user, amount, t in evs:
            if t <= wm:
                dropped += 1
                continue
            start = t - t % size
            c, s = state.get((start, user), (0, 0))
            state[(start, user)] = (c + 1, s + amount)
        for k in [k for k in state if k[0] + size <= wm]:
            written[k] = state.pop(k)
        if evs:
            wm = max(wm, max(t for _, _, t in evs) - delay)
    for k in [k for k in state if k[0] + size <= wm]:
        written[k] = state.pop(k)
    return written, dropped, wm


def test_seed_lab_watermark_windows_late_event(mounts, tmp_path):
    """10-minute watermark, 10-minute windows, one file per trigger; an event
    ~40 minutes late is dropped and counted; each window is written exactly
    once, only after the watermark passes its end."""
    data = str(tmp_path / "data")
    write_config(data, source={"maxFilesPerTrigger": 1},
                 watermark={"column": "event_time", "delay": "10 minutes"},
                 groupBy={"window": {"column": "event_time", "duration": "10 minutes"},
                          "columns": ["user"]},
                 aggregate={"n": "count(*)", "total": "sum(amount)"},
                 outputMode="append")
    rnd = random.Random(4)
    batches = []
    files = []
    for b in range(8):
        evs = [("u%d" % rnd.randrange(3), rnd.randrange(100),
                T0 + b * 7 * MIN + rnd.randrange(7 * MIN)) for _ in range(20)]
        if b == 6:
            evs.append(("u0", 1000, T0 + b * 7 * MIN - 40 * MIN))  # ~40 minutes late
        batches.append(evs)
        files.append(events(str(tmp_path / ("f%d.json" % b)),
                            [("e%d-%d" % (b, i), u, a, t) for i, (u, a, t) in enumerate(evs)]))
    for f in files:  # landing order is batch order
        land(data, f)
    run(data)
    want, dropped, final_wm = simulate_append(batches, 10 * MIN, 10 * MIN)
    assert dropped == 1

    m = mounts.new(data=data)
    out = parts(m)
    seen = {}
    for batch, rows in out.items():
        wm_ms = offsets(m, batch)[0]["batchWatermarkMs"]
        for r in rows:
            key = (r["window"]["start"], r["user"])
            assert key not in seen, "window written twice: %r" % (key,)
            seen[key] = (r["n"], r["total"])
            # only after the watermark passed the window's end
            assert r["window"]["end"] <= iso(wm_ms // 1000)
    assert seen == {(iso(s), u): v for (s, u), v in want.items()}
    prog = progress(m)
    assert sum(p["stateOperators"][0]["numRowsDroppedByWatermark"] for p in prog) == 1
    late = [p for p in prog if p["stateOperators"][0]["numRowsDroppedByWatermark"]]
    assert late[0]["numInputRows"] == 21
    # eight data batches, then the no-data batch that closes the last windows
    assert [p["numInputRows"] for p in prog][-1] == 0 and len(prog) == 9
    assert set(prog[-1]["eventTime"]) == {"watermark"}
    assert list(prog[0]["eventTime"]) == ["avg", "max", "min", "watermark"]
    assert prog[0]["eventTime"]["watermark"] == "1970-01-01T00:00:00.000Z"
    # offsets/N holds the watermark computed at the end of N-1 (commits/N-1)
    for n in range(1, 9):
        assert offsets(m, n)[0]["batchWatermarkMs"] == commit_wm(m, n - 1)
    assert commit_wm(m, 8) == final_wm * 1000
    # the no-data batch repeats the last source offset
    assert offsets(m, 8)[1] == offsets(m, 7)[1] == {"logOffset": 7}
    st = util.sluice("status", data).stdout.splitlines()[1]
    assert "watermark=%s" % iso(final_wm) in st


def dedup_config(data, keys, wm=True, **kw):
    q = dict(dropDuplicates=keys)
    if wm:
        q["watermark"] = {"column": "event_time", "delay": "10 minutes"}
    q.update(kw)
    write_config(data, **q)


def test_dedup_resent_bundle_across_batches_and_restarts(mounts, tmp_path):
    data = str(tmp_path / "data")
    dedup_config(data, ["event_id"], wm=False)
    evs = [("e%d" % i, "u1", i, T0 + i) for i in range(10)]
    land(data, events(str(tmp_path / "b1.json"), evs))
    run(data)
    # the partner resends the bundle (a new name), plus two new events
    land(data, events(str(tmp_path / "b1-resent.json"),
                      evs + [("e10", "u1", 10, T0), ("e11", "u2", 11, T0)]))
    run(data)
    # and once more after a remount
    m = mounts.new(data=data)
    util.write_file(m.inp("ev", "b1-again.json"),
                    open(str(tmp_path / "b1.json"), "rb").read())
    util.wait_for(lambda: len(progress(m)) == 3, 20, "the third batch")
    out = parts(m)
    ids = [r["event_id"] for rows in out.values() for r in rows]
    assert sorted(ids) == sorted("e%d" % i for i in range(12))
    prog = progress(m)
    ops = [p["stateOperators"][0] for p in prog]
    assert [o["operatorName"] for o in ops] == ["dedupe"] * 3
    assert [o["customMetrics"]["numDroppedDuplicateRows"] for o in ops] == [0, 10, 10]
    assert [o["numRowsTotal"] for o in ops] == [10, 12, 12]  # kept forever
    assert ops[2]["memoryUsedBytes"] > 0 and ops[2]["numRowsRemoved"] == 0


def test_dedup_state_shrinks_as_watermark_passes(mounts, tmp_path):
    data = str(tmp_path / "data")
    dedup_config(data, ["event_id", "event_time"])
    early = [("e%d" % i, "u", i, T0 + i * MIN) for i in range(6)]  # 12:00..12:05
    land(data, events(str(tmp_path / "a.json"), early + early))  # duplicates within
    run(data)
    # 12:30 moves the watermark to 12:20: a no-data batch evicts 12:00..12:05
    land(data, events(str(tmp_path / "b.json"), [("e9", "u", 9, T0 + 30 * MIN)]))
    run(data)
    # a resend of an evicted event is late: dropped, not written again
    land(data, events(str(tmp_path / "c.json"), early[:2] + [("e10", "u", 1, T0 + 31 * MIN)]))
    run(data)
    m = mounts.new(data=data)
    ops = [p["stateOperators"][0] for p in progress(m)]
    assert [o["numRowsTotal"] for o in ops] == [6, 7, 1, 2]
    assert ops[2]["numRowsRemoved"] == 6
    assert ops[0]["customMetrics"]["numDroppedDuplicateRows"] == 6
    assert ops[3]["numRowsDroppedByWatermark"] == 2
    ids = [r["event_id"] for rows in parts(m).values() for r in rows]
    assert sorted(ids) == sorted(["e%d" % i for i in range(6)] + ["e9", "e10"])


def test_dedup_within_watermark(mounts, tmp_path):
    """Spark's test 'subset of columns': a key is dropped while in state and
    accepted again once the watermark passed its first time + delay."""
    data = str(tmp_path / "data")
    write_config(data, watermark={"column": "event_time", "delay": "5 seconds"},
                 dropDuplicatesWithinWatermark=["event_id"])
    land(data, events(str(tmp_path / "1.json"), [("a", "u", 1, T0 + 17)]))
    run(data)  # emitted; watermark 12
    land(data, events(str(tmp_path / "2.json"), [("a", "u", 2, T0 + 16), ("a", "u", 3, T0 + 11)]))
    run(data)  # a duplicate, and a late row
    land(data, events(str(tmp_path / "3.json"), [("b", "u", 4, T0 + 22), ("c", "u", 5, T0 + 21)]))
    run(data)  # watermark 17: a expires at 22, not yet
    land(data, events(str(tmp_path / "4.json"), [("d", "u", 6, T0 + 30)]))
    run(data)  # watermark 25 >= 22: a leaves the state
    land(data, events(str(tmp_path / "5.json"), [("a", "u", 7, T0 + 31)]))
    run(data)
    m = mounts.new(data=data)
    rows = [r for rs in parts(m).values() for r in rs]
    assert [(r["event_id"], r["amount"]) for r in rows] == \
        [("a", 1), ("b", 4), ("c", 5), ("d", 6), ("a", 7)]
    ops = [p["stateOperators"][0] for p in progress(m)]
    assert ops[0]["operatorName"] == "dedupeWithinWatermark"
    assert ops[1]["customMetrics"]["numDroppedDuplicateRows"] == 1
    assert ops[1]["numRowsDroppedByWatermark"] == 1


def agg_config(data, mode, window=None, **kw):
    gb = {"columns": ["user"]}
    if window:
        gb["window"] = window
    write_config(data, groupBy=gb, outputMode=mode,
                 aggregate={"n": "count(*)", "total": "sum(amount)", "avg": "avg(amount)",
                            "lo": "min(amount)", "hi": "max(amount)", "c": "count(event_time)"},
                 **kw)


def test_update_mode_writes_changed_groups(mounts, tmp_path):
    data = str(tmp_path / "data")
    agg_config(data, "update")
    land(data, events(str(tmp_path / "1.json"),
                      [("1", "u1", 5, T0), ("2", "u1", 7, None), ("3", "u2", -3, T0)]))
    run(data)
    land(data, events(str(tmp_path / "2.json"), [("4", "u1", 12, T0)]))
    run(data)
    m = mounts.new(data=data)
    out = parts(m)
    assert sorted(out) == [0, 1]
    assert out[0] == [{"user": "u1", "n": 2, "total": 12, "avg": 6.0, "lo": 5, "hi": 7, "c": 1},
                      {"user": "u2", "n": 1, "total": -3, "avg": -3.0, "lo": -3, "hi": -3,
                       "c": 1}]
    # a changelog: batch 1 writes only the group it changed, with its new totals
    assert out[1] == [{"user": "u1", "n": 3, "total": 24, "avg": 8.0, "lo": 5, "hi": 12,
                       "c": 2}]
    ops = [p["stateOperators"][0] for p in progress(m)]
    assert [(o["numRowsTotal"], o["numRowsUpdated"]) for o in ops] == [(2, 2), (2, 1)]


def test_complete_mode_replaces_the_snapshot(mounts, tmp_path):
    data = str(tmp_path / "data")
    agg_config(data, "complete")
    m = mounts.new(data=data)  # event-driven: each landing is a batch
    os.mkdir(m.inp("ev"))
    util.write_file(m.inp("ev", "1.json"),
                    open(events(str(tmp_path / "1.json"),
                                [("1", "u1", 5, T0), ("2", "u2", 1, T0)]), "rb").read())
    util.wait_for(lambda: len(parts(m)) == 1 and 0 in parts(m), 20, "batch 0")
    first = parts(m)[0]
    assert [(r["user"], r["n"]) for r in first] == [("u1", 1), ("u2", 1)]
    util.write_file(m.inp("ev", "2.json"),
                    open(events(str(tmp_path / "2.json"), [("3", "u1", 5, T0)]), "rb").read())
    util.wait_for(lambda: 1 in parts(m), 20, "batch 1")
    # only the latest batch's part is listed, and it holds every group
    assert util.list_out(os.path.join(m.mnt, "out", "q")) == ["part-00001-00000.jsonl"]
    assert [(r["user"], r["n"], r["total"]) for r in parts(m)[1]] == \
        [("u1", 2, 10), ("u2", 1, 1)]
    m.unmount()
    # the replaced part's blob is gone: the catalog and blobs agree
    p = util.sluice("check", data)
    assert p.returncode == 0, p.stdout + p.stderr


def test_complete_mode_counts_late_rows(mounts, tmp_path):
    """Spark: complete mode evicts nothing, so late data still updates it."""
    data = str(tmp_path / "data")
    agg_config(data, "complete", window={"column": "event_time", "duration": "10 seconds"},
               watermark={"column": "event_time", "delay": "10 seconds"})
    land(data, events(str(tmp_path / "1.json"), [("1", "u", 1, T0 + 25), ("2", "u", 1, T0 + 25)]))
    run(data)
    land(data, events(str(tmp_path / "2.json"), [("3", "u", 1, T0 + 10)]))
    run(data)
    m = mounts.new(data=data)
    out = parts(m)
    assert sorted(out) == [1]
    assert [(r["window"]["start"], r["n"]) for r in out[1]] == [(iso(T0 + 10), 1),
                                                                 (iso(T0 + 20), 2)]


def test_sliding_windows_count_an_event_twice(mounts, tmp_path):
    data = str(tmp_path / "data")
    agg_config(data, "update",
               window={"column": "event_time", "duration": "10 minutes", "slide": "5 minutes"})
    land(data, events(str(tmp_path / "1.json"),
                      [("1", "u", 1, T0 + 7 * MIN), ("2", "u", 2, T0 + 12 * MIN)]))
    run(data)
    m = mounts.new(data=data)
    got = [(r["window"]["start"], r["window"]["end"], r["n"], r["total"]) for r in parts(m)[0]]
    assert got == [
        (iso(T0), iso(T0 + 10 * MIN), 1, 1),
        (iso(T0 + 5 * MIN), iso(T0 + 15 * MIN), 2, 3),
        (iso(T0 + 10 * MIN), iso(T0 + 20 * MIN), 1, 2)]


# a test build's knob: a batch's groups are sorted (two halves, merged from
# both ends) and emitted on two threads from 4 groups up instead of 65,536
EMIT_SPLIT = dict(os.environ, SLUICE_FAULT_SIZE="groupby.emit_split:4,groupby.sort_split:4")


def emit_runs(mounts, tmp_path, name, mode, env, files):
    """Runs agg_config(mode) over files landed one batch each; after each
    batch, the parts' names and bytes, read through a mount."""
    data = str(tmp_path / name)
    agg_config(data, mode, window={"column": "event_time", "duration": "10 minutes"})
    got = []
    for i, evs in enumerate(files):
        land(data, events(str(tmp_path / ("%s-%d.json" % (name, i))), evs))
        run(data, env=env)
        m = mounts.new(data=data)
        base = os.path.join(m.mnt, "out", "q")
        got += [(n, read(m, "out", "q", n)) for n in sorted(util.list_out(base))]
        m.unmount()
    return got


@pytest.mark.parametrize("mode", ["update", "complete"])
def test_groups_emitted_on_two_threads_as_on_one(mounts, tmp_path, mode):
    """A batch's groups are sorted and its output rows made on two threads
    when they are many (each half with strings of its own, joined after):
    every part,
    over batches that merge new groups with stored ones and groups whose
    key is null, is byte for byte what one thread writes."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    rnd = random.Random(7)
    files = []
    for b in range(3):
        evs = []
        for i in range(300 + 200 * b):
            user = None if i % 41 == 0 else "u" * rnd.randint(1, 30) + str(rnd.randint(0, 60))
            evs.append(("%d-%d" % (b, i), user, rnd.randint(-5, 1000),
                        T0 + b * 5 * MIN + rnd.randint(0, 40 * MIN)))
        files.append(evs)
    one = emit_runs(mounts, tmp_path, "one", mode, None, files)
    two = emit_runs(mounts, tmp_path, "two", mode, EMIT_SPLIT, files)
    assert len(one) >= 3 and sum(len(d) for _, d in one) > 3000
    assert [n for n, _ in two] == [n for n, _ in one]
    for (n, a), (_, b) in zip(one, two):
        assert b == a, n


def test_groups_emitted_on_two_threads_overflow_stops_the_query(tmp_path):
    """An overflowing group in the second thread's half stops the query as
    on one thread, with nothing committed."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    data = str(tmp_path / "data")
    write_config(data, groupBy={"columns": ["user"]}, aggregate={"s": "sum(amount)"},
                 outputMode="update")
    evs = [(str(i), "u%03d" % i, i, T0) for i in range(100)]
    evs += [("x1", "u099", 2 ** 63 - 1, T0)]
    land(data, events(str(tmp_path / "1.json"), evs))
    p = run(data, expect=1, env=EMIT_SPLIT)
    assert "sum(amount) overflows BIGINT" in p.stderr
    st = util.sluice("status", data).stdout.splitlines()[1]
    assert "overflows" in st and "batch=-" in st


def test_aggregation_without_groupby_columns(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, aggregate={"n": "count(*)", "s": "sum(amount)"}, outputMode="update")
    land(data, events(str(tmp_path / "1.json"), [("1", "u", 1, T0), ("2", "v", 2, T0)]))
    run(data)
    land(data, events(str(tmp_path / "2.json"), [("3", "u", 4, T0)]))
    run(data)
    m = mounts.new(data=data)
    assert parts(m) == {0: [{"n": 2, "s": 3}], 1: [{"n": 3, "s": 7}]}


def test_sum_overflow_stops_the_query(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, groupBy={"columns": ["user"]}, aggregate={"s": "sum(amount)"},
                 outputMode="update")
    land(data, events(str(tmp_path / "1.json"),
                      [("1", "u", 2 ** 63 - 1, T0), ("2", "u", 1, T0)]))
    p = run(data, expect=1)
    assert "sum(amount) overflows BIGINT" in p.stderr
    st = util.sluice("status", data).stdout.splitlines()[1]
    assert "overflows" in st and "batch=-" in st


STATEFUL = dict(source={"maxFilesPerTrigger": 1},
                watermark={"column": "event_time", "delay": "10 minutes"},
                dropDuplicates=["event_id", "event_time"],
                groupBy={"window": {"column": "event_time", "duration": "10 minutes"},
                         "columns": ["user"]},
                aggregate={"n": "count(*)", "total": "sum(amount)"},
                outputMode="append")


def stateful_inputs(tmp_path, nfiles=10):
    rnd = random.Random(11)
    files, sent = [], []
    for b in range(nfiles):
        evs = [("e%d-%d" % (b, i), "u%d" % rnd.randrange(4), rnd.randrange(50),
                T0 + b * 6 * MIN + rnd.randrange(6 * MIN)) for i in range(30)]
        if sent:
            evs += rnd.sample(sent, 5)  # resends of earlier events
        sent += evs
        files.append(events(str(tmp_path / ("in%02d.json" % b)), evs))
    return files


def final_windows(m):
    got = {}
    for rows in parts(m).values():
        for r in rows:
            k = (r["window"]["start"], r["user"])
            assert k not in got, "written twice: %r" % (k,)
            got[k] = (r["n"], r["total"])
    return got


def test_state_survives_remount_and_kill9(mounts, tmp_path):
    files = stateful_inputs(tmp_path)
    ref = str(tmp_path / "ref")
    write_config(ref, **STATEFUL)
    for f in files:
        land(ref, f)
    run(ref)
    mr = mounts.new(data=ref)
    want = final_windows(mr)
    assert len(want) > 10
    mr.unmount()

    data = str(tmp_path / "data")
    write_config(data, **STATEFUL)
    # half through a mount that is unmounted, the rest while sluice run is
    # killed -9 at random moments (between and during batches)
    m = mounts.new(data=data)
    os.mkdir(m.inp("ev"))
    for f in files[:4]:
        util.write_file(m.inp("ev", os.path.basename(f)), open(f, "rb").read())
    util.wait_for(lambda: sum(p["numInputRows"] for p in progress(m)) >= 4 * 30, 30,
                  "four files processed")
    m.unmount()
    for f in files[4:]:
        land(data, f)
    rnd = random.Random(5)
    for _ in range(8):
        proc = subprocess.Popen([util.sluice_bin(), "run", "--available-now", data],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rnd.uniform(0.0, 0.05))
        proc.kill()
        proc.wait(timeout=30)
    run(data)
    m = mounts.new(data=data)
    assert final_windows(m) == want
    m.unmount()
    p = util.sluice("check", data)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("point", ["engine.after_offsets", "engine.before_commit",
                                   "engine.after_commit", "catalog.after_commit"])
def test_state_exactly_once_at_fault_points(mounts, tmp_path, point):
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    files = stateful_inputs(tmp_path, 6)
    ref = str(tmp_path / "ref")
    write_config(ref, **STATEFUL)
    for f in files:
        land(ref, f)
    run(ref)
    mr = mounts.new(data=ref)
    want = final_windows(mr)
    mr.unmount()

    data = str(tmp_path / "data")
    write_config(data, **STATEFUL)
    for f in files:
        land(data, f)
    died = 0
    for n in (1, 2, 3, 1, 2):
        p = util.sluice("run", "--available-now", data, timeout=60,
                        env=dict(os.environ, SLUICE_FAULT="%s:%d" % (point, n)))
        died += p.returncode == 86
    assert died >= 1
    run(data)
    m = mounts.new(data=data)
    assert final_windows(m) == want


def test_complete_mode_large_snapshot_killed_after_commit(mounts, tmp_path):
    """Parts above the inline limit are blobs: the replaced snapshot's blob
    goes even when the process dies right after the commit that replaced it."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    data = str(tmp_path / "data")
    agg_config(data, "complete")
    land(data, events(str(tmp_path / "1.json"),
                      [(str(i), "user-%05d" % i, i, T0) for i in range(3000)]))
    run(data)
    land(data, events(str(tmp_path / "2.json"), [("x", "user-00007", 1, T0)]))
    p = util.sluice("run", "--available-now", data, timeout=60,
                    env=dict(os.environ, SLUICE_FAULT="engine.after_commit:1"))
    assert p.returncode == 86
    # the old part's blob waits for the next start: check does not call it a leak
    p = util.sluice("check", data)
    assert p.returncode == 0, p.stdout + p.stderr
    run(data)  # the start redoes the unlink
    p = util.sluice("check", data)
    assert p.returncode == 0, p.stdout + p.stderr
    m = mounts.new(data=data)
    assert util.list_out(os.path.join(m.mnt, "out", "q")) == ["part-00001-00000.jsonl"]
    rows = parts(m)[1]
    assert len(rows) == 3000 and os.path.getsize(
        os.path.join(m.mnt, "out", "q", "part-00001-00000.jsonl")) > 65536
    assert [r for r in rows if r["user"] == "user-00007"][0]["n"] == 2


def test_refused_and_allowed_query_changes(tmp_path):
    data = str(tmp_path / "data")
    base = dict(watermark={"column": "event_time", "delay": "10 minutes"},
                groupBy={"window": {"column": "event_time", "duration": "10 minutes"},
                         "columns": ["user"]},
                aggregate={"n": "count(*)"}, outputMode="append")
    write_config(data, **base)
    land(data, events(str(tmp_path / "1.json"), [("1", "u", 1, T0)]))
    run(data)
    refused = [
        ("groupBy", dict(base, groupBy={"window": {"column": "event_time",
                                                  "duration": "5 minutes"},
                                       "columns": ["user"]})),
        ("aggregate", dict(base, aggregate={"n": "count(*)", "s": "sum(amount)"})),
        ("outputMode", dict(base, outputMode="update")),
        ("dropDuplicates", dict(base, dropDuplicates=["event_id"])),
        ("source.path", dict(base, source={"path": "ev2"})),
        ("sink.format", dict(base, sink={"format": "csv"},
                             groupBy={"window": {"column": "event_time",
                                                 "duration": "10 minutes"},
                                      "columns": ["user"]})),
    ]
    for field, q in refused:
        write_config(data, **q)
        p = util.sluice("run", "--available-now", data, timeout=60)
        assert p.returncode != 0, field
        assert "queries.q." + field in p.stderr, (field, p.stderr)
    # the allowed ones just work: the watermark delay, caps, the mode
    write_config(data, **dict(base, watermark={"column": "event_time", "delay": "20 minutes"},
                              source={"maxFilesPerTrigger": 3, "mode": "DROPMALFORMED"}))
    land(data, events(str(tmp_path / "2.json"), [("2", "u", 1, T0 + 60 * MIN)]))
    run(data)


def test_big_batch_dedup_and_aggregation_on_two_threads(mounts, tmp_path):
    """A batch of 200,000 rows runs dropDuplicates and groupBy on two threads
    (block by block), and its 100,000+ groups are sorted in two halves on
    two threads: the result is still every first row counted once."""
    data = str(tmp_path / "data")
    write_config(data, dropDuplicates=["event_id"],
                 groupBy={"window": {"column": "event_time", "duration": "10 minutes"},
                          "columns": ["user"]},
                 aggregate={"n": "count(*)", "total": "sum(amount)"}, outputMode="complete")
    rnd = random.Random(8)
    want, seen, lines = {}, set(), []
    for i in range(200000):
        if i > 10 and rnd.random() < 0.05:
            eid = "e%d" % rnd.randrange(i)  # a resend: same id, other values
        else:
            eid = "e%d" % i
        user, amount, t = "u%d" % rnd.randrange(20000), rnd.randrange(1000), \
            T0 + rnd.randrange(3 * 3600)
        lines.append(json.dumps({"event_id": eid, "user": user, "amount": amount,
                                 "event_time": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                             time.gmtime(t))}))
        if eid in seen:
            continue
        seen.add(eid)
        k = (iso(t - t % 600), user)
        c, s = want.get(k, (0, 0))
        want[k] = (c + 1, s + amount)
    path = str(tmp_path / "big.json")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    land(data, path)
    run(data)
    m = mounts.new(data=data)
    rows = parts(m)[0]
    assert len(want) > 100000
    # complete mode writes the groups in key order: window, then user
    assert [(r["window"]["start"], r["user"]) for r in rows] == sorted(want)
    got = {(r["window"]["start"], r["user"]): (r["n"], r["total"]) for r in rows}
    assert got == want
    op = progress(m)[0]["stateOperators"]
    assert op[0]["customMetrics"]["numDroppedDuplicateRows"] == 200000 - len(seen)
    assert op[0]["numRowsTotal"] == len(seen) and op[1]["numRowsTotal"] == len(want)


def test_unsupported_aggregate_is_refused_with_its_name(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, groupBy={"columns": ["user"]}, aggregate={"first": "min(event_id)"},
                 outputMode="update")
    land(data, events(str(tmp_path / "1.json"), [("1", "u", 1, T0)]))
    p = run(data, expect=1)
    assert "queries.q.aggregate.first: min and max of a STRING column" in p.stderr
    st = util.sluice("status", data).stdout.splitlines()[1]
    assert "error=queries.q.aggregate.first" in st, st
