"""The exec sink (CONNECTORS §8, "Commands and secrets"): Spark's
foreachBatch as a command. Rows on stdin exactly as the JSON sink writes them
(or CSV with a header), SLUICE_QUERY/SLUICE_BATCH_ID/SLUICE_OUTPUT_MODE in
the environment, exit 0 commits; a failing, killed or timed-out command fails
the batch with a clear error and the same batch runs again; after a crash
too, so that a command deduplicating by batch id ends with each row exactly
once. Each rule for children has a test: sluice.json's ownership, closed
descriptors, own process group, death signal, no service-manager variables."""

import json
import os
import signal
import shutil
import time

import pytest

import util

pytestmark = pytest.mark.timeout(120)

SCHEMA = "user STRING, n BIGINT"
PY = "/usr/bin/python3"


def write_config(data, queries, mode=0o644):
    os.makedirs(data, exist_ok=True)
    path = os.path.join(data, "sluice.json")
    with open(path, "w") as f:
        json.dump({"queries": queries}, f)
    os.chmod(path, mode)


def query(command, **sink):
    s = {"format": "exec", "command": command}
    s.update(sink)
    return {"source": {"format": "json", "path": "ev", "schema": SCHEMA, "maxFilesPerTrigger": 1},
            "sink": s}


def land(tmp_path, data, name, rows):
    p = tmp_path / name
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = util.sluice("land", data, str(p), "--to", "ev")
    assert r.returncode == 0, r.stderr


def run(data, expect=0, env=None):
    p = util.sluice("run", "--available-now", data, timeout=90, env=env)
    assert p.returncode == expect, (p.returncode, p.stdout, p.stderr)
    return p


def last_error(data):
    p = util.sluice("status", data)
    return p.stdout


# A command that records its batch's environment and stdin in files under
# OUT, named by batch id: what it saw, for the tests to compare.
RECORD = r"""
import json, os, sys
out = sys.argv[1]
b = os.environ["SLUICE_BATCH_ID"]
data = sys.stdin.buffer.read()
with open(os.path.join(out, "stdin-" + b), "wb") as f:
    f.write(data)
env = {k: os.environ.get(k) for k in ("SLUICE_QUERY", "SLUICE_BATCH_ID", "SLUICE_OUTPUT_MODE",
                                      "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")}
import ctypes
libc = ctypes.CDLL(None)
sig = ctypes.c_int()
libc.prctl(2, ctypes.byref(sig))  # PR_GET_PDEATHSIG
env["pdeathsig"] = sig.value
env["pgid_is_pid"] = os.getpgid(0) == os.getpid()
env["cwd"] = os.getcwd()
env["fds"] = sorted(int(x) for x in os.listdir("/proc/self/fd"))  # 3: the listing's own
with open(os.path.join(out, "env-" + b), "w") as f:
    json.dump(env, f)
"""


def test_rows_env_and_child_rules(tmp_path):
    out = tmp_path / "seen"
    out.mkdir()
    data = str(tmp_path / "data")
    write_config(data, {"q": query([PY, "-c", RECORD, str(out)])})
    land(tmp_path, data, "a.json", [{"user": "a", "n": 1}, {"user": "é\"\\", "n": None}])
    env = dict(os.environ, NOTIFY_SOCKET="/nonexistent", WATCHDOG_USEC="1000000",
               WATCHDOG_PID="1")
    p = run(data, env=env)
    assert "q: 1 batches, 2 rows" in p.stdout
    # the JSON sink's bytes, as sl_sink_format writes them (a null left out)
    assert (out / "stdin-0").read_bytes() == \
        '{"user":"a","n":1}\n{"user":"é\\"\\\\"}\n'.encode()
    e = json.loads((out / "env-0").read_text())
    assert (e["SLUICE_QUERY"], e["SLUICE_BATCH_ID"], e["SLUICE_OUTPUT_MODE"]) == \
        ("q", "0", "append")
    assert e["NOTIFY_SOCKET"] is None and e["WATCHDOG_USEC"] is None and e["WATCHDOG_PID"] is None
    assert e["pdeathsig"] == signal.SIGKILL
    assert e["pgid_is_pid"] is True  # the command leads a process group of its own
    assert e["cwd"] == os.path.join(os.path.realpath(data), "exec", "q")
    assert e["fds"] == [0, 1, 2, 3], e["fds"]  # nothing of sluice's
    # the data dir stays one sluice recognises, with what the command left in exec/q
    run(data)


