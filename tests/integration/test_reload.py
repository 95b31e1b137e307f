"""Reloading sluice.json on SIGHUP without an unmount (issue 16 item 7;
DESIGN "Changes between starts"): a new query starts over what landed, a
removed one stops holding files, a refused change (or invalid JSON) keeps
the old config running and shows in the log, `sluice status` and the
metrics until a reload is taken; SIGHUP no longer unmounts; landings racing
reloads land once and reach every query that reads them exactly once; the
systemd protocol says RELOADING=1 then READY=1."""

import errno
import json
import os
import signal
import subprocess
import threading
import time

import pytest

import util
from util import write_file
from test_systemd import NotifySocket, clean_env

pytestmark = pytest.mark.timeout(90)

SCHEMA = "event_id STRING, value BIGINT"
RELOAD_TIMEOUT = 20


def config(data, queries):
    """queries: {name: (in/ path, source options, other query keys)}."""
    os.makedirs(data, exist_ok=True)
    doc = {"queries": {}}
    for name, spec in queries.items():
        path, extra = spec[0], spec[1]
        src = {"format": "json", "path": path, "schema": SCHEMA}
        src.update(extra)
        doc["queries"][name] = {"source": src}
        if len(spec) > 2:
            doc["queries"][name].update(spec[2])
    write_text(os.path.join(data, "sluice.json"), json.dumps(doc))


def write_text(path, text):
    tmp = path + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def state_file(data):
    return os.path.join(data, "config-reload")


def state_key(data):
    try:
        st = os.stat(state_file(data))
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def read_state(data):
    with open(state_file(data)) as f:
        lines = f.read().splitlines()
    return int(lines[0]), (lines[1] if len(lines) > 1 else "")


def hup(m):
    """SIGHUP, then waits until the mount recorded the reload's outcome;
    returns the refusal ("" when taken)."""
    before = state_key(m.data)
    os.kill(m.proc.pid, signal.SIGHUP)
    util.wait_for(lambda: state_key(m.data) != before, RELOAD_TIMEOUT, "the reload's outcome")
    assert m.proc.poll() is None, m.stderr()
    assert os.path.ismount(m.mnt)
    return read_state(m.data)[1]


def rows(m, query):
    base = os.path.join(m.mnt, "out", query)
    if not os.path.isdir(base):
        return []
    out = []
    for name in sorted(util.list_out(base)):
        with open(os.path.join(base, name)) as f:
            out += [json.loads(l) for l in f.read().splitlines()]
    return out


def wait_rows(m, query, n, timeout=20):
    util.wait_for(lambda: len(rows(m, query)) >= n, timeout, "%d rows in out/%s" % (n, query))
    return rows(m, query)


def row(i):
    return b'{"event_id":"e%d","value":%d}\n' % (i, i)


def metric(m, name):
    with open(m.p("status", "metrics")) as f:
        for line in f:
            if line.startswith(name + " "):
                return float(line.split()[1])
    return None


def status(data):
    p = util.sluice("status", data)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def check_consistent(data):
    p = util.sluice("check", data)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[-1].endswith("consistent"), p.stdout


# -- a new query, a removed one ------------------------------------------------

def test_sighup_adds_a_query_over_what_landed(mounts, tmp_path):
    data = str(tmp_path / "data")
    config(data, {"a": ("a", {})})
    m = mounts.new(data=data)
    os.mkdir(m.inp("a"))
    os.mkdir(m.inp("b"))
    for i in range(3):
        write_file(m.inp("b", "f%d.json" % i), row(i))
    write_file(m.inp("a", "x.json"), row(9))
    wait_rows(m, "a", 1)
    t0 = metric(m, "sluice_config_last_reload_success_timestamp_seconds")
    assert metric(m, "sluice_config_last_reload_successful") == 1

    config(data, {"a": ("a", {}), "b": ("b", {})})
    assert hup(m) == ""
    # the mount is still there, and the new query read what had landed
    got = wait_rows(m, "b", 3)
    assert sorted(r["event_id"] for r in got) == ["e0", "e1", "e2"]
    # and what lands now
    write_file(m.inp("b", "f3.json"), row(3))
    assert len(wait_rows(m, "b", 4)) == 4
    assert metric(m, "sluice_config_last_reload_success_timestamp_seconds") > t0
    assert "b batch=" in status(data)
    # an unchanged file: harmless
    assert hup(m) == ""
    write_file(m.inp("a", "y.json"), row(10))
    assert len(wait_rows(m, "a", 2)) == 2
    assert len(rows(m, "b")) == 4
    m.unmount()
    check_consistent(data)


