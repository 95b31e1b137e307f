"""The mount under systemd (contrib/systemd/sluice@.service, fs/notify.c):
the sd_notify protocol checked with a notify socket of the test's own
(READY=1 only once the mount answers and every query has started,
WATCHDOG=1 at half WATCHDOG_USEC, STOPPING=1 at the unmount, nothing
without NOTIFY_SOCKET), journald priorities on stderr when JOURNAL_STREAM
names it, the unit as `meson install` writes it, and the unit under a real
systemd when this machine runs one (skipped otherwise)."""

import json
import os
import shutil
import socket
import struct
import subprocess
import threading
import time

import pytest

import util
from util import write_file

pytestmark = pytest.mark.timeout(90)

SCHEMA = "event_id STRING, value BIGINT"
READY_TIMEOUT = 30
BIG_FILES = 8
BIG_ROWS = 40000  # per file: the first run over the backlog takes a moment


def config(data, queries):
    """sluice.json with one JSON query per (name: (path, extra))."""
    os.makedirs(data, exist_ok=True)
    doc = {"queries": {}}
    for name, (path, extra) in queries.items():
        q = {"source": {"format": "json", "path": path, "schema": SCHEMA}}
        q["source"].update(extra.get("source", {}))
        q.update({k: v for k, v in extra.items() if k != "source"})
        doc["queries"][name] = q
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump(doc, f)


def land(data, tmp, folder, name, body):
    """Lands one file with `sluice land` (no mount), under in/<folder>/."""
    src = os.path.join(str(tmp), name)
    with open(src, "wb") as f:
        f.write(body)
    util.sluice("land", data, src, "--to", folder, check=True)
    os.unlink(src)


def backlog(data, tmp):
    """Files for the query "big" that its first run at the mount reads."""
    for k in range(BIG_FILES):
        body = b"".join(b'{"event_id":"e%d-%d","value":%d}\n' % (k, i, i)
                        for i in range(BIG_ROWS))
        land(data, tmp, "big", "b%d.json" % k, body)


class NotifySocket:
    """An AF_UNIX datagram socket standing in for systemd's NOTIFY_SOCKET.

    Each message is kept with its sender's pid (SO_PASSCRED, as systemd's
    NotifyAccess=main checks it). on_ready(text) runs on the receiving
    thread the moment a READY=1 arrives, so that it sees the mount as it
    was then."""

    def __init__(self, path, on_ready=None):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.settimeout(0.1)
        self.msgs = []  # (monotonic time, sender pid, text)
        self.on_ready = on_ready
        self.ready_seen = None
        self.cv = threading.Condition()
        self.done = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        cred = struct.calcsize("3i")
        while not self.done:
            try:
                data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(cred))
            except socket.timeout:
                continue
            except OSError:
                return
            pid = None
            for level, typ, payload in anc:
                if level == socket.SOL_SOCKET and typ == socket.SCM_CREDENTIALS:
                    pid = struct.unpack("3i", payload[:cred])[0]
            text = data.decode("utf-8", "replace")
            if "READY=1" in text.split("\n") and self.on_ready:
                try:
                    self.ready_seen = self.on_ready(text)
                except Exception as e:  # reported by the test that asks
                    self.ready_seen = e
            with self.cv:
                self.msgs.append((time.monotonic(), pid, text))
                self.cv.notify_all()

    def lines(self):
        with self.cv:
            return [(t, pid, line) for t, pid, text in self.msgs for line in text.split("\n")]

    def wait(self, line, count=1, timeout=READY_TIMEOUT):
        """Waits until `line` (e.g. "READY=1") arrived count times."""
        deadline = time.monotonic() + timeout
        with self.cv:
            while True:
                n = sum(1 for _, _, text in self.msgs if line in text.split("\n"))
                if n >= count:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail("%d x %s not received within %ss; got %r"
                                % (count, line, timeout, self.msgs))
                self.cv.wait(left)

    def close(self):
        self.done = True
        self.thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def notify_socket(tmp_path):
    made = []

    def make(on_ready=None):
        s = NotifySocket(tmp_path / ("notify%d.sock" % len(made)), on_ready)
        made.append(s)
        return s
    yield make
    for s in made:
        s.close()