def test_own_process_group(tmp_path):
    out = tmp_path / "pg"
    data = str(tmp_path / "data")
    write_config(data, {"q": query([PY, "-c", "import os,sys; open(sys.argv[1],'w').write("
                                    "str(os.getpgid(0)==os.getpid()) + ' ' + "
                                    "str(os.getpgid(0)!=os.getpgid(os.getppid())))",
                                    str(out)])})
    land(tmp_path, data, "a.json", [{"user": "a", "n": 1}])
    run(data)
    assert out.read_text() == "True True"


def test_csv_input_and_output_modes(tmp_path):
    out = tmp_path / "seen"
    out.mkdir()
    data = str(tmp_path / "data")
    q = query([PY, "-c", RECORD, str(out)], input="csv")
    q["groupBy"] = {"columns": ["user"]}
    q["aggregate"] = {"total": "sum(n)"}
    q["outputMode"] = "complete"
    write_config(data, {"q": q})
    land(tmp_path, data, "a.json", [{"user": "a", "n": 1}, {"user": "b,c", "n": 2},
                                    {"user": "a", "n": 3}])
    run(data)
    assert (out / "stdin-0").read_text() == 'user,total\na,4\n"b,c",2\n'
    assert json.loads((out / "env-0").read_text())["SLUICE_OUTPUT_MODE"] == "complete"


def test_no_rows_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    data = str(tmp_path / "data")
    write_config(data, {"q": {
        "source": {"format": "json", "path": "ev", "schema": SCHEMA, "mode": "DROPMALFORMED"},
        "sink": {"format": "exec", "command": ["touch", str(marker)]}}})
    p = tmp_path / "bad.json"
    p.write_text('{"user": 1, "n": "x"}\n')
    util.sluice("land", data, str(p), "--to", "ev")
    out = run(data)
    assert "q: 1 batches" in out.stdout
    assert not marker.exists()


FLAKY = r"""
import os, sys
flag, log = sys.argv[1], sys.argv[2]
rows = sys.stdin.read()
with open(log, "a") as f:
    f.write("%s %d\n" % (os.environ["SLUICE_BATCH_ID"], rows.count("\n")))
if os.path.exists(flag):
    mode = open(flag).read()
    if mode == "signal":
        os.kill(os.getpid(), 9)
    print("the warehouse is down", file=sys.stderr)
    print("retry later", file=sys.stderr)
    sys.exit(3)
"""


@pytest.mark.parametrize("how,msg", [
    ("exit", "exec: '%s' exited with status 3: retry later" % PY),
    ("signal", "exec: '%s' killed by signal 9 (Killed)" % PY),
])
def test_failure_then_the_same_batch_again(tmp_path, how, msg):
    """A failing command fails the batch: sluice run exits 1, lastError names
    the status and the last stderr line, nothing commits; the next run gives
    the same batch id the same rows, and a success commits it."""
    flag, log = tmp_path / "flag", tmp_path / "log"
    flag.write_text(how)
    data = str(tmp_path / "data")
    write_config(data, {"q": query([PY, "-c", FLAKY, str(flag), str(log)])})
    land(tmp_path, data, "a.json", [{"user": "a", "n": 1}, {"user": "b", "n": 2}])
    p = run(data, expect=1)
    assert msg in p.stderr, p.stderr
    assert "batch 0: " + msg in last_error(data)
    assert "q batch=-" in last_error(data)
    flag.unlink()
    run(data)
    assert log.read_text() == "0 2\n0 2\n"
    st = last_error(data)
    assert "q batch=0" in st and "error=-" in st, st


