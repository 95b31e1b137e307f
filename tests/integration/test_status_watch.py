"""sluice status --json and --watch (issue 16 item 3): one machine-readable
snapshot that says what the plain lines say; a live view refreshed each
second, with a progress line (files and bytes left, rate, ETA) while a query
drains a backlog, plain lines without escape codes when stdout is not a
terminal and a redrawn screen when it is."""

import json
import os
import pty
import select
import shutil
import signal
import subprocess
import time

import pytest

import util

pytestmark = pytest.mark.timeout(120)

SCHEMA = "id BIGINT"


def write_config(data, queries):
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump({"queries": queries}, f)


def slow_query(**extra):
    """One file per batch, a batch every 700 ms: a backlog drains visibly."""
    q = {"source": {"format": "json", "path": "ev", "schema": SCHEMA, "maxFilesPerTrigger": 1},
         "trigger": {"processingTime": "700 milliseconds"}}
    q.update(extra)
    return q


def put(tmp_path, name, n):
    p = tmp_path / name
    p.write_text("".join('{"id": %d}\n' % i for i in range(n)))
    return str(p)


def test_json_says_what_the_plain_lines_say(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {
        "a": {"source": {"format": "json", "path": "ev", "schema": "id BIGINT, t TIMESTAMP"},
              "watermark": {"column": "t", "delay": "1 minute"}},
        "b": {"source": {"format": "json", "path": "ev", "schema": SCHEMA},
              "sink": {"format": "console"}},
        "never": {"source": {"format": "json", "path": "other", "schema": SCHEMA}}})
    p = tmp_path / "e.json"
    p.write_text('{"id": 1, "t": "2026-10-04T12:00:00Z"}\n{"id": 2, "t": "2026-10-04T12:05:00Z"}\n')
    assert util.sluice("land", data, str(p), "--to", "ev").returncode == 0
    assert util.sluice("land", data, str(p), "--to", "other").returncode == 0
    run = util.sluice("run", "--available-now", data, timeout=60)
    assert run.returncode == 0, run.stderr
    # a file for "never" only: its backlog
    p2 = tmp_path / "f.json"
    p2.write_text('{"id": 3}\n')
    assert util.sluice("land", data, str(p2), "--to", "other").returncode == 0
    plain = util.sluice("status", data).stdout.splitlines()
    j = json.loads(util.sluice("status", "--json", data).stdout)
    assert plain[0] == "landing files=%d bytes=%d in_flight=%d refused=-" % (
        j["landing"]["filesLanded"], j["landing"]["bytesLanded"], j["landing"]["filesInFlight"])
    assert j["landing"]["filesLanded"] == 3 and j["landing"]["refused"] == {}
    q = {x["name"]: x for x in j["queries"]}
    assert [x["name"] for x in j["queries"]] == ["a", "b", "never"]
    assert q["a"]["batch"] == 0 and q["a"]["rows"] == 2 and q["a"]["lastError"] is None
    assert q["a"]["watermark"] == "2026-10-04T12:04:00.000Z"
    assert (q["a"]["sink"], q["a"]["guarantee"]) == ("json", "exactly-once")
    assert (q["b"]["sink"], q["b"]["guarantee"], q["b"]["watermark"]) == \
        ("console", "at-least-once", None)
    assert q["never"]["batch"] == 0 and q["never"]["backlog"]["files"] == 1
    assert "never batch=0 rows=2 backlog=1/%d watermark=- error=-" % p2.stat().st_size in plain
    assert q["never"]["rows"] == 2 and q["never"]["backlog"]["bytes"] == p2.stat().st_size
    # a new data dir: zeros, and queries that never ran
    fresh = str(tmp_path / "fresh")
    write_config(fresh, {"z": {"source": {"format": "json", "path": "ev", "schema": SCHEMA}}})
    j = json.loads(util.sluice("status", "--json", fresh).stdout)
    assert j["landing"]["filesLanded"] == 0
    assert j["queries"][0]["batch"] is None and j["queries"][0]["backlog"]["files"] == 0


def watch(data, args=(), stdout=subprocess.PIPE):
    return subprocess.Popen([util.sluice_bin(), "status", "--watch"] + list(args) + [data],
                            stdout=stdout, stderr=subprocess.PIPE)


def stop(p):
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=10)
    assert p.returncode == 0, (p.returncode, err)
    return out


def test_watch_plain_lines_show_a_backlog_drain(mounts, tmp_path):
    """Not a terminal: a timestamp line and the status lines each second, no
    escape code; while the slow query drains 8 files, `left=` goes down,
    `done=` up, and a rate and ETA appear; SIGINT ends it with 0."""
    data = str(tmp_path / "data")
    write_config(data, {"slow": slow_query()})
    m = mounts.new(data=data)
    os.mkdir(m.inp("ev"))
    w = watch(data)
    try:
        for i in range(8):
            shutil.copy(put(tmp_path, "f%d.json" % i, 3), m.inp("ev", "f%d.json" % i))
        util.wait_for(lambda: "slow batch=7 " in util.sluice("status", data).stdout, 60,
                      "the backlog to drain")
        time.sleep(1.5)  # one more refresh with nothing left
    finally:
        out = stop(w).decode()
    m.unmount()
    assert "\x1b" not in out
    stamps = [l for l in out.splitlines() if l.startswith("at ")]
    assert len(stamps) >= 3
    drains = [l for l in out.splitlines() if l.startswith("slow left=")]
    assert drains, out
    left = [int(l.split()[1].split("=")[1].split("/")[0]) for l in drains]
    done = [int(l.split()[2].split("=")[1].rstrip("%")) for l in drains]
    assert max(left) >= 2 and left[-1] < max(left)
    assert done[-1] > done[0] or done[-1] > 0
    assert any(float(l.split()[3].split("=")[1]) > 0 and l.split()[4] != "eta=-"
               for l in drains), drains
    last = out.split("at ")[-1]
    assert "slow batch=7 rows=3 backlog=0/0" in last and "slow left=" not in last


def test_watch_on_a_terminal_redraws_a_screen(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"slow": slow_query()})
    m = mounts.new(data=data)
    os.mkdir(m.inp("ev"))
    for i in range(6):
        shutil.copy(put(tmp_path, "f%d.json" % i, 2), m.inp("ev", "f%d.json" % i))
    master, slave = pty.openpty()
    w = subprocess.Popen([util.sluice_bin(), "status", "--watch", data], stdout=slave,
                         stderr=subprocess.PIPE)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 4
    try:
        while time.monotonic() < deadline:
            r, _, _ = select.select([master], [], [], 0.2)
            if r:
                try:
                    out += os.read(master, 65536)
                except OSError:
                    break
    finally:
        w.send_signal(signal.SIGINT)
        w.wait(timeout=10)
        os.close(master)
        m.unmount()
    assert w.returncode == 0
    text = out.decode(errors="replace")
    assert text.count("\x1b[H\x1b[J") >= 2, text
    assert "(Ctrl-C quits)" in text and "slow batch=" in text
    assert "files/s  ETA" in text and "[" in text and "left" in text, text


def test_watch_json_lines_and_misuse(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"q": {"source": {"format": "json", "path": "ev", "schema": SCHEMA}}})
    w = watch(data, ["--json"])
    time.sleep(2.3)
    lines = stop(w).decode().splitlines()
    assert len(lines) >= 2
    for l in lines:
        assert json.loads(l)["queries"][0]["name"] == "q"
    for args in (["--watch", "--prometheus"], ["--json", "--prometheus"]):
        p = util.sluice("status", *args, data)
        assert p.returncode == 2 and "--prometheus goes with neither" in p.stderr, p.stderr
