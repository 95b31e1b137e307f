"""Queries of sluice.json as landing sees them (DESIGN.md §1, "Which files a
query reads", unlink row of the landing table, `sluice status`): a landed
file is matched into each query's index at landing; a file a query still
needs answers unlink with EBUSY; files no query matches stay deletable."""

import errno
import json
import os
import time

import pytest

import util
from util import write_file

pytestmark = pytest.mark.timeout(60)

SCHEMA = "event_id STRING, device STRING, value BIGINT"


def config(data, queries, trigger=None):
    os.makedirs(data, exist_ok=True)
    doc = {"queries": {name: {"source": {"format": "json", "path": path, "schema": SCHEMA}}
                       for name, path in queries.items()}}
    for q in doc["queries"].values():
        if trigger:
            q["trigger"] = trigger
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump(doc, f)


def status_lines(data):
    p = util.sluice("status", data)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def query_line(data, name):
    lines = [l for l in status_lines(data) if l.startswith(name + " ")]
    assert len(lines) == 1, status_lines(data)
    return lines[0]


@pytest.mark.allow_stderr(r"resource busy")
def test_needed_file_is_busy_others_deletable(mounts, tmp_path):
    data = str(tmp_path / "data")
    # the query's first trigger runs at mount time; the next is an hour away,
    # so what lands meanwhile stays in its backlog
    config(data, {"dev": "dev"}, trigger={"processingTime": "1 hour"})
    m = mounts.new(data=data)
    time.sleep(0.2)
    os.makedirs(m.inp("dev", "date=2026-10-04"))
    os.makedirs(m.inp("other"))
    write_file(m.inp("dev", "a.json"), b'{"event_id":"1"}\n')
    write_file(m.inp("dev", "date=2026-10-04", "b.json"), b'{"event_id":"2"}\n')
    write_file(m.inp("dev", "_SUCCESS"), b"")
    write_file(m.inp("other", "c.json"), b'{"event_id":"3"}\n')
    before = m.wait_landed()
    assert before["filesLanded"] == 4

    # the query has neither committed nor skipped these: EBUSY, counted
    util.expect_errno(errno.EBUSY, os.unlink, m.inp("dev", "a.json"))
    util.expect_errno(errno.EBUSY, os.unlink, m.inp("dev", "date=2026-10-04", "b.json"))
    assert m.landing()["refused"].get("EBUSY") == 2
    assert os.path.exists(m.inp("dev", "a.json"))
    # no query reads these: always deletable
    os.unlink(m.inp("other", "c.json"))
    os.unlink(m.inp("dev", "_SUCCESS"))
    assert not os.path.exists(m.inp("other", "c.json"))

    line = query_line(data, "dev")
    assert " backlog=2/34 " in line, line  # a.json and b.json, 17 bytes each
    assert line.startswith("dev batch=- ")


def test_query_added_later_indexes_what_landed(mounts, tmp_path):
    data = str(tmp_path / "data")
    m = mounts.new(data=data)
    os.makedirs(m.inp("logs", "web"))
    for i in range(5):
        write_file(m.inp("logs", "web", "w%d.json" % i), b'{"event_id":"%d"}\n' % i)
    write_file(m.inp("logs", "web", ".hidden.tmp"), b"{}\n")  # in flight, never lands
    os.unlink(m.inp("logs", "web", ".hidden.tmp"))
    m.wait_landed()
    m.unmount()

    # two queries new to the catalog index what landed before them
    config(data, {"web": "logs/web", "all": "logs/*"})
    p = util.sluice("status", data)
    assert "web batch=- rows=0 backlog=0/0" in p.stdout  # not started yet
    p = util.sluice("run", "--available-now", data)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.splitlines()) == ["all: 1 batches, 5 rows", "web: 1 batches, 5 rows"]
    m2 = mounts.remount(m)
    assert util.list_out(os.path.join(m2.mnt, "out", "web")) == ["part-00000-00000.jsonl"]


def test_land_command_indexes_and_status_of_new_data_dir(tmp_path):
    data = str(tmp_path / "data")
    config(data, {"dev": "dev"})
    # a data dir holding only sluice.json is new: status shows the query, empty
    assert status_lines(data) == ["landing files=0 bytes=0 in_flight=0 refused=-",
                                  "dev batch=- rows=0 backlog=0/0 watermark=- error=-"]
    src = tmp_path / "b.json"
    src.write_bytes(b'{"event_id":"x"}\n')
    p = util.sluice("land", data, str(src), "--to", "dev")
    assert p.returncode == 0, p.stderr
    assert " backlog=1/17 " in query_line(data, "dev")


def test_invalid_config_refused_by_status_and_mount(mounts, tmp_path):
    data = str(tmp_path / "data")
    os.makedirs(data)
    with open(os.path.join(data, "sluice.json"), "w") as f:
        f.write('{"queries": {"q": {"source": {"format": "json", "path": "x", '
                '"schema": "a NOTATYPE"}}}}')
    p = util.sluice("status", data)
    assert p.returncode == 4
    assert "queries.q.source.schema" in util.one_line(p.stderr)
