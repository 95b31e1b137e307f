"""The `process` source (CONNECTORS §5): custom sources in any language through
a line protocol, and contrib/python/sluice_source.py, pyspark's names over it.

The seed's LedgerStreamReader (tests/integration/fixtures/ledger_source.py,
verbatim but for its import line) runs against a fake ledger service (a local
HTTP server started here), with kill -9 of sluice and of the child at seeded
random points: every ledger row comes out exactly once, in order. Programs
that crash, hang, answer garbage or errors fail the batch with a lastError
naming the command, and nothing of the batch commits. Protocol details are
checked with small programs written here that log what sluice asked."""

import http.server
import json
import os
import random
import signal
import subprocess
import threading
import time
import urllib.parse

import pytest

import util

pytestmark = pytest.mark.timeout(300)

PY = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = os.path.join(HERE, "..", "..", "contrib", "python", "sluice_source.py")
LEDGER = os.path.join(HERE, "fixtures", "ledger_source.py")
SCHEMA = "seq BIGINT, account STRING, amount BIGINT"


def ledger_row(i):
    return {"seq": i, "account": "acct-%d" % (i % 7), "amount": i * 3 - 1000}


class Ledger:
    """A fake ledger service: rows 1..head, /head and /range?start=a&end=b
    giving the rows of (a, b]. The head only moves forward."""

    def __init__(self, head=0):
        self.head = head
        self.delay = 0.0
        ledger = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                u = urllib.parse.urlparse(self.path)
                q = urllib.parse.parse_qs(u.query)
                if u.path == "/head":
                    body = {"head": ledger.head}
                else:
                    time.sleep(ledger.delay)  # a service some way off
                    a, b = int(q["start"][0]), min(int(q["end"][0]), ledger.head)
                    body = [ledger_row(i) for i in range(a + 1, b + 1)]
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.srv.server_address[1]
        self.t = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.t.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def ledger():
    lg = Ledger()
    yield lg
    lg.close()


def write_config(data, queries, mode=0o644):
    os.makedirs(data, exist_ok=True)
    path = os.path.join(data, "sluice.json")
    with open(path, "w") as f:
        json.dump({"queries": queries}, f)
    os.chmod(path, mode)


def ledger_query(url, **src):
    s = {"format": "process", "command": [PY, MODULE, LEDGER], "schema": SCHEMA,
         "options": {"endpoint": url}}
    s.update(src)
    return {"source": s, "sink": {"format": "json"}}


def prog_query(tmp_path, code, schema=SCHEMA, **src):
    """A query whose source is the Python program code (written to a file)."""
    path = tmp_path / ("prog%d.py" % random.randrange(1 << 30))
    path.write_text(code)
    s = {"format": "process", "command": [PY, str(path)], "schema": schema}
    s.update(src)
    return {"source": s, "sink": {"format": "json"}}


def run(data, expect=0, timeout=120):
    p = util.sluice("run", "--available-now", data, timeout=timeout)
    assert p.returncode == expect, (p.returncode, p.stdout, p.stderr)
    return p


def status(data):
    p = util.sluice("status", "--json", data)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def query_status(data, name="q"):
    for q in status(data)["queries"]:
        if q["name"] == name:
            return q
    raise AssertionError("no query %s" % name)


def out_rows(m, q="q"):
    """Every row of out/<q>/, parts in name order (batch order)."""
    base = os.path.join(m.mnt, "out", q)
    rows = []
    if not os.path.isdir(base):
        return rows
    for n in sorted(util.list_out(base), key=lambda n: [int(x) if x.isdigit() else x
                                                        for x in n.replace(".", "-").split("-")]):
        with open(os.path.join(base, n)) as f:
            rows += [json.loads(line) for line in f.read().splitlines()]
    return rows


