"""Fixtures for sluice's integration tests (modelled on libfuse and sshfs test/).

- Every test is skipped when /dev/fuse or fusermount3 is missing, or when
  not running as root (they mount tmpfs, chown, switch users, unshare).
- Every test has a timeout (the `timeout` marker, DEFAULT_TIMEOUT otherwise):
  pytest-timeout when it is installed, else SIGALRM plus a watchdog thread
  that kills the test's daemons, so a syscall blocked on a hung mount returns.
- `mounts` starts `sluice mount DATA MNT -f` children, each with its own data
  dir and mountpoint; teardown always lazy-unmounts and kills them by pid, and
  fails the test on unexpected error/warning lines on their stderr.
- `mnt` is one started mount with the default options.
"""

import os
import signal
import sys
import threading

import pytest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import util  # noqa: E402

DEFAULT_TIMEOUT = 45


def pytest_configure(config):
    config.addinivalue_line("markers", "timeout(seconds): per-test time limit")
    config.addinivalue_line("markers", "allow_stderr(regex, ...): daemon stderr lines this test expects")
    config.addinivalue_line("markers", "uses_fuse: needs /dev/fuse and fusermount3")


def pytest_collection_modifyitems(config, items):
    skip = util.fuse_test_marker()
    have_plugin = config.pluginmanager.hasplugin("timeout")
    for item in items:
        item.add_marker(pytest.mark.uses_fuse)
        item.add_marker(skip)
        if have_plugin and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(DEFAULT_TIMEOUT))


def pytest_report_header(config):
    reason = util.fuse_missing_reason()
    b = util.sluice_bin()
    return ["sluice: %s%s" % (b, "" if os.access(b, os.X_OK) else " (MISSING: build it or set SLUICE_BIN)"),
            "fuse: %s" % ("available" if reason is None else "SKIPPED: " + reason)]


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


class Timeout(Exception):
    pass


@pytest.fixture(autouse=True)
def _timeout(request):
    if request.config.pluginmanager.hasplugin("timeout"):
        yield
        return
    m = request.node.get_closest_marker("timeout")
    secs = int(m.args[0]) if m else DEFAULT_TIMEOUT

    fired = []

    def on_alarm(signum, frame):
        fired.append(True)
        raise Timeout("test exceeded its %ds timeout" % secs)

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(secs)
    # If the main thread sits in a FUSE request the daemon never answers,
    # SIGALRM cannot interrupt it; killing the daemon aborts the connection.
    watchdog = threading.Timer(secs + 5, util.abort_all)
    watchdog.daemon = True
    watchdog.start()
    try:
        yield
    finally:
        signal.alarm(0)
        watchdog.cancel()
        signal.signal(signal.SIGALRM, old)
    # The Timeout exception can surface anywhere (even inside pytest's own
    # code once a blocked syscall returns); this makes sure it is reported.
    if fired:
        pytest.fail("test exceeded its %ds timeout" % secs, pytrace=False)


class Mounts:
    """Factory for mounts; each gets a fresh data dir and mountpoint."""

    def __init__(self, tmp_path, allowed):
        self.tmp = tmp_path
        self.all = []
        self.allowed = allowed
        self.n = 0
        self.problems = None

    def new(self, data=None, mnt=None, opts=(), start=True, **kw):
        self.n += 1
        data = data or self.tmp / ("data%d" % self.n)
        mnt = mnt or self.tmp / ("mnt%d" % self.n)
        os.makedirs(mnt, exist_ok=True)
        m = util.Mount(data, mnt, opts=opts,
                       log=self.tmp / ("sluice%d.stderr" % self.n), **kw)
        for a in self.allowed:
            m.allow(a)
        self.all.append(m)
        if start:
            m.start()
        return m

    def remount(self, m, opts=None):
        """A new daemon on the same data dir and mountpoint (same stderr log)."""
        m2 = util.Mount(m.data, m.mnt, opts=m.opts if opts is None else opts,
                        log=m.log, env=m.env)
        m2.allowed = list(m.allowed)
        self.all.append(m2)
        m2.start()
        return m2

    def cleanup_all(self):
        for m in reversed(self.all):
            m.cleanup()

    def finish(self, request):
        """Teardown (idempotent): normal unmount of each live mount when the
        test passed, then always lazy unmount + kill; returns the problems."""
        if self.problems is not None:
            return self.problems
        # Teardown must finish even if the test timed out: our own calls are bounded.
        signal.alarm(0)
        problems = []
        rep = getattr(request.node, "rep_call", None)
        passed = rep is not None and rep.passed
        try:
            for m in self.all:
                if m.proc is None or m.killed or m.unmounted:
                    continue
                rc = m.proc.poll()
                if rc is not None:
                    problems.append("sluice mount %s died on its own (exit %d)" % (m.mnt, rc))
                elif passed:
                    # The normal way out, asserted: fusermount3 -u, daemon exits 0.
                    try:
                        m.unmount()
                    except (AssertionError, pytest.fail.Exception) as e:
                        problems.append(str(e))
        finally:
            self.cleanup_all()
        seen = set()
        for m in self.all:
            if m.log in seen:
                continue
            seen.add(m.log)
            lines = m.suspicious_lines()
            if lines:
                problems.append("unexpected lines on %s:\n  %s" % (m.log, "\n  ".join(lines)))
        leftovers = [m.mnt for m in self.all if util.is_listed_mount(m.mnt)]
        if leftovers:
            problems.append("mounts left behind: %r" % leftovers)
        self.problems = problems
        return problems


@pytest.fixture
def mounts(request, tmp_path):
    allowed = []
    for mk in request.node.iter_markers("allow_stderr"):
        allowed.extend(mk.args)
    ms = Mounts(tmp_path, allowed)
    yield ms
    problems = ms.finish(request)
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def mnt(mounts):
    """One mount with default options."""
    return mounts.new()


@pytest.fixture
def tmpfs_data(request, tmp_path, mounts):
    """A 64 MiB tmpfs as the data dir; unmounted after the FUSE mounts."""
    d = tmp_path / "tmpfs"
    d.mkdir()
    util.mount_tmpfs(d, "64m")
    yield d
    mounts.finish(request)  # unmount FUSE first: the daemon holds files on the tmpfs
    util.umount_tmpfs(d)


@pytest.fixture
def src(tmp_path):
    """A scratch folder outside the mount for source files."""
    d = tmp_path / "src"
    d.mkdir()
    return d
