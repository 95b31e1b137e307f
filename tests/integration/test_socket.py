"""The `socket` source (CONNECTORS §4), made durable: a Python TCP server of
the test sends numbered lines; sluice spools them in the data dir and reads
batches from the spool. Killed (kill -9 at random moments, and at the fault
points around spool commits, trims and batch commits) and restarted while
the server sends, every line counted in spooledLines before a kill comes
out exactly once. Also: Spark's line splitting and description, receive
times kept for replays, reconnecting with backoff, `run --available-now`
and availableNow mounts draining the spool without connecting, the spool
cap pushing back on the sender, and option errors naming the field."""

import json
import os
import random
import shutil
import socket
import threading
import time

import pytest

import util

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.allow_stderr(r"socket '127\.0\.0\.1:\d+'")]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class LineServer:
    """Accepts connections on port, one at a time, and sends lines from one
    shared numbering: line(i) for i = 0, 1, ... total-1 (forever when total
    is None), `burst` lines per send, `pause` seconds between sends. A
    connection that breaks is dropped; the next one goes on numbering."""

    def __init__(self, port, total=None, burst=50, pause=0.001, line=None, tail=b"",
                 delay=0.0, sndbuf=None):
        self.port = port
        self.total = total
        self.burst = burst
        self.pause = pause
        self.line = line or (lambda i: b"%08d:%s\n" % (i, b"x" * (i % 37)))
        self.tail = tail          # sent once after the last line, then the connection closes
        self.delay = delay        # seconds after accept before sending
        self.sndbuf = sndbuf
        self.next = 0             # the next line to send
        self.conns = 0            # connections accepted
        self.done = threading.Event()
        self.stop = threading.Event()
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", port))
        self.ls.listen(4)
        self.ls.settimeout(0.1)
        self.t = threading.Thread(target=self._main, daemon=True)
        self.t.start()

    def _main(self):
        while not self.stop.is_set():
            try:
                c, _ = self.ls.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.conns += 1
            if self.sndbuf:
                c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.sndbuf)
            try:
                self._feed(c)
            except OSError:
                pass  # the reader went away: the next connection goes on
            finally:
                c.close()

    def _feed(self, c):
        if self.delay:
            time.sleep(self.delay)
        c.settimeout(0.2)
        while not self.stop.is_set():
            n = self.burst if self.total is None else min(self.burst, self.total - self.next)
            if n <= 0:
                if self.tail and not self.done.is_set():
                    c.sendall(self.tail)
                    self.done.set()
                    return  # the close ends the last line
                self.done.set()
                # hold the connection until the reader or the test goes away
                while not self.stop.is_set():
                    time.sleep(0.05)
                return
            data = b"".join(self.line(i) for i in range(self.next, self.next + n))
            view = memoryview(data)
            while view and not self.stop.is_set():
                try:
                    k = c.send(view)
                except socket.timeout:
                    continue  # pushed back: the reader does not read
                view = view[k:]
            if view:
                return
            self.next += n
            if self.pause:
                time.sleep(self.pause)

    def close(self):
        self.stop.set()
        self.ls.close()
        self.t.join(timeout=10)


@pytest.fixture
def servers():
    made = []
    yield made
    for s in made:
        s.close()


def write_config(data, queries):
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump({"queries": queries}, f)


def socket_query(port, **kw):
    src = {"format": "socket", "host": "127.0.0.1", "port": port}
    src.update(kw.pop("source", {}))
    q = {"source": src}
    q.update(kw)
    return q


def status(data, name="s"):
    p = util.sluice("status", "--json", data)
    assert p.returncode == 0, p.stderr
    for q in json.loads(p.stdout)["queries"]:
        if q["name"] == name:
            return q
    raise AssertionError("no query %s in %s" % (name, p.stdout))


def spooled(data, name="s"):
    return status(data, name)["metrics"]["spooledLines"]


