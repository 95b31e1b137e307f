"""The engine inside a mount (DESIGN.md §1, triggers and failures): with no
trigger a landing wakes the query and its batch commits; a FAILFAST query
stops with its lastError while landing and the other queries go on."""

import json
import os
import time

import pytest

import util
from util import write_file

pytestmark = pytest.mark.timeout(60)

SCHEMA = "event_id STRING, value BIGINT"


def config(data, queries):
    os.makedirs(data, exist_ok=True)
    doc = {"queries": {}}
    for name, (path, extra) in queries.items():
        src = {"format": "json", "path": path, "schema": SCHEMA}
        src.update(extra)
        doc["queries"][name] = {"source": src}
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump(doc, f)


def wait_parts(m, query, n, timeout=10):
    base = os.path.join(m.mnt, "out", query)

    def enough():
        return os.path.isdir(base) and len(util.list_out(base)) >= n
    util.wait_for(enough, timeout, "%d parts in out/%s" % (n, query))
    return sorted(util.list_out(base))


def rows(m, query):
    base = os.path.join(m.mnt, "out", query)
    out = []
    for name in sorted(util.list_out(base)):
        out += [json.loads(l) for l in open(os.path.join(base, name)).read().splitlines()]
    return out


def status_line(data, name):
    return [l for l in util.sluice("status", data).stdout.splitlines()
            if l.startswith(name + " ")][0]


def test_landing_wakes_the_query(mounts, tmp_path):
    data = str(tmp_path / "data")
    config(data, {"dev": ("dev", {})})
    m = mounts.new(data=data)
    os.mkdir(m.inp("dev"))
    write_file(m.inp("dev", "a.json"), b'{"event_id":"a","value":1}\n')
    assert wait_parts(m, "dev", 1) == ["part-00000-00000.jsonl"]
    write_file(m.inp("dev", "b.json"), b'{"event_id":"b","value":2}\n')
    assert wait_parts(m, "dev", 2) == ["part-00000-00000.jsonl", "part-00001-00000.jsonl"]
    assert [r["event_id"] for r in rows(m, "dev")] == ["a", "b"]
    # committed: the query no longer holds the files
    os.unlink(m.inp("dev", "a.json"))
    assert status_line(data, "dev") == "dev batch=1 rows=1 backlog=0/0 watermark=- error=-"

    # across an unmount, batch ids go on
    m.unmount()
    m = mounts.remount(m)
    write_file(m.inp("dev", "c.json"), b'{"event_id":"c","value":3}\n')
    assert wait_parts(m, "dev", 3)[-1] == "part-00002-00000.jsonl"


@pytest.mark.allow_stderr(r"stopped|line 1")
def test_failfast_query_stops_others_go_on(mounts, tmp_path):
    data = str(tmp_path / "data")
    config(data, {"strict": ("strict", {"mode": "FAILFAST"}), "easy": ("easy", {})})
    m = mounts.new(data=data)
    os.mkdir(m.inp("strict"))
    os.mkdir(m.inp("easy"))
    write_file(m.inp("strict", "bad.json"), b'not json\n')
    util.wait_for(lambda: "error=-" not in status_line(data, "strict"), 10,
                  "the strict query to stop")
    line = status_line(data, "strict")
    assert "in/strict/bad.json" in line and "line 1" in line, line
    assert " batch=- " in line
    # landing goes on, and so does the other query
    write_file(m.inp("easy", "ok.json"), b'{"event_id":"ok","value":1}\n')
    assert wait_parts(m, "easy", 1) == ["part-00000-00000.jsonl"]
    write_file(m.inp("strict", "later.json"), b'{"event_id":"x","value":1}\n')
    m.wait_landed()
    time.sleep(0.3)
    assert not os.path.exists(os.path.join(m.mnt, "out", "strict"))
    # the way out: a change the checkpoint survives, and a remount
    m.unmount()
    config(data, {"strict": ("strict", {"mode": "PERMISSIVE"}), "easy": ("easy", {})})
    m = mounts.remount(m)
    # batch 0 re-runs over its logged file alone; later.json is batch 1
    assert wait_parts(m, "strict", 2) == ["part-00000-00000.jsonl", "part-00001-00000.jsonl"]
    assert [r.get("event_id") for r in rows(m, "strict")] == [None, "x"]