def clean_env(**extra):
    """The test's environment without any systemd variable, plus extra."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM",
                        "LISTEN_FDS", "LISTEN_PID")}
    env.update(extra)
    return env


def thread_names(pid):
    names = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                names.append(f.read().strip())
        except FileNotFoundError:
            pass
    return names


def read_json(path):
    with open(path, "rb") as f:
        return json.loads(f.read())


def snapshot(mnt, queries):
    """What the mount shows: called the moment READY=1 arrives."""
    snap = {"ismount": os.path.ismount(mnt)}
    snap["landing"] = util.read_landing(mnt)
    for q in queries:
        snap[q] = read_json(os.path.join(mnt, "status", q + ".json"))
    return snap


@pytest.mark.allow_stderr(r"stopped|line 1")
def test_ready_after_mount_and_every_query(mounts, tmp_path, notify_socket):
    data = str(tmp_path / "data")
    config(data, {"big": ("big", {}), "idle": ("idle", {}),
                  "strict": ("strict", {"source": {"mode": "FAILFAST"}})})
    backlog(data, tmp_path)
    land(data, tmp_path, "strict", "bad.json", b"not json\n")
    mnt = str(tmp_path / "mnt")
    ns = notify_socket(on_ready=lambda text: snapshot(mnt, ["big", "idle", "strict"]))
    m = mounts.new(data=data, mnt=mnt, start=False, env=clean_env(NOTIFY_SOCKET=ns.path))
    m.start()
    ns.wait("READY=1")

    snap = ns.ready_seen
    assert not isinstance(snap, Exception), "the mount did not answer at READY=1: %r" % snap
    assert snap["ismount"]
    assert snap["landing"]["filesLanded"] == BIG_FILES + 1
    # every query had started: "big" ran its backlog, "strict" failed with
    # its lastError recorded, "idle" found nothing
    assert snap["big"] is not None and snap["big"]["batchId"] >= 0, snap["big"]
    assert "line 1" in snap["strict"]["lastError"], snap["strict"]
    assert os.path.exists(os.path.join(mnt, "status", "idle.json"))

    lines = ns.lines()
    assert all(pid == m.proc.pid for _, pid, _ in lines), lines  # NotifyAccess=main
    assert sum(1 for _, _, l in lines if l == "READY=1") == 1
    assert any(l.startswith("STATUS=mounted, 3 queries started") for _, _, l in lines), lines
    assert not any(l == "WATCHDOG=1" for _, _, l in lines), "no WATCHDOG_USEC, no pings"

    m.unmount()
    ns.wait("STOPPING=1", timeout=5)
    texts = [l for _, _, l in ns.lines()]
    assert texts.index("STOPPING=1") > texts.index("READY=1")


def test_ready_with_no_queries(mounts, tmp_path, notify_socket):
    mnt = str(tmp_path / "mnt")
    ns = notify_socket(on_ready=lambda text: snapshot(mnt, []))
    m = mounts.new(mnt=mnt, start=False, env=clean_env(NOTIFY_SOCKET=ns.path))
    m.start()
    ns.wait("READY=1")
    assert not isinstance(ns.ready_seen, Exception), ns.ready_seen
    assert ns.ready_seen["ismount"]
    m.unmount()
    ns.wait("STOPPING=1", timeout=5)


def test_watchdog_pings(mounts, tmp_path, notify_socket):
    data = str(tmp_path / "data")
    config(data, {"dev": ("dev", {})})
    ns = notify_socket()
    # 0.4 s: a ping every 0.2 s; counted loosely, the machine may be busy
    m = mounts.new(data=data, start=False,
                   env=clean_env(NOTIFY_SOCKET=ns.path, WATCHDOG_USEC="400000"))
    m.start()
    ns.wait("READY=1")
    t_ready = time.monotonic()
    ns.wait("WATCHDOG=1", count=3, timeout=15)
    assert "sl-notify" in thread_names(m.proc.pid)
    # the pings go on while the engine works
    os.mkdir(m.inp("dev"))
    write_file(m.inp("dev", "a.json"), b'{"event_id":"a","value":1}\n')
    util.wait_for(lambda: read_json(m.p("status", "dev.json")), 10, "batch 0 of dev")
    before = sum(1 for _, _, l in ns.lines() if l == "WATCHDOG=1")
    ns.wait("WATCHDOG=1", count=before + 2, timeout=15)
    pings = [t for t, _, l in ns.lines() if l == "WATCHDOG=1"]
    assert all(t >= t_ready for t in pings), "a ping before READY=1"
    m.unmount()
    ns.wait("STOPPING=1", timeout=5)


def test_watchdog_for_another_pid_is_not_ours(mounts, tmp_path, notify_socket):
    """WATCHDOG_PID names the process systemd watches: for another one
    (a parent that forked us), sluice sends READY=1 but never pings."""
    ns = notify_socket()
    m = mounts.new(start=False, env=clean_env(NOTIFY_SOCKET=ns.path, WATCHDOG_USEC="200000",
                                              WATCHDOG_PID=str(os.getpid())))
    m.start()
    ns.wait("READY=1")
    time.sleep(1.0)
    assert not any(l == "WATCHDOG=1" for _, _, l in ns.lines())
    m.unmount()


@pytest.mark.allow_stderr(r"stopped|line 1")
def test_nothing_changes_without_notify_socket(mounts, tmp_path, notify_socket):
    data = str(tmp_path / "data")
    config(data, {"strict": ("strict", {"source": {"mode": "FAILFAST"}})})
    land(data, tmp_path, "strict", "bad.json", b"not json\n")
    ns = notify_socket()  # bound, but nobody is told about it
    # WATCHDOG_USEC alone (no NOTIFY_SOCKET) and a JOURNAL_STREAM that is
    # not our stderr change nothing either
    m = mounts.new(data=data, start=False,
                   env=clean_env(WATCHDOG_USEC="200000", JOURNAL_STREAM="1:1"))
    m.start()
    util.wait_for(lambda: "stopped" in m.stderr(), 10, "the strict query's error")
    assert "sl-notify" not in thread_names(m.proc.pid)
    m.unmount()
    assert ns.lines() == []
    err = [l for l in m.stderr().splitlines() if not l.startswith("=== ")]
    assert any(l.startswith("sluice: error: query 'strict' stopped: ") for l in err), err
    assert not any(l.startswith("<") for l in err), err


@pytest.mark.allow_stderr(r"stopped|line 1|deprecated")
def test_journal_priorities(mounts, tmp_path, notify_socket):
    data = str(tmp_path / "data")
    config(data, {"strict": ("strict", {"source": {"mode": "FAILFAST"}}),
                  "old": ("old", {"trigger": {"once": True}})})
    land(data, tmp_path, "strict", "bad.json", b"not json\n")
    ns = notify_socket()
    # -d: libfuse's request trace, logged at info
    m = mounts.new(data=data, start=False, extra_args=["-d"])
    with open(m.log, "ab"):
        pass
    st = os.stat(m.log)  # the daemon's stderr: JOURNAL_STREAM names it
    m.env = clean_env(NOTIFY_SOCKET=ns.path, JOURNAL_STREAM="%d:%d" % (st.st_dev, st.st_ino))
    m.start()
    ns.wait("READY=1")
    m.unmount()
    err = [l for l in m.stderr().splitlines() if l and not l.startswith("=== ")]
    assert any(l.startswith("<3>query 'strict' stopped: ") for l in err), err[:20]
    assert any(l.startswith("<4>query 'old': trigger once is deprecated") for l in err), err[:20]
    assert any(l.startswith("<6>") for l in err), err[:20]
    # every line sluice logged carries its priority
    assert all(l[0] == "<" and l[1] in "01234567" and l[2] == ">" for l in err), \
        [l for l in err if not l.startswith("<")][:10]


def build_dir():
    """The meson build dir SLUICE_BIN belongs to (BUILD/tools/sluice)."""
    d = os.path.dirname(os.path.dirname(os.path.abspath(util.sluice_bin())))
    return d if os.path.exists(os.path.join(d, "meson-private")) else None


def installed_unit(tmp_path):
    """Runs `meson install --destdir` and returns (unit path, prefix)."""
    b = build_dir()
    if b is None or shutil.which("meson") is None:
        pytest.skip("SLUICE_BIN is not inside a meson build dir")
    dest = tmp_path / "dest"
    util.run(["meson", "install", "-C", b, "--no-rebuild", "--quiet", "--destdir", str(dest)],
             timeout=120, check=True)
    opts = json.loads(util.run(["meson", "introspect", "--buildoptions", b],
                               check=True).stdout)
    opt = {o["name"]: o["value"] for o in opts}
    units = [os.path.join(r, f) for r, _, fs in os.walk(dest) for f in fs
             if f == "sluice@.service"]
    assert len(units) == 1, units
    return units[0], opt["prefix"], opt["bindir"]


def test_meson_installs_the_unit(tmp_path):
    unit, prefix, bindir = installed_unit(tmp_path)
    text = open(unit).read()
    assert "@BINDIR@" not in text
    exe = os.path.join(prefix, bindir, "sluice")
    assert "ExecStart=%s mount -f ${DATA_DIR} ${MOUNTPOINT} $OPTIONS" % exe in text
    for line in ("Type=notify", "NotifyAccess=main", "EnvironmentFile=/etc/sluice/%i.conf",
                 "ExecStop=-/bin/fusermount3 -u ${MOUNTPOINT}", "KillMode=mixed",
                 "Restart=on-failure"):
        assert line in text.splitlines(), line
    assert any(l.startswith("WatchdogSec=") for l in text.splitlines())
    if shutil.which("systemd-analyze"):
        # the unit's syntax, as systemd reads it (offline: no running systemd needed)
        conf = tmp_path / "etc-sluice.conf"
        conf.write_text("DATA_DIR=/srv/x\nMOUNTPOINT=/mnt/x\n")
        copy = tmp_path / "units" / "sluice@t.service"
        copy.parent.mkdir()
        copy.write_text(text.replace("/etc/sluice/%i.conf", str(conf))
                        .replace(exe, util.sluice_bin()))
        p = util.run(["systemd-analyze", "verify", "--man=no", str(copy)], timeout=60)
        problems = [l for l in util._txt(p.stderr).splitlines()
                    if "sluice@t.service" in l]
        assert p.returncode == 0 and not problems, util._txt(p.stderr)


def systemd_missing_reason():
    try:
        with open("/proc/1/comm") as f:
            init = f.read().strip()
    except OSError as e:
        return "cannot read /proc/1/comm: %s" % e
    if init != "systemd":
        return "PID 1 is %r, not systemd: the protocol is checked with a socket of our own" % init
    if shutil.which("systemctl") is None:
        return "no systemctl"
    p = util.run(["systemctl", "is-system-running"], timeout=30)
    state = util._txt(p.stdout).strip()
    if state not in ("running", "degraded"):
        return "systemd is %r" % state
    return None


def test_unit_under_real_systemd(tmp_path):
    reason = systemd_missing_reason()
    if reason:
        pytest.skip(reason)
    unit, prefix, bindir = installed_unit(tmp_path)
    inst = "pytest%d" % os.getpid()
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    conf = tmp_path / (inst + ".conf")
    conf.write_text("DATA_DIR=%s\nMOUNTPOINT=%s\n" % (data, mnt))
    text = open(unit).read()
    text = text.replace("/etc/sluice/%i.conf", str(tmp_path / "%i.conf"))
    text = text.replace(os.path.join(prefix, bindir, "sluice"), util.sluice_bin())
    tmp_unit = tmp_path / "units" / "sluice@.service"
    tmp_unit.parent.mkdir()
    tmp_unit.write_text(text)
    name = "sluice@%s.service" % inst
    util.run(["systemctl", "link", str(tmp_unit)], check=True)
    try:
        util.run(["systemctl", "start", name], timeout=60, check=True)
        show = util._txt(util.run(["systemctl", "show", "-p", "ActiveState,StatusText",
                                   name], check=True).stdout)
        assert "ActiveState=active" in show, show
        assert "StatusText=mounted" in show, show
        assert os.path.ismount(mnt)
        util.read_landing(str(mnt))
        util.run(["systemctl", "stop", name], timeout=120, check=True)
        assert not util.is_listed_mount(mnt)
    finally:
        util.run(["systemctl", "stop", name], timeout=120)
        util.run(["systemctl", "disable", "sluice@.service"], timeout=60)
        util.lazy_unmount(mnt)