def out_rows(mnt, name="s"):
    """Every row of out/<name>/, parts in batch order (the spool's order)."""
    base = os.path.join(mnt, "out", name)
    if not os.path.isdir(base):
        return []
    rows = []
    for n in sorted(util.list_out(base)):
        with open(os.path.join(base, n), "rb") as f:
            rows += [json.loads(l) for l in f.read().splitlines()]
    return rows


def wait_rows(m, n, name="s", timeout=30):
    return util.wait_for(lambda: len(out_rows(m.mnt, name)) >= n and out_rows(m.mnt, name),
                         timeout, "%d rows in out/%s" % (n, name), interval=0.1)


def run_now(data, expect=0, env=None):
    p = util.sluice("run", "--available-now", data, timeout=90, env=env)
    assert p.returncode == expect, (p.returncode, p.stdout, p.stderr)
    return p


def spawn(m):
    """Mount.start() without waiting for the mount to appear."""
    import subprocess
    os.makedirs(m.mnt, exist_ok=True)
    with open(m.log, "ab") as err:
        m.proc = subprocess.Popen([util.sluice_bin(), "mount", m.data, m.mnt, "-f"],
                                  stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=m.env)


def dead(m):
    """After a kill -9 or a fault point's exit: the mount is gone, not unmounted."""
    m.killed = True
    try:
        m.proc.wait(timeout=util.UNMOUNT_TIMEOUT)
    except Exception:
        pass
    util.lazy_unmount(m.mnt)
    util.wait_for(lambda: not util.is_listed_mount(m.mnt), 10, "the dead mount to go")


# -- lines, offsets, progress ----------------------------------------------------

def test_lines_as_spark_reads_them(mounts, tmp_path, servers):
    """\\n, \\r and \\r\\n end a line (BufferedReader.readLine), an empty line is a
    row, bytes that are not UTF-8 become U+FFFD, and a last line without its
    newline is spooled when the connection ends. Offsets are bare line counts;
    the progress report has Spark's description and the spool's metrics."""
    port = free_port()
    # "gamma\r" then "\r\n": gamma, then an empty line (a \n right after a \r is its pair)
    payload = [b"alpha\n", b"beta\r\n", b"gamma\r", b"\r\n", b"d\xffelta\n", b"\xc3\xa9t\xc3\xa9\n"]
    srv = LineServer(port, total=len(payload), line=lambda i: payload[i], burst=1,
                     pause=0.05, tail=b"last without newline")
    servers.append(srv)
    data = str(tmp_path / "data")
    write_config(data, {"s": socket_query(port)})
    m = mounts.new(data=data)
    rows = wait_rows(m, 7)
    assert [r["value"] for r in rows] == ["alpha", "beta", "gamma", "", "d\ufffdelta",
                                          "\u00e9t\u00e9", "last without newline"]
    assert all(set(r) == {"value"} for r in rows)
    reports = [json.loads(l) for l in open(m.p("status", "s.jsonl")).read().splitlines()]
    with open(m.p("checkpoint", "s", "offsets", "0")) as f:
        assert f.read().split("\n")[2] == str(reports[0]["sources"][0]["endOffset"])
    src = reports[0]["sources"][0]
    assert src["description"] == "TextSocketV2[host: 127.0.0.1, port: %d]" % port
    assert src["startOffset"] is None and isinstance(src["endOffset"], int)
    for a, b in zip(reports, reports[1:]):
        assert b["sources"][0]["startOffset"] == a["sources"][0]["endOffset"]
    last = reports[-1]["sources"][0]
    assert last["endOffset"] == 7
    assert int(last["metrics"]["spooledLines"]) == 7
    assert int(last["metrics"]["spoolBytes"]) >= 0
    # committed lines leave the spool; status counts the backlog in lines
    util.wait_for(lambda: status(data)["metrics"]["spoolBytes"] == 0, 10, "the spool to empty")
    st = status(data)
    assert st["source"] == "socket" and st["backlog"]["lines"] == 0
    assert st["metrics"]["spooledLines"] == 7 and st["backlog"]["bytes"] == 0
    plain = util.sluice("status", data).stdout
    assert " backlog=0:lines/0:bytes " in plain, plain
    m.unmount()