def test_a_missing_program_says_so(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"q": query(["no-such-program-here", "x"])})
    land(tmp_path, data, "a.json", [{"user": "a", "n": 1}])
    p = run(data, expect=1)
    assert ("exec: 'no-such-program-here' exited with status 127: sluice: cannot run the "
            "command: not found") in p.stderr, p.stderr


def test_timeout_kills_the_group(tmp_path):
    """A command past its timeout gets SIGTERM, then SIGKILL 2 s later, with
    everything it started (its process group)."""
    pids = tmp_path / "pids"
    data = str(tmp_path / "data")
    script = ("trap '' TERM; sleep 60 & echo $! > %s; echo started >&2; wait" % pids)
    write_config(data, {"q": query(["sh", "-c", script], timeout="1 second")})
    land(tmp_path, data, "a.json", [{"user": "a", "n": 1}])
    t0 = time.monotonic()
    p = run(data, expect=1)
    took = time.monotonic() - t0
    assert "exec: 'sh' timed out after 1 s: started" in p.stderr, p.stderr
    assert took < 30
    grandchild = int(pids.read_text())
    util.wait_for(lambda: not os.path.exists("/proc/%d" % grandchild) or
                  open("/proc/%d/stat" % grandchild).read().split()[2] == "Z",
                  10, "the command's background child to be killed")


DEDUP = r"""
import os, sys
store = sys.argv[1]
b = os.environ["SLUICE_BATCH_ID"]
rows = sys.stdin.read()
done = os.path.join(store, "done-" + b)
if os.path.exists(done):
    sys.exit(0)  # this batch id was delivered: a replay
tmp = os.path.join(store, ".rows-" + b)
with open(tmp, "w") as f:
    f.write(rows)
    f.flush()
    os.fsync(f.fileno())
os.rename(tmp, os.path.join(store, "rows-" + b))
open(done, "w").close()
"""


