"""Exactly once across crashes of `sluice run` (DESIGN.md §2, the batch
protocol; §3, fault points): killed at fault points and at random moments
over a multi-batch backlog, a final run leaves every input row in the
output exactly once, and no blob that no record names."""

import json
import os
import random
import signal
import subprocess
import time

import pytest

import util

pytestmark = pytest.mark.timeout(240)

SCHEMA = "event_id STRING, device STRING, value BIGINT, noise STRING"
FILES = 24
ROWS = 400  # a batch of 2 files makes a part over 64 KiB: a blob


def setup_backlog(tmp_path, files_n=FILES, rows=ROWS, sink=None):
    data = str(tmp_path / "data")
    os.makedirs(data)
    query = {"source": {"format": "json", "path": "dev", "schema": SCHEMA,
                        "maxFilesPerTrigger": 2}}
    if sink:
        query["sink"] = sink
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump({"queries": {"dev": query}}, f)
    src = tmp_path / "src"
    src.mkdir()
    files = []
    for i in range(files_n):
        p = src / ("b%03d.json" % i)
        with open(p, "w") as f:
            for r in range(rows):
                # a value zstd cannot squeeze: compressed parts stay blobs
                noise = "%08x" % ((r * 2654435761 + i * 40503) % (1 << 32))
                f.write(json.dumps({"event_id": "e-%03d-%04d" % (i, r), "device": "d" * 60,
                                    "value": r, "pad": "x" * 40, "noise": noise}) + "\n")
        files.append(str(p))
    p = util.sluice("land", data, *files, "--to", "dev")
    assert p.returncode == 0, p.stderr
    return data