@pytest.mark.allow_stderr(r"stopped|line 1")
def test_removed_query_stops_holding_files(mounts, tmp_path):
    data = str(tmp_path / "data")
    strict = ("s", {"mode": "FAILFAST"})
    config(data, {"keep": ("k", {}), "strict": strict})
    m = mounts.new(data=data)
    os.mkdir(m.inp("s"))
    os.mkdir(m.inp("s2"))
    write_file(m.inp("s", "bad.json"), b"not json\n")
    util.wait_for(lambda: "line 1" in status(data), 20, "strict to stop")
    # the stopped query holds its files: rm answers EBUSY
    write_file(m.inp("s", "x.json"), row(1))
    # published (indexed) a moment after the close: wait for it
    util.wait_for(lambda: "strict batch=- rows=0 backlog=1/" in status(data), 20, "x indexed")
    util.expect_errno(errno.EBUSY, os.unlink, m.inp("s", "x.json"))

    config(data, {"keep": ("k", {})})
    assert hup(m) == ""
    os.unlink(m.inp("s", "x.json"))
    os.unlink(m.inp("s", "bad.json"))
    assert sorted(os.listdir(m.inp("s"))) == []

    # the same at a start: a query removed while unmounted holds nothing
    config(data, {"keep": ("k", {}), "strict2": ("s2", {"mode": "FAILFAST"})})
    assert hup(m) == ""
    write_file(m.inp("s2", "bad.json"), b"not json\n")
    util.wait_for(lambda: "line 1" in status(data), 20, "strict2 to stop")
    util.expect_errno(errno.EBUSY, os.unlink, m.inp("s2", "bad.json"))
    m.unmount()
    config(data, {"keep": ("k", {})})
    m = mounts.remount(m)
    os.unlink(m.inp("s2", "bad.json"))
    m.unmount()
    check_consistent(data)


# -- refusals --------------------------------------------------------------------

@pytest.mark.allow_stderr(r"config reload refused")
def test_refused_change_keeps_the_old_config(mounts, tmp_path):
    data = str(tmp_path / "data")
    config(data, {"dev": ("dev", {})})
    m = mounts.new(data=data)
    os.mkdir(m.inp("dev"))
    write_file(m.inp("dev", "a.json"), row(1))
    wait_rows(m, "dev", 1)

    # the source path a checkpoint cannot follow (DESIGN "Changes between starts")
    config(data, {"dev": ("elsewhere", {})})
    refused = hup(m)
    assert "queries.dev" in refused and "path" in refused, refused
    assert any("config reload refused" in l and "path" in l for l in m.stderr().splitlines())
    out = status(data)
    assert "config reload refused: " + refused in out.splitlines(), out
    assert metric(m, "sluice_config_last_reload_successful") == 0
    p = util.sluice("status", "--json", data)
    assert json.loads(p.stdout)["configReloadRefused"] == refused
    p = util.sluice("status", "--prometheus", data)
    assert "sluice_config_last_reload_successful 0" in p.stdout.splitlines()
    # the old config runs on
    write_file(m.inp("dev", "b.json"), row(2))
    assert len(wait_rows(m, "dev", 2)) == 2

    # fixed: taken, the refusal clears
    config(data, {"dev": ("dev", {}, {"trigger": {"processingTime": "1 second"}})})
    assert hup(m) == ""
    assert "config reload refused" not in status(data)
    assert metric(m, "sluice_config_last_reload_successful") == 1
    write_file(m.inp("dev", "c.json"), row(3))
    assert len(wait_rows(m, "dev", 3)) == 3
    m.unmount()