# -- kill -9 while the server sends ------------------------------------------------

FAULTS = ["spool.before_append", "spool.after_append", "spool.before_trim", "spool.after_trim",
          "engine.after_offsets", "engine.before_commit", "engine.after_commit"]


def test_kill9_loses_and_repeats_nothing_spooled(mounts, tmp_path, servers):
    """The issue's proof: numbered lines keep coming while sluice is killed and
    restarted (kill -9 at seeded random moments, and exits at the fault points
    around spool commits, trims and batch commits). Every line counted in
    spooledLines before each kill comes out exactly once, in order."""
    rnd = random.Random(1302)
    port = free_port()
    srv = LineServer(port, burst=40, pause=0.002)
    servers.append(srv)
    data = str(tmp_path / "data")
    write_config(data, {"s": socket_query(port)})
    faults = util.faults_compiled()
    counted = []  # spooledLines seen before each kill
    rounds = 6 + (len(FAULTS) if faults else 0)
    plan = ["kill"] * 6 + (FAULTS if faults else [])
    rnd.shuffle(plan)
    for what in plan:
        env = None
        if what != "kill":
            env = dict(os.environ, SLUICE_FAULT="%s:%d" % (what, rnd.randint(2, 6)))
        m = mounts.new(data=data, env=env, start=False)
        if what == "kill":
            m.start()
            time.sleep(rnd.uniform(0.3, 1.5))
            n = spooled(data)
            m.kill9()
        else:
            # the fault point ends the process by itself (exit 86), maybe
            # before the mount is seen: not waited for
            spawn(m)
            try:
                m.proc.wait(timeout=30)
            except Exception:
                pytest.fail("fault point %s never reached" % what)
            assert m.proc.returncode == 86, (what, m.proc.returncode, m.stderr())
            n = spooled(data)
        counted.append(n)
        dead(m)
    assert len(counted) == rounds
    assert counted == sorted(counted) and counted[-1] > 0, counted
    srv.close()
    # what is spooled drains without a connection
    run_now(data)
    total = spooled(data)
    assert total >= counted[-1]
    m = mounts.new(data=data, start=False)
    m.start()
    rows = out_rows(m.mnt)
    nums = [int(r["value"].split(":")[0]) for r in rows]
    assert len(nums) == total, (len(nums), total)
    assert all(a < b for a, b in zip(nums, nums[1:])), "a line came out twice or out of order"
    for r in rows:
        k, pad = r["value"].split(":")
        assert pad == "x" * (int(k) % 37), r
    for n in counted:
        assert n <= len(nums)
    m.unmount()