def run_once(data, env=None, kill_after=None):
    """Runs sluice run; optionally kill -9 after kill_after seconds."""
    e = dict(os.environ)
    e.update(env or {})
    proc = subprocess.Popen([util.sluice_bin(), "run", "--available-now", data],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
    if kill_after is not None:
        time.sleep(kill_after)
        proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out.decode(), err.decode()


def check_exactly_once(mounts, data, files_n=FILES, rows=ROWS):
    rc, out, err = run_once(data)
    assert rc == 0, (out, err)
    m = mounts.new(data=data)
    seen = {}
    base = os.path.join(m.mnt, "out", "dev")
    parts = sorted(util.list_out(base))
    big_parts = 0
    for name in parts:
        path = os.path.join(base, name)
        big_parts += os.stat(path).st_size > 65536
        text = open(path, "rb").read()
        if name.endswith(".zst"):
            text = subprocess.run(["zstd", "-dc"], input=text, stdout=subprocess.PIPE,
                                  check=True, timeout=30).stdout
        for line in text.decode().splitlines():
            eid = json.loads(line)["event_id"]
            seen[eid] = seen.get(eid, 0) + 1
    want = {"e-%03d-%04d" % (i, r) for i in range(files_n) for r in range(rows)}
    assert set(seen) == want, "lost %d rows" % len(want - set(seen))
    dup = [k for k, v in seen.items() if v != 1]
    assert not dup, "duplicated: %s" % dup[:5]
    # committed parts are named by batch: no two parts of one batch id twice
    assert len({p.split("-")[1] for p in parts}) == len(parts)
    inputs = os.path.join(m.mnt, "in", "dev")
    big_inputs = sum(os.stat(os.path.join(inputs, n)).st_size > 65536
                     for n in os.listdir(inputs))
    m.unmount()
    # orphans of killed batches are gone after a start: every blob is named
    util.sluice("status", data)
    m = mounts.remount(m)
    blobs = util.count_files(os.path.join(data, "blobs"))
    assert blobs == big_parts + big_inputs, (blobs, big_parts, big_inputs)
    m.unmount()


def check_consistent(data):
    p = util.sluice("check", data)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[-1].endswith("consistent"), p.stdout


@pytest.mark.parametrize("point", ["engine.after_offsets", "engine.before_part_fsync",
                                   "engine.before_commit", "catalog.before_commit",
                                   "engine.after_commit"])
def test_fault_points_then_final_run(mounts, tmp_path, point):
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    data = setup_backlog(tmp_path)
    died = 0
    for n in (1, 2, 3):
        rc, out, err = run_once(data, env={"SLUICE_FAULT": "%s:%d" % (point, n)})
        assert rc in (0, 86), (rc, out, err)
        died += rc == 86
    assert died >= 1, "fault point %s never fired" % point
    check_exactly_once(mounts, data)
    check_consistent(data)


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_streamed_parts_survive_faults(mounts, tmp_path, compression):
    """Batches of 40,000 rows: their part is formatted and written 32,768
    rows at a time by the stage thread while the commit writes. Killed at
    its fault points, failing its writes and killed at random, a final run
    still has every row exactly once and every blob named."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    files_n, rows = 6, 20000
    data = setup_backlog(tmp_path, files_n, rows, {"format": "json",
                                                   "compression": compression})
    for env in ({"SLUICE_FAULT": "engine.before_part_fsync:1"},
                {"SLUICE_FAULT_ERR": "blob.write:2:ENOSPC"},
                {"SLUICE_FAULT_ERR": "blob.fsync:2:EIO"},
                {"SLUICE_FAULT": "catalog.before_commit:2"}):
        rc, out, err = run_once(data, env=env)
        assert rc in (1, 86), (env, rc, out, err)
    rnd = random.Random(7)
    for _ in range(4):
        run_once(data, kill_after=rnd.uniform(0.05, 0.4))
    check_exactly_once(mounts, data, files_n, rows)
    check_consistent(data)


def test_random_kill9_then_final_run(mounts, tmp_path):
    data = setup_backlog(tmp_path)
    rnd = random.Random(20261130)
    for _ in range(12):
        run_once(data, kill_after=rnd.uniform(0.0, 0.08))
    check_exactly_once(mounts, data)
    check_consistent(data)


def test_check_finds_a_missing_blob(tmp_path):
    data = setup_backlog(tmp_path)
    rc, out, err = run_once(data)
    assert rc == 0, err
    check_consistent(data)
    blobs = []
    for dirpath, _, names in os.walk(os.path.join(data, "blobs")):
        blobs += [os.path.join(dirpath, n) for n in names]
    os.unlink(sorted(blobs)[0])
    p = util.sluice("check", data)
    assert p.returncode == 1
    assert "its blob is missing" in p.stdout and "problems found" in p.stdout, p.stdout


def test_injected_enospc_on_a_part_then_recovery(mounts, tmp_path):
    """A batch that cannot write its output fails whole; the next run does it."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    data = setup_backlog(tmp_path)
    rc, out, err = run_once(data, env={"SLUICE_FAULT_ERR": "blob.fsync:1:ENOSPC"})
    assert rc == 1, (out, err)
    assert "No space left on device" in err, err
    # nothing committed, the error kept (a mount would run the query itself)
    st = util.sluice("status", data).stdout.splitlines()[1]
    assert st.startswith("dev batch=- ") and "No space left" in st, st
    check_exactly_once(mounts, data)
    check_consistent(data)


@pytest.mark.allow_stderr(r"will not land|No space")
def test_injected_write_error_poisons_only_that_file(mounts, tmp_path):
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    data = str(tmp_path / "data")
    m = mounts.new(data=data, env=dict(os.environ, SLUICE_FAULT_ERR="blob.write:2:ENOSPC"))
    names = []
    failed = []
    for i in range(4):
        name = "f%d.json" % i
        try:
            with open(m.inp(name), "wb") as f:
                f.write(b'{"x":%d}\n' % i)
            names.append(name)
        except OSError as e:
            assert e.errno == 28, e
            failed.append(name)
    assert failed == ["f1.json"], failed
    d = m.wait_landed()
    assert sorted(os.listdir(m.inp())) == sorted(names)
    assert d["filesLanded"] == 3 and d["refused"].get("ENOSPC") == 1