@pytest.mark.allow_stderr(r"config reload refused")
def test_invalid_json_keeps_the_old_config(mounts, tmp_path):
    data = str(tmp_path / "data")
    config(data, {"dev": ("dev", {})})
    m = mounts.new(data=data)
    os.mkdir(m.inp("dev"))
    write_text(os.path.join(data, "sluice.json"), '{"queries": {')
    refused = hup(m)
    assert refused.startswith("invalid config: "), refused
    assert any("config reload refused" in l and "invalid config" in l
               for l in m.stderr().splitlines())
    p = util.sluice("status", data)
    assert p.returncode == 0, p.stderr
    assert "config reload refused: " + refused in p.stdout.splitlines(), p.stdout
    assert metric(m, "sluice_config_last_reload_successful") == 0
    write_file(m.inp("dev", "a.json"), row(1))
    wait_rows(m, "dev", 1)

    config(data, {"dev": ("dev", {})})
    assert hup(m) == ""
    assert "config reload refused" not in status(data)
    assert metric(m, "sluice_config_last_reload_successful") == 1
    m.unmount()
    # a new mount starts clean
    m = mounts.remount(m)
    assert read_state(data)[1] == ""
    m.unmount()


def test_sighup_before_and_between_does_not_unmount(mounts, tmp_path):
    m = mounts.new()
    for _ in range(5):
        os.kill(m.proc.pid, signal.SIGHUP)
    time.sleep(0.5)
    assert m.proc.poll() is None and os.path.ismount(m.mnt), m.stderr()
    m.unmount()


# -- landings racing reloads ------------------------------------------------------

@pytest.mark.timeout(150)
def test_landings_during_repeated_reloads(mounts, tmp_path):
    """q1 and q2 stay (q2 changes its caps), q3 comes and goes: every file
    lands, and each query's output holds each row exactly once."""
    data = str(tmp_path / "data")
    a = {"q1": ("in", {}), "q2": ("in", {"maxFilesPerTrigger": 1})}
    b = {"q1": ("in", {}), "q2": ("in", {"maxFilesPerTrigger": 3}), "q3": ("in", {})}
    config(data, b)
    m = mounts.new(data=data)
    os.mkdir(m.inp("in"))
    src = tmp_path / "src"
    src.mkdir()
    n = 150
    for i in range(n):
        (src / ("f%03d.json" % i)).write_bytes(row(i))
    errors = []

    def writer():
        try:
            for i in range(n):
                subprocess.run(["cp", str(src / ("f%03d.json" % i)), m.inp("in")],
                               check=True, timeout=30)
        except Exception as e:  # reported below
            errors.append(e)
    t = threading.Thread(target=writer)
    t.start()
    k = 0
    while t.is_alive():
        config(data, a if k % 2 == 0 else b)
        assert hup(m) == ""
        k += 1
    t.join()
    assert not errors, errors
    assert k >= 2, "the writer finished before two reloads"
    print("reloads during the writes:", k)
    config(data, b)
    assert hup(m) == ""
    assert util.read_landing(m.mnt)["filesLanded"] == n
    want = sorted("e%d" % i for i in range(n))
    for q in ("q1", "q2", "q3"):
        got = wait_rows(m, q, n, timeout=60)
        assert sorted(r["event_id"] for r in got) == want, q
    m.unmount()
    check_consistent(data)


# -- systemd ---------------------------------------------------------------------

def test_notify_reloading_then_ready(mounts, tmp_path):
    data = str(tmp_path / "data")
    config(data, {"dev": ("dev", {})})
    ns = NotifySocket(tmp_path / "notify.sock")
    try:
        m = mounts.new(data=data, start=False, env=clean_env(NOTIFY_SOCKET=str(ns.sock.getsockname())))
        m.start()
        ns.wait("READY=1")
        config(data, {"dev": ("dev", {}), "more": ("more", {})})
        assert hup(m) == ""
        ns.wait("READY=1", count=2)
        texts = [l for _, _, l in ns.lines()]
        i = texts.index("RELOADING=1")
        assert texts[i + 1].startswith("MONOTONIC_USEC="), texts
        assert texts.index("READY=1", i) > i
        assert all(pid == m.proc.pid for pid in (p for _, p, _ in ns.lines()))
        m.unmount()
    finally:
        ns.close()