def test_dedup_by_batch_id_is_exactly_once_across_crashes(tmp_path):
    """Killed at each step of a batch (fault points: before and after the
    commit, after the offsets), runs again and again: a command that skips
    batch ids it has delivered ends with every row once."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    store = tmp_path / "store"
    store.mkdir()
    data = str(tmp_path / "data")
    write_config(data, {"q": query([PY, "-c", DEDUP, str(store)])})
    for i in range(6):
        land(tmp_path, data, "f%d.json" % i, [{"user": "u%d" % i, "n": k} for k in range(3)])
    died = 0
    for point in ("engine.before_commit:1", "engine.after_commit:1", "engine.after_offsets:1",
                  "engine.before_commit:2", "catalog.after_commit:1"):
        p = util.sluice("run", "--available-now", data, timeout=90,
                        env=dict(os.environ, SLUICE_FAULT=point))
        assert p.returncode in (0, 86), (point, p.returncode, p.stderr)
        died += p.returncode == 86
    run(data)
    assert died >= 3
    got = []
    for name in sorted(os.listdir(store)):
        if name.startswith("rows-"):
            got += [json.loads(l) for l in (store / name).read_text().splitlines()]
    want = [{"user": "u%d" % i, "n": k} for i in range(6) for k in range(3)]
    assert sorted(map(json.dumps, got)) == sorted(map(json.dumps, want))
    assert len({n for n in os.listdir(store) if n.startswith("done-")}) == 6


def test_mount_retries_then_delivers(mounts, tmp_path):
    """In a mount a failing command is retried with backoff, the same rows
    each time, and delivered once it works; an unmount stops a running one."""
    flag, log = tmp_path / "flag", tmp_path / "log"
    flag.write_text("exit")
    data = str(tmp_path / "data")
    write_config(data, {"q": query([PY, "-c", FLAKY, str(flag), str(log)])})
    m = mounts.new(data=data)
    m.allow(r"retrying in|retry later|the warehouse is down")
    os.mkdir(m.inp("ev"))
    src = tmp_path / "a.json"
    src.write_text('{"user":"a","n":1}\n')
    shutil.copy(str(src), m.inp("ev", "a.json"))
    util.wait_for(lambda: log.exists() and len(log.read_text().splitlines()) >= 2, 30,
                  "two attempts")
    with open(os.path.join(m.mnt, "status", "q.json")) as f:
        assert "exited with status 3: retry later" in json.load(f)["lastError"]
    flag.unlink()
    util.wait_for(lambda: "q batch=0" in util.sluice("status", data).stdout, 30,
                  "the batch committed")
    lines = log.read_text().splitlines()
    assert len(lines) >= 3 and set(lines) == {"0 1"}, lines
    m.unmount()


def test_unmount_stops_a_running_command(mounts, tmp_path):
    started = tmp_path / "started"
    data = str(tmp_path / "data")
    write_config(data, {"q": query(["sh", "-c", "touch %s; sleep 60" % started])})
    m = mounts.new(data=data)
    os.mkdir(m.inp("ev"))
    src = tmp_path / "a.json"
    src.write_text('{"user":"a","n":1}\n')
    shutil.copy(str(src), m.inp("ev", "a.json"))
    util.wait_for(lambda: started.exists(), 20, "the command to start")
    t0 = time.monotonic()
    m.unmount()
    assert time.monotonic() - t0 < 12
    st = util.sluice("status", data).stdout
    assert "q batch=-" in st, st  # not committed: it runs again at the next start


@pytest.mark.parametrize("mode,why", [(0o664, "writable by its group"),
                                      (0o646, "writable by others")])
def test_a_command_needs_a_private_config(tmp_path, mode, why):
    data = str(tmp_path / "data")
    write_config(data, {"q": query(["true"])}, mode=mode)
    p = util.sluice("run", "--available-now", data, timeout=30)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert "queries.q.sink.command:" in p.stderr and why in p.stderr, p.stderr
    assert "chmod go-w" in p.stderr


def test_a_command_needs_a_config_of_its_own_user(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to chown")
    data = str(tmp_path / "data")
    write_config(data, {"q": query(["true"])})
    os.chown(os.path.join(data, "sluice.json"), 65534, 65534)
    p = util.sluice("run", "--available-now", data, timeout=30)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert "owned by uid 65534, not by uid 0" in p.stderr, p.stderr


def test_command_change_is_refused(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"q": query(["true"])})
    land(tmp_path, data, "a.json", [{"user": "a", "n": 1}])
    run(data)
    write_config(data, {"q": query(["true", "x"])})
    p = util.sluice("run", "--available-now", data, timeout=30)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert "queries.q.sink.command: changed since the checkpoint was made" in p.stderr, p.stderr


@pytest.mark.parametrize("sink,msg", [
    ({"format": "exec"}, "queries.q.sink.command: required"),
    ({"format": "exec", "command": []}, "queries.q.sink.command: expected an array of words"),
    ({"format": "exec", "command": ["x", ""]}, "queries.q.sink.command[1]: expected a non-empty"),
    ({"format": "exec", "command": ["x"], "partitionBy": ["user"]},
     "queries.q.sink.partitionBy: not an option of the exec sink"),
    ({"format": "exec", "command": ["x"], "input": "xml"}, "queries.q.sink.input"),
    ({"format": "exec", "command": ["x"], "timeout": "0 seconds"},
     "queries.q.sink.timeout: expected a positive duration"),
    ({"format": "json", "command": ["x"]}, "queries.q.sink.command: only for the exec format"),
])
def test_option_errors_name_the_field(tmp_path, sink, msg):
    data = str(tmp_path / "data")
    write_config(data, {"q": {"source": {"format": "json", "path": "ev", "schema": SCHEMA},
                              "sink": sink}})
    p = util.sluice("run", "--available-now", data, timeout=30)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert msg in p.stderr, p.stderr