def test_a_failed_spool_commit_is_retried(mounts, tmp_path, servers):
    """A spool commit that fails (ENOSPC injected at the second) holds the
    lines it had, says why in the log and lastError, and commits them on a
    later try: every line comes out once, in order."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    port = free_port()
    srv = LineServer(port, total=500, burst=10, pause=0.005)
    servers.append(srv)
    data = str(tmp_path / "data")
    write_config(data, {"s": socket_query(port)})
    m = mounts.new(data=data, env=dict(os.environ, SLUICE_FAULT_ERR="spool.append:2:ENOSPC"))
    rows = wait_rows(m, 500)
    assert [int(r["value"].split(":")[0]) for r in rows] == list(range(500))
    assert "cannot spool" in m.stderr() and "No space left on device" in m.stderr()
    m.unmount()


# -- includeTimestamp --------------------------------------------------------------

def test_include_timestamp_replays_identical_rows(mounts, tmp_path, servers):
    """The receive time is kept in the spool: a batch replayed after a crash,
    later, and in a copy of the data dir replayed later still, gives the same
    rows, timestamps included."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    port = free_port()
    srv = LineServer(port, total=200, burst=20, pause=0.01)
    servers.append(srv)
    data = str(tmp_path / "data")
    write_config(data, {"s": socket_query(port, source={"includeTimestamp": True})})
    t0 = time.time()
    m = mounts.new(data=data, env=dict(os.environ, SLUICE_FAULT="engine.before_commit:1"),
                   start=False)
    try:
        m.start()
    except pytest.fail.Exception:
        pass  # the first batch can reach its fault point before the mount shows
    m.proc.wait(timeout=30)
    assert m.proc.returncode == 86
    dead(m)
    t1 = time.time()
    copy = str(tmp_path / "copy")
    shutil.copytree(data, copy)
    time.sleep(1.2)
    run_now(data)
    time.sleep(1.2)
    run_now(copy)
    got = []
    for d in (data, copy):
        m = mounts.new(data=d, start=False)
        write_config(d, {"s": socket_query(port, source={"includeTimestamp": True},
                                           trigger={"availableNow": True})})
        m.start()
        got.append(out_rows(m.mnt))
        m.unmount()
    assert got[0] == got[1] and got[0]
    import datetime
    for r in got[0]:
        ts = datetime.datetime.strptime(r["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
        assert t0 - 1 <= ts <= t1 + 1, (r, t0, t1)
    stamps = [r["timestamp"] for r in got[0]]
    assert stamps == sorted(stamps)


# -- reconnecting ------------------------------------------------------------------

def test_reconnects_when_the_server_drops(mounts, tmp_path, servers):
    """The server goes away: lastError and the log say so, the reader retries
    with backoff, and reconnects when the server is back; nothing is lost."""
    port = free_port()
    srv = LineServer(port, total=10, burst=5, pause=0.01)
    servers.append(srv)
    data = str(tmp_path / "data")
    write_config(data, {"s": socket_query(port)})
    m = mounts.new(data=data)
    wait_rows(m, 10)
    srv.close()  # the connection ends, nobody listens any more
    util.wait_for(lambda: "socket '127.0.0.1:%d'" % port in (status(data)["lastError"] or ""),
                  10, "lastError naming the socket")
    err = util.wait_for(lambda: "cannot connect" in (status(data)["lastError"] or "") and
                        status(data)["lastError"], 10, "a failed reconnect in lastError")
    assert "retrying in" in err, err
    with open(m.p("status", "s.json")) as f:
        assert "socket '127.0.0.1:%d'" % port in json.load(f)["lastError"]
    srv2 = LineServer(port, total=10, burst=5, pause=0.01,
                      line=lambda i: b"%08d:%s\n" % (i + 10, b"x" * ((i + 10) % 37)))
    servers.append(srv2)
    rows = wait_rows(m, 20, timeout=30)
    assert [int(r["value"].split(":")[0]) for r in rows] == list(range(20))
    util.wait_for(lambda: status(data)["lastError"] is None, 10, "lastError to clear")
    log = m.stderr()
    assert "connection lost: closed by the peer" in log
    assert "connected to '127.0.0.1:%d'" % port in log or srv2.conns == 1
    m.unmount()


# -- availableNow: no connection ---------------------------------------------------

def test_available_now_drains_the_spool_without_connecting(mounts, tmp_path, servers):
    """Lines spooled by a mount whose trigger made no batch yet: `sluice run
    --available-now` and an availableNow mount process them without
    connecting (the server counts its connections); status shows the backlog
    in lines; a changed port is refused at the next start, naming it."""
    port = free_port()
    srv = LineServer(port, total=50, burst=10, pause=0.01, delay=1.0)
    servers.append(srv)
    data = str(tmp_path / "data")
    write_config(data, {"s": socket_query(port, trigger={"processingTime": "1 hour"})})
    m = mounts.new(data=data)
    util.wait_for(lambda: spooled(data) == 50, 20, "50 lines spooled")
    assert out_rows(m.mnt) == []
    m.unmount()
    assert srv.conns == 1
    assert " backlog=50:lines/" in util.sluice("status", data).stdout
    # two copies of the data dir: one for each way to drain it
    copy = str(tmp_path / "copy")
    shutil.copytree(data, copy)
    p = run_now(data)
    assert "s: 1 batches, 50 rows" in p.stdout, p.stdout
    assert srv.conns == 1
    assert status(data)["backlog"]["lines"] == 0
    write_config(copy, {"s": socket_query(port, trigger={"availableNow": True})})
    m2 = mounts.new(data=copy)
    util.wait_for(lambda: len(out_rows(m2.mnt)) == 50, 20, "the availableNow mount's rows")
    time.sleep(0.5)
    assert srv.conns == 1, "an availableNow mount connected"
    m2.unmount()
    # the spool's lines came from this port: a change is refused, naming it
    write_config(data, {"s": socket_query(port + 1)})
    p = run_now(data, expect=4)
    assert "queries.s.source.port: changed since the checkpoint was made" in p.stderr, p.stderr


# -- the spool cap -----------------------------------------------------------------

def test_spool_cap_pushes_back(mounts, tmp_path, servers):
    """With nothing taken out of the spool (processingTime of an hour), reading
    stops at maxSpoolBytes: the spool stays under it and the server's sends
    block. An unmount stops the blocked reader cleanly, and a run drains it."""
    port = free_port()
    line = lambda i: b"%08d:%s\n" % (i, b"y" * 90)
    total = 200_000  # 20 MB: more than the cap and every socket buffer together
    srv = LineServer(port, total=total, burst=200, pause=0, line=line, sndbuf=65536, delay=1.0)
    servers.append(srv)
    data = str(tmp_path / "data")
    cap = 1 << 20
    write_config(data, {"s": socket_query(port, source={"maxSpoolBytes": "1m"},
                                          trigger={"processingTime": "1 hour"})})
    m = mounts.new(data=data)
    util.wait_for(lambda: status(data)["metrics"]["spoolBytes"] > cap // 2, 30, "the spool filling")

    def stalled():
        a = (srv.next, status(data)["metrics"]["spoolBytes"])
        time.sleep(0.7)
        return a == (srv.next, status(data)["metrics"]["spoolBytes"]) and a

    sent, held = util.wait_for(stalled, 60, "the sender and the spool to stop", interval=0)
    assert held <= cap + 64 * 1024 + 200, held
    time.sleep(1.0)  # and they stay stopped
    assert (srv.next, status(data)["metrics"]["spoolBytes"]) == (sent, held)
    assert sent < total and not srv.done.is_set(), "the sender was not pushed back"
    m.unmount()  # the reader waits for room: the unmount still ends it
    srv.close()
    n = spooled(data)
    assert n * 100 <= cap + 64 * 1024 + 200
    run_now(data)
    m = mounts.new(data=data, start=False)
    write_config(data, {"s": socket_query(port, source={"maxSpoolBytes": "1m"},
                                          trigger={"availableNow": True})})
    m.start()
    nums = [int(r["value"].split(":")[0]) for r in out_rows(m.mnt)]
    assert nums == list(range(n))
    m.unmount()


# -- options ---------------------------------------------------------------------

@pytest.mark.parametrize("source,msg", [
    ({"format": "socket", "port": 9999}, "queries.q.source.host: required"),
    ({"format": "socket", "host": "localhost"}, "queries.q.source.port: required"),
    ({"format": "socket", "host": "localhost", "port": 65536},
     "queries.q.source.port: expected a positive integer up to 65535"),
    ({"format": "socket", "host": "localhost", "port": 1, "schema": "value STRING"},
     "queries.q.source.schema: the socket format has the fixed schema 'value STRING'"),
    ({"format": "socket", "host": "localhost", "port": 1, "includeTimestamp": "maybe"},
     "queries.q.source.includeTimestamp: expected true or false"),
    ({"format": "socket", "host": "localhost", "port": 1, "maxSpoolBytes": "lots"},
     "queries.q.source.maxSpoolBytes"),
])
def test_option_errors_name_the_field(tmp_path, source, msg):
    data = str(tmp_path / "data")
    write_config(data, {"q": {"source": source}})
    p = util.sluice("run", "--available-now", data, timeout=30)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert msg in util.one_line(p.stderr), p.stderr