def children_of(pid):
    """The source programs pid started: its children running sluice_source.py.
    Only those: under ASan, a sluice that is exiting has another child, the
    leak checker's tracer (a clone sharing its memory, which holds the other
    threads stopped); killing that one would leave sluice stopped for good."""
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            kids = [int(x) for x in f.read().split()]
    except OSError:
        return []
    progs = []
    for k in kids:
        try:
            with open("/proc/%d/cmdline" % k, "rb") as f:
                if b"sluice_source.py" in f.read():
                    progs.append(k)
        except OSError:
            pass
    return progs


# ---- the seed's reader, exactly once across kill -9 ----

def test_ledger_exactly_once_across_kill9(tmp_path, mounts, ledger):
    rnd = random.Random(1312)
    data = str(tmp_path / "data")
    write_config(data, {"q": ledger_query(ledger.url)})
    killed = 0
    ledger.delay = 0.1
    for rnd_i in range(8):
        ledger.head += rnd.randrange(5_000, 60_000)
        env = dict(os.environ)
        p = subprocess.Popen([util.sluice_bin(), "run", "--available-now", data],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        time.sleep(rnd.uniform(0.1, 1.5))
        victim = rnd.choice(["sluice", "child"])
        kids = children_of(p.pid)
        if victim == "child" and kids:
            os.kill(kids[0], signal.SIGKILL)
        else:
            p.kill()
        p.communicate(timeout=60)
        killed += p.returncode != 0
    assert killed >= 4  # most rounds were cut short, at random points
    run(data)  # whatever is left
    assert query_status(data)["batch"] is not None
    m = mounts.new(data=data)
    rows = out_rows(m)
    seqs = [r["seq"] for r in rows]
    assert len(seqs) == ledger.head, (len(seqs), ledger.head)
    assert seqs == list(range(1, ledger.head + 1))
    assert rows[:3] == [ledger_row(i) for i in (1, 2, 3)]
    # progress: the offsets as Spark's Python source would log them
    with open(os.path.join(m.mnt, "status", "q.json")) as f:
        prog = json.load(f)
    src = prog["sources"][0]
    assert src["endOffset"] == {"seq": ledger.head}
    assert src["description"].startswith("ProcessSource[")
    m.unmount()  # before the ledger goes away


def test_mount_polls_and_keeps_one_child(tmp_path, mounts, ledger):
    data = str(tmp_path / "data")
    ledger.head = 10
    write_config(data, {"q": ledger_query(ledger.url, pollInterval="50ms")})
    m = mounts.new(data=data)
    util.wait_for(lambda: len(out_rows(m)) == 10, 30, "the first rows")
    pid = int(m.proc.pid)
    kids = children_of(pid)
    ledger.head = 25
    util.wait_for(lambda: len(out_rows(m)) == 25, 30, "rows the mount found by itself")
    assert [r["seq"] for r in out_rows(m)] == list(range(1, 26))
    time.sleep(0.5)
    assert children_of(pid) == kids  # no child started per poll
    m.unmount()


# ---- the protocol, seen from a program ----

# A program that logs each request to LOG and answers from a script:
# rows 1..HEAD as (seq, account, amount), one partition per 4 rows.
SCRIPTED = r"""
import json, os, sys
LOG = %(log)r
HEAD = %(head)d
def say(o):
    sys.stdout.write(json.dumps(o) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    req = json.loads(line)
    with open(LOG, "a") as f:
        f.write(json.dumps(req, sort_keys=True) + "\n")
    op = req["op"]
    %(hook)s
    if op == "init": say({"ok": True})
    elif op == "initialOffset": say({"offset": {"seq": 0, "v": "a b"}})
    elif op == "latestOffset":
        s = req["start"]["seq"]
        e = HEAD
        if req["limit"]: e = min(e, s + req["limit"]["maxRows"])
        if req["end"]: e = min(e, req["end"]["seq"])
        say({"offset": {"v": "a b", "seq": e}})
    elif op == "partitions":
        s, e = req["start"]["seq"], req["end"]["seq"]
        say({"partitions": [[a, min(a + 4, e)] for a in range(s, e, 4)]})
    elif op == "read":
        a, b = req["partition"]
        for i in range(a + 1, b + 1):
            say([i, "acct", i * 10])
        say({"end": b - a})
    elif op == "commit": say({"ok": True})
    elif op == "stop": sys.exit(0)
"""


def scripted(tmp_path, head, hook="pass", **src):
    log = str(tmp_path / "requests.log")
    code = SCRIPTED % {"log": log, "head": head, "hook": hook}
    return prog_query(tmp_path, code, **src), log


def requests(log):
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [json.loads(line) for line in f]


def test_conversation_limits_and_commit(tmp_path, mounts):
    data = str(tmp_path / "data")
    q, log = scripted(tmp_path, 10, maxRowsPerTrigger=4, options={"k": "v", "n": 1})
    write_config(data, {"q": q})
    run(data)
    reqs = requests(log)
    ops = [r["op"] for r in reqs]
    assert reqs[0] == {"op": "init", "schema": SCHEMA, "options": {"k": "v", "n": 1}}
    assert ops.count("initialOffset") == 1
    # availableNow: the end is fixed once (limit null), then capped batches
    lat = [r for r in reqs if r["op"] == "latestOffset"]
    assert lat[0]["limit"] is None and lat[0]["end"] is None
    assert all(r["limit"] == {"maxRows": 4} and r["end"] == {"seq": 10, "v": "a b"}
               for r in lat[1:])
    # offsets are canonical: keys sorted, no spaces
    assert lat[1]["start"] == {"seq": 0, "v": "a b"}
    commits = [r["end"]["seq"] for r in reqs if r["op"] == "commit"]
    assert commits == [4, 8, 10]
    assert ops[-1] == "stop"
    # commit again at the next start, before anything else is planned
    with open(log, "w"):
        pass
    run(data)
    ops2 = [r["op"] for r in requests(log)]
    assert ops2[:2] == ["init", "commit"] and requests(log)[1]["end"] == {"seq": 10, "v": "a b"}
    assert "initialOffset" not in ops2
    m = mounts.new(data=data)
    assert [r["seq"] for r in out_rows(m)] == list(range(1, 11))
    with open(os.path.join(m.mnt, "checkpoint", "q", "offsets", "0")) as f:
        assert f.read().splitlines()[-1] == '{"seq":4,"v":"a b"}'
    with open(os.path.join(m.mnt, "status", "q.json")) as f:
        prog = json.load(f)
    assert prog["sources"][0]["startOffset"] == {"seq": 8, "v": "a b"}


def test_replay_sends_the_same_partitions(tmp_path):
    data = str(tmp_path / "data")
    # the first read of the 2nd batch dies: that batch is replayed at the next start
    marker = tmp_path / "died"
    hook = ("if op == 'read' and req['partition'][0] >= 4 and not os.path.exists(%r):\n"
            "        open(%r, 'w').close(); os._exit(3)" % (str(marker), str(marker)))
    q, log = scripted(tmp_path, 8, hook=hook, maxRowsPerTrigger=4)
    write_config(data, {"q": q})
    p = run(data, expect=1)
    assert "exited with status 3" in p.stderr, p.stderr
    planned = [r for r in requests(log) if r["op"] == "partitions"][-1]
    with open(log, "w"):
        pass
    run(data)
    again = [r for r in requests(log) if r["op"] == "partitions"][0]
    assert again == planned
    assert [r["op"] for r in requests(log)].count("latestOffset") >= 1


def test_exact_bigints_and_types(tmp_path, mounts):
    data = str(tmp_path / "data")
    code = r"""
import json, sys
for line in sys.stdin:
    op = json.loads(line)["op"]
    if op == "initialOffset": print('{"offset": 0}')
    elif op == "latestOffset": print('{"offset": 1}')
    elif op == "partitions": print('{"partitions": [null]}')
    elif op == "read":
        print('[9007199254740993, -9223372036854775808, 9223372036854775807, 2147483647,'
              ' 0.5, true, "2026-10-04T12:00:00Z", "2026-10-04", "x\\u00e9"]')
        print('{"end": 1}')
    elif op == "stop": break
    else: print('{"ok": true}')
    sys.stdout.flush()
"""
    schema = ("a BIGINT, b BIGINT, c BIGINT, d INT, e DOUBLE, f BOOLEAN, g TIMESTAMP, h DATE, "
              "i STRING")
    write_config(data, {"q": prog_query(tmp_path, code, schema=schema)})
    run(data)
    m = mounts.new(data=data)
    base = os.path.join(m.mnt, "out", "q")
    text = "".join(open(os.path.join(base, n)).read() for n in util.list_out(base))
    assert '"a":9007199254740993' in text and '"b":-9223372036854775808' in text, text
    assert '"c":9223372036854775807' in text
    r = json.loads(text)
    assert r["d"] == 2147483647 and r["e"] == 0.5 and r["f"] is True
    assert r["g"].startswith("2026-10-04T12:00:00") and r["h"] == "2026-10-04"
    assert r["i"] == "x\u00e9"


MALFORMED = r"""
import json, sys
for line in sys.stdin:
    op = json.loads(line)["op"]
    if op == "initialOffset": print('{"offset": 0}')
    elif op == "latestOffset": print('{"offset": 1}')
    elif op == "partitions": print('{"partitions": [1]}')
    elif op == "read":
        print('[1, "a", 10]')
        print('[2, "b"]')
        print('[3, "c", "ten"]')
        print('[4, "d", 1.5]')
        print('[5, "e", 50]')
        print('{"end": 5}')
    elif op == "stop": break
    else: print('{"ok": true}')
    sys.stdout.flush()
"""


@pytest.mark.parametrize("mode", ["PERMISSIVE", "DROPMALFORMED", "FAILFAST"])
def test_malformed_rows_under_each_mode(tmp_path, mounts, mode):
    data = str(tmp_path / "data")
    schema = SCHEMA + (", _corrupt_record STRING" if mode == "PERMISSIVE" else "")
    write_config(data, {"q": prog_query(tmp_path, MALFORMED, schema=schema, mode=mode)})
    if mode == "FAILFAST":
        p = run(data, expect=1)
        assert "malformed row 2 of partition 0: expected 3 values, got 2" in p.stderr, p.stderr
        assert query_status(data)["batch"] is None
        return
    run(data)
    m = mounts.new(data=data)
    rows = out_rows(m)
    if mode == "DROPMALFORMED":
        assert [r["seq"] for r in rows] == [1, 5]
    else:
        assert [r.get("seq") for r in rows] == [1, None, 3, 4, 5]
        assert rows[1]["_corrupt_record"] == '[2, "b"]'
        assert rows[2]["account"] == "c" and "amount" not in rows[2]
        assert rows[2]["_corrupt_record"] == '[3, "c", "ten"]'
    with open(os.path.join(m.mnt, "status", "q.json")) as f:
        assert json.load(f)["sources"][0]["numInputRows"] == 5


# ---- failures: clear lastError naming the command, nothing committed ----

FAILING = {
    "crash": ("if op == 'read':\n        sys.stderr.write('boom: ledger gone\\n'); "
              "sys.stderr.flush(); os._exit(7)",
              ["exited with status 7", "(read)", "boom: ledger gone"]),
    "garbage": ("if op == 'latestOffset':\n        print('hello there', flush=True); continue",
                ["answered garbage 'hello there'", "(latestOffset)"]),
    "error": ("if op == 'partitions':\n        say({'error': 'ledger is read-only today'}); "
              "continue",
              ["failed partitions: ledger is read-only today"]),
    "hang": ("if op == 'read':\n        import time; time.sleep(60)",
             ["timed out after 1 s", "(read)"]),
    "bad end": ("if op == 'read':\n        say([1, 'a', 1]); say({'end': 5}); continue",
                ["ended a partition of 1 rows with '{\"end\": 5}'"]),
}


@pytest.mark.parametrize("how", sorted(FAILING))
def test_failures_name_the_command_and_commit_nothing(tmp_path, how):
    hook, wants = FAILING[how]
    data = str(tmp_path / "data")
    q, log = scripted(tmp_path, 8, hook=hook, timeout="1 second")
    write_config(data, {"q": q})
    t0 = time.monotonic()
    p = run(data, expect=1)
    assert time.monotonic() - t0 < 30
    err = query_status(data)
    text = p.stderr + json.dumps(err)
    prog = q["source"]["command"][1]
    assert "process: '%s %s'" % (PY, prog) in p.stderr, p.stderr
    for w in wants:
        assert w in p.stderr, (w, p.stderr)
    assert err["batch"] is None, text  # nothing of the batch committed
    assert "commit" not in [r["op"] for r in requests(log)]
    st = util.sluice("status", data).stdout
    assert wants[0] in st, st


def test_option_errors_name_the_field(tmp_path):
    cases = [
        ({"format": "process"}, "queries.q.source.command: required"),
        ({"format": "process", "command": ["x"]},
         "queries.q.source.schema: required for the process format"),
        ({"format": "process", "command": ["x"], "schema": "a INT", "path": "ev"},
         "queries.q.source.path: the process format reads no files"),
        ({"format": "process", "command": ["x"], "schema": "a INT", "options": [1]},
         "queries.q.source.options: expected an object"),
        ({"format": "process", "command": ["x"], "schema": "a INT", "timeout": "0 s"},
         "queries.q.source.timeout: expected a positive duration"),
        ({"format": "process", "command": ["x"], "schema": "a INT", "maxRowsPerTrigger": 0},
         "queries.q.source.maxRowsPerTrigger"),
        ({"format": "process", "command": ["x"], "schema": "a INT", "maxFilesPerTrigger": 1},
         "queries.q.source.maxFilesPerTrigger: unknown option"),
    ]
    for src, msg in cases:
        data = str(tmp_path / ("data%d" % random.randrange(1 << 30)))
        write_config(data, {"q": {"source": src, "sink": {"format": "json"}}})
        p = util.sluice("run", "--available-now", data, timeout=30)
        assert p.returncode == 4, (src, p.returncode, p.stderr)
        assert msg in p.stderr, (msg, p.stderr)


@pytest.mark.parametrize("mode,why", [(0o664, "writable by its group"),
                                      (0o646, "writable by others")])
def test_a_command_needs_a_private_config(tmp_path, mode, why):
    data = str(tmp_path / "data")
    q, _ = scripted(tmp_path, 1)
    write_config(data, {"q": q}, mode=mode)
    p = util.sluice("run", "--available-now", data, timeout=30)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert "queries.q.source.command:" in p.stderr and why in p.stderr, p.stderr


def test_changed_command_or_schema_refused(tmp_path):
    data = str(tmp_path / "data")
    q, log = scripted(tmp_path, 3)
    write_config(data, {"q": q})
    run(data)
    q2 = json.loads(json.dumps(q))
    q2["source"]["command"] = q["source"]["command"] + ["--new"]
    write_config(data, {"q": q2})
    with open(log, "w"):
        pass
    p = util.sluice("run", "--available-now", data, timeout=30)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert "queries.q.source.command: changed since the checkpoint was made" in p.stderr
    assert requests(log) == []  # the changed command never ran
    q3 = json.loads(json.dumps(q))
    q3["source"]["schema"] = SCHEMA + ", extra STRING"
    write_config(data, {"q": q3})
    p = util.sluice("run", "--available-now", data, timeout=30)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert "queries.q.source.schema: changed since the checkpoint was made" in p.stderr


def test_mount_retries_a_failing_program(tmp_path, mounts):
    data = str(tmp_path / "data")
    marker = tmp_path / "failed-once"
    hook = ("if op == 'read' and not os.path.exists(%r):\n"
            "        open(%r, 'w').close(); say({'error': 'not yet'}); continue"
            % (str(marker), str(marker)))
    q, _ = scripted(tmp_path, 6, hook=hook)
    write_config(data, {"q": q})
    m = mounts.new(data=data)
    m.allow(r"not yet")
    util.wait_for(lambda: len(out_rows(m)) == 6, 30, "rows after the retry")
    assert [r["seq"] for r in out_rows(m)] == list(range(1, 7))


def test_available_now_stops_at_the_end_fixed_at_start(tmp_path, mounts):
    data = str(tmp_path / "data")
    # the head grows by 5 rows at every latestOffset: without the fixed end
    # the run would never finish
    hook = "if op == 'latestOffset':\n        HEAD += 5"
    q, log = scripted(tmp_path, 10, hook=hook, maxRowsPerTrigger=4)
    write_config(data, {"q": q})
    run(data)
    lat = [r for r in requests(log) if r["op"] == "latestOffset"]
    fixed = lat[0]
    assert fixed["end"] is None and fixed["limit"] is None
    ends = {json.dumps(r["end"], sort_keys=True) for r in lat[1:]}
    assert ends == {json.dumps({"seq": 15, "v": "a b"}, sort_keys=True)}
    m = mounts.new(data=data)
    assert [r["seq"] for r in out_rows(m)] == list(range(1, 16))
    m.unmount()


def test_offset_longer_than_the_limit_is_refused(tmp_path):
    data = str(tmp_path / "data")
    hook = ("if op == 'latestOffset':\n        say({'offset': {'seq': 1, 'pad': 'x' * 5000}}); "
            "continue")
    q, _ = scripted(tmp_path, 3, hook=hook)
    write_config(data, {"q": q})
    p = run(data, expect=1)
    assert "answered an offset longer than 4095 bytes (latestOffset)" in p.stderr, p.stderr
    assert query_status(data)["batch"] is None


# pyspark 4.2's admission control, a partition that is not plain JSON, and
# an options dict read in any case, through contrib/python/sluice_source.py
SOURCE_42 = r'''
from sluice_source import DataSource, DataSourceStreamReader, InputPartition, ReadMaxRows

class Part(InputPartition):
    def __init__(self, bounds):
        self.bounds = bounds            # a tuple: pickled across the protocol

class Reader(DataSourceStreamReader):
    def __init__(self, options):
        self.head = int(options["HEAD"])

    def initialOffset(self):
        return {"n": 0}

    def latestOffset(self, start, limit):
        end = self.head
        if isinstance(limit, ReadMaxRows):
            end = min(end, start["n"] + limit.max_rows)
        return {"n": end}

    def partitions(self, start, end):
        return [Part((start["n"], end["n"]))]

    def read(self, partition):
        a, b = partition.bounds
        for i in range(a + 1, b + 1):
            yield (i, "p", i)

class Src(DataSource):
    def streamReader(self, schema):
        return Reader(self.options)
'''


def test_python_module_admission_control_and_pickled_partitions(tmp_path, mounts):
    data = str(tmp_path / "data")
    path = tmp_path / "src42.py"
    path.write_text(SOURCE_42)
    q = {"source": {"format": "process", "command": [PY, MODULE, str(path)], "schema": SCHEMA,
                    "options": {"head": 7}, "maxRowsPerTrigger": 3},
         "sink": {"format": "json"}}
    write_config(data, {"q": q})
    run(data)
    m = mounts.new(data=data)
    assert [r["seq"] for r in out_rows(m)] == list(range(1, 8))
    with open(os.path.join(m.mnt, "checkpoint", "q", "offsets", "0")) as f:
        assert f.read().splitlines()[-1] == '{"n":3}'
    assert sorted(os.listdir(os.path.join(m.mnt, "checkpoint", "q", "commits"))) == ["0", "1", "2"]
    m.unmount()


# pyspark's SimpleDataSourceStreamReader through sluice_source.py's wrapper:
# a log file of rows (one JSON per line) read by line number; every call
# the program gets is logged to CALLS, and readBetweenOffsets waits while
# the file HOLD exists (so that a test can kill sluice inside a batch)
SIMPLE = r"""
import json, os, time
from sluice_source import DataSource, SimpleDataSourceStreamReader

def note(opts, *call):
    with open(opts["calls"], "a") as f:
        f.write(json.dumps(call) + "\n")

def lines(path):
    with open(path) as f:
        return f.read().splitlines()

class Reader(SimpleDataSourceStreamReader):
    def __init__(self, options):
        self.o = options

    def initialOffset(self):
        return {"line": 0}

    def read(self, start):
        rows = lines(self.o["log"])[start["line"]:]
        note(self.o, "read", start)
        return iter([tuple(json.loads(r)) for r in rows]), {"line": start["line"] + len(rows)}

    def readBetweenOffsets(self, start, end):
        note(self.o, "readBetweenOffsets", start, end)
        while os.path.exists(self.o["hold"]):
            time.sleep(0.05)
        return iter([tuple(json.loads(r)) for r in lines(self.o["log"])[start["line"]:end["line"]]])

    def commit(self, end):
        note(self.o, "commit", end)

class Src(DataSource):
    def simpleStreamReader(self, schema):
        return Reader(self.options)
"""


def test_simple_reader_replays_between_offsets_after_kill9(tmp_path, mounts):
    """A SimpleDataSourceStreamReader (pyspark 4.0) served by sluice_source.py:
    read(start) finds each batch's end, readBetweenOffsets(start, end) gives
    its rows, commit(end) follows each committed batch. Killed inside a
    batch (its offsets logged, rows being read), sluice replays exactly that
    batch's range after a restart, although the log has grown since; the
    rows that came after go into the next batch. Every row once, in order."""
    data = str(tmp_path / "data")
    log, calls, hold = tmp_path / "log.jsonl", tmp_path / "calls.jsonl", tmp_path / "hold"
    prog = tmp_path / "simple_src.py"
    prog.write_text(SIMPLE)

    def append(a, b):
        with open(log, "a") as f:
            for i in range(a, b + 1):
                f.write(json.dumps([i, "acct-%d" % (i % 3), i * 10]) + "\n")

    def called():
        return [json.loads(x) for x in calls.read_text().splitlines()] if calls.exists() else []

    q = {"source": {"format": "process", "command": [PY, MODULE, str(prog)], "schema": SCHEMA,
                    "options": {"log": str(log), "calls": str(calls), "hold": str(hold)}},
         "sink": {"format": "json"}}
    write_config(data, {"q": q})
    append(1, 10)
    run(data)
    assert ["read", {"line": 0}] in called()
    assert ["readBetweenOffsets", {"line": 0}, {"line": 10}] in called()
    assert called()[-1] == ["commit", {"line": 10}]
    # the second batch: killed while it reads its rows
    append(11, 15)
    hold.write_text("")
    calls.unlink()
    p = subprocess.Popen([util.sluice_bin(), "run", "--available-now", data],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        util.wait_for(lambda: any(c[0] == "readBetweenOffsets" for c in called()), 60,
                      "the second batch's read")
    finally:
        p.kill()
        p.communicate(timeout=60)
    # at start, the last committed end; then the batch, cut short
    assert called() == [["commit", {"line": 10}], ["read", {"line": 10}],
                        ["readBetweenOffsets", {"line": 10}, {"line": 15}]]
    # the log grows before the restart: the replay still ends at line 15
    append(16, 22)
    hold.unlink()
    calls.unlink()
    run(data)
    # the replay takes its end from the offset log (no read), then a new batch
    assert called() == [["commit", {"line": 10}],
                        ["readBetweenOffsets", {"line": 10}, {"line": 15}],
                        ["commit", {"line": 15}],
                        ["read", {"line": 15}],
                        ["readBetweenOffsets", {"line": 15}, {"line": 22}],
                        ["commit", {"line": 22}]]
    m = mounts.new(data=data)
    rows = out_rows(m)
    assert [r["seq"] for r in rows] == list(range(1, 23))
    assert rows[11] == {"seq": 12, "account": "acct-0", "amount": 120}
    with open(os.path.join(m.mnt, "checkpoint", "q", "offsets", "1")) as f:
        assert f.read().splitlines()[-1] == '{"line":15}'
    m.unmount()


def test_child_rules(tmp_path):
    """CONNECTORS "Commands and secrets": own process group, death signal,
    no descriptor of sluice's, no service-manager variables, its folder."""
    data = str(tmp_path / "data")
    seen = tmp_path / "seen.json"
    hook = ("if op == 'init':\n"
            "        import ctypes\n"
            "        sig = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(sig))\n"
            "        json.dump({'pgid_is_pid': os.getpgid(0) == os.getpid(), 'pdeathsig': sig.value,"
            " 'fds': sorted(int(x) for x in os.listdir('/proc/self/fd')), 'cwd': os.getcwd(),"
            " 'env': {k: os.environ.get(k) for k in ('NOTIFY_SOCKET', 'WATCHDOG_USEC',"
            " 'SLUICE_QUERY')}}, open(%r, 'w'))" % str(seen))
    q, _ = scripted(tmp_path, 2, hook=hook)
    write_config(data, {"q": q})
    env = dict(os.environ, NOTIFY_SOCKET="/nonexistent", WATCHDOG_USEC="1000000")
    p = util.sluice("run", "--available-now", data, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    s = json.loads(seen.read_text())
    assert s["pgid_is_pid"] and s["pdeathsig"] == signal.SIGKILL
    assert s["fds"] == [0, 1, 2, 3]  # 3: the listing's own
    assert s["cwd"] == os.path.join(os.path.realpath(data), "process", "q")
    assert s["env"] == {"NOTIFY_SOCKET": None, "WATCHDOG_USEC": None, "SLUICE_QUERY": "q"}


SECRETIVE = r"""
import json, sys
opts = {}
for line in sys.stdin:
    req = json.loads(line)
    if req["op"] == "init":
        opts = req["options"]
        with open(%(seen)r, "w") as f:
            json.dump(opts, f)
        print(json.dumps({"ok": True}), flush=True)
    elif req["op"] == "initialOffset":
        # a careless program that prints its credentials, then fails
        sys.stderr.write("login %%s/%%s refused\n" %% (opts["user"], opts["auth"]["token"]))
        sys.stderr.flush()
        print(json.dumps({"error": "cannot log in"}), flush=True)
    elif req["op"] == "stop":
        sys.exit(0)
"""


def test_secrets_from_env_and_file_are_masked(tmp_path):
    """Options given as "@env:NAME" or "@file:/path" (at any depth) reach the
    program resolved; what it prints of them shows as *** in the log,
    lastError and status. A missing one fails naming the option."""
    seen = tmp_path / "seen.json"
    secret_file = tmp_path / "token"
    secret_file.write_text("s3cr3t-from-file\n")
    code = SECRETIVE % {"seen": str(seen)}
    data = str(tmp_path / "data")
    q = prog_query(tmp_path, code, options={"user": "@env:LEDGER_USER",
                                            "auth": {"token": "@file:%s" % secret_file},
                                            "plain": "@not-a-ref"})
    write_config(data, {"q": q})
    env = dict(os.environ, LEDGER_USER="ann-the-admin")
    p = util.sluice("run", "--available-now", data, timeout=60, env=env)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert json.loads(seen.read_text()) == {"user": "ann-the-admin",
                                            "auth": {"token": "s3cr3t-from-file"},
                                            "plain": "@not-a-ref"}
    st = util.sluice("status", "--json", data, env=env).stdout
    for text in (p.stderr, st):
        assert "ann-the-admin" not in text and "s3cr3t-from-file" not in text, text
    assert "login ***/*** refused" in p.stderr, p.stderr
    # unset: the batch fails naming the option, before the program hears a word
    seen.unlink()
    env.pop("LEDGER_USER")
    p = util.sluice("run", "--available-now", data, timeout=60, env=env)
    assert p.returncode == 1
    assert "source.options.user: @env:LEDGER_USER is not set" in p.stderr, p.stderr
    assert not seen.exists()
