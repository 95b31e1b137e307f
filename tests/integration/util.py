"""Helpers for sluice's integration tests (modelled on libfuse and sshfs test/util.py).

Everything here is bounded in time: every subprocess call has a timeout,
every poll has a deadline, and nothing stats a mountpoint during cleanup
(a dead or hung FUSE mount would block the call).
"""

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# Seconds to wait for a mount to appear, for counters to settle, for a
# command to finish.
MOUNT_TIMEOUT = 10
LAND_TIMEOUT = 10
CMD_TIMEOUT = 30
UNMOUNT_TIMEOUT = 15

LAYOUT = {"in", "out", "checkpoint", "status", "archive"}

# Daemon stderr lines that fail a test unless allowed (libfuse's output_checker).
SUSPICIOUS = re.compile(
    r"error|warning|exception|fatal|abort|assert|sanitizer|leak|segmentation|"
    r"core dumped|panic|bug",
    re.IGNORECASE,
)


def sluice_bin():
    return os.environ.get("SLUICE_BIN", os.path.join(REPO, "build", "tools", "sluice"))


def fuse_missing_reason():
    """Why FUSE tests cannot run here, or None (libfuse fuse_test_marker)."""
    if os.getuid() != 0:
        # they mount tmpfs, chown, switch users, unshare: run them as root
        return "the integration tests run as root"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist"
    if shutil.which("fusermount3") is None:
        return "fusermount3 not found"
    try:
        fd = os.open("/dev/fuse", os.O_RDWR)
    except OSError as e:
        return "cannot open /dev/fuse: %s" % e
    os.close(fd)
    return None


def fuse_test_marker():
    reason = fuse_missing_reason()
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def run(args, timeout=CMD_TIMEOUT, check=False, **kw):
    """subprocess.run with text output captured and a timeout, always."""
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    kw.setdefault("stdin", subprocess.DEVNULL)
    p = subprocess.run(args, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise AssertionError(
            "%r exited %d\nstdout: %s\nstderr: %s"
            % (args, p.returncode, _txt(p.stdout), _txt(p.stderr))
        )
    return p


def _txt(b):
    if isinstance(b, bytes):
        return b.decode("utf-8", "replace")
    return b or ""


def sluice(*args, timeout=CMD_TIMEOUT, **kw):
    """Run the sluice binary; returns CompletedProcess with str stdout/stderr."""
    p = run([sluice_bin()] + [str(a) for a in args], timeout=timeout, **kw)
    p.stdout = _txt(p.stdout)
    p.stderr = _txt(p.stderr)
    return p


def require_command(name):
    """Skip when the binary does not have this command yet (e.g. `run` before
    the engine exists); once it exists, the test holds it to the contract."""
    p = sluice(name, "--help", timeout=10)
    if p.returncode == 2 and "unknown command" in p.stderr:
        pytest.skip("sluice has no '%s' command yet" % name)


def one_line(text):
    """The stderr of a refused command: exactly one non-empty line."""
    lines = [l for l in text.splitlines() if l.strip()]
    assert len(lines) == 1, "expected one line on stderr, got %r" % text
    return lines[0]


def proc_mounts():
    """Mountpoints from /proc/mounts (octal escapes decoded); never stats."""
    out = []
    with open("/proc/mounts", "rb") as f:
        for line in f:
            fields = line.split(b" ")
            if len(fields) < 3:
                continue
            mp = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), fields[1])
            out.append((mp.decode("utf-8", "surrogateescape"), fields[2].decode()))
    return out


def is_listed_mount(path):
    path = os.path.realpath(path)
    return any(mp == path for mp, _ in proc_mounts())


def lazy_unmount(path):
    """fusermount3 -u -z, without caring whether anything is mounted."""
    try:
        subprocess.run(["fusermount3", "-u", "-z", "-q", str(path)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       stdin=subprocess.DEVNULL, timeout=UNMOUNT_TIMEOUT)
    except subprocess.TimeoutExpired:
        pass


# Every daemon started by a test, so a watchdog can kill them when a test hangs.
_ACTIVE = set()
_ACTIVE_LOCK = threading.Lock()


def abort_all():
    """Called by the timeout watchdog: kill every daemon, which aborts its FUSE
    connection, so a test blocked in a syscall on the mount gets ENOTCONN."""
    with _ACTIVE_LOCK:
        mounts = list(_ACTIVE)
    for m in mounts:
        m.kill9()
        lazy_unmount(m.mnt)


class Mount:
    """One `sluice mount DATA MNT -f` child process."""

    def __init__(self, data, mnt, opts=(), extra_args=(), log=None, env=None):
        self.data = str(data)
        self.mnt = str(mnt)
        self.opts = list(opts)
        self.extra_args = list(extra_args)
        self.log = str(log or (str(mnt) + ".stderr"))
        self.env = env
        self.proc = None
        self.killed = False
        self.unmounted = False
        self.allowed = []  # regexes of stderr lines this test expects
        self.checked_upto = 0

    # -- life cycle --------------------------------------------------------
    def start(self, timeout=MOUNT_TIMEOUT):
        os.makedirs(self.mnt, exist_ok=True)
        args = [sluice_bin(), "mount", self.data, self.mnt, "-f"]
        if self.opts:
            args += ["-o", ",".join(self.opts)]
        args += self.extra_args
        self.killed = False
        self.unmounted = False
        with open(self.log, "ab") as err:
            err.write(b"=== %s\n" % " ".join(args).encode())
            err.flush()
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                         stdout=err, stderr=err, env=self.env)
        with _ACTIVE_LOCK:
            _ACTIVE.add(self)
        self.wait_for_mount(timeout)
        return self

    def wait_for_mount(self, timeout=MOUNT_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.ismount(self.mnt):
                return
            rc = self.proc.poll()
            if rc is not None:
                self.unmounted = True  # nothing to unmount; reported here
                pytest.fail("sluice mount exited with %d before mounting; stderr:\n%s"
                            % (rc, self.stderr()))
            time.sleep(0.02)
        pytest.fail("mount did not appear within %ds; stderr:\n%s" % (timeout, self.stderr()))

    def unmount(self):
        """The normal way out: fusermount3 -u, which must succeed, then the
        daemon must exit 0 on its own."""
        assert not self.killed
        p = None
        # A just-closed file may still pin the mount for a moment (EBUSY).
        deadline = time.monotonic() + 5
        while True:
            p = run(["fusermount3", "-u", self.mnt], timeout=UNMOUNT_TIMEOUT)
            if p.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert p.returncode == 0, "fusermount3 -u failed: %s" % _txt(p.stderr)
        try:
            rc = self.proc.wait(timeout=UNMOUNT_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail("sluice did not exit within %ds of fusermount3 -u" % UNMOUNT_TIMEOUT)
        self.unmounted = True
        with _ACTIVE_LOCK:
            _ACTIVE.discard(self)
        assert rc == 0, "sluice mount exited %d after unmount; stderr:\n%s" % (rc, self.stderr())

    def kill9(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.killed = True
            try:
                self.proc.wait(timeout=UNMOUNT_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass

    def cleanup(self):
        """Always run: lazy unmount, then kill our daemon by pid and reap it."""
        lazy_unmount(self.mnt)
        # a failed test may have stacked a second mount on a dead one
        for _ in range(5):
            if not is_listed_mount(self.mnt):
                break
            lazy_unmount(self.mnt)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                try:
                    os.kill(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                try:
                    self.proc.wait(timeout=UNMOUNT_TIMEOUT)
                except subprocess.TimeoutExpired:
                    pass
            # a daemon slow to start may have mounted after the unmount above
            if is_listed_mount(self.mnt):
                lazy_unmount(self.mnt)
        with _ACTIVE_LOCK:
            _ACTIVE.discard(self)

    # -- stderr ------------------------------------------------------------
    def stderr(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def allow(self, regex):
        """Lines matching regex are expected on the daemon's stderr."""
        self.allowed.append(re.compile(regex, re.IGNORECASE))

    def suspicious_lines(self):
        bad = []
        for line in self.stderr().splitlines():
            if line.startswith("=== "):
                continue
            if not SUSPICIOUS.search(line):
                continue
            if any(a.search(line) for a in self.allowed):
                continue
            bad.append(line)
        return bad

    # -- paths and counters -----------------------------------------------
    def p(self, *parts):
        return os.path.join(self.mnt, *parts)

    def inp(self, *parts):
        return os.path.join(self.mnt, "in", *parts)

    def landing(self):
        return read_landing(self.mnt)

    def wait_landed(self, timeout=LAND_TIMEOUT):
        return wait_landed(self.mnt, timeout)


def read_landing(mnt):
    with open(os.path.join(mnt, "status", "landing.json"), "rb") as f:
        raw = f.read()
    try:
        d = json.loads(raw)
    except ValueError:
        raise AssertionError("status/landing.json is not JSON: %r" % raw)
    for k in ("filesLanded", "bytesLanded", "filesInFlight", "refused"):
        assert k in d, "status/landing.json lacks %s: %r" % (k, d)
    return d


def wait_for(pred, timeout, what, interval=0.02):
    """Poll pred() until it returns a truthy value; fail after timeout."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = pred()
        if last:
            return last
        if time.monotonic() > deadline:
            pytest.fail("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(interval)


def wait_landed(mnt, timeout=LAND_TIMEOUT):
    """Poll status/landing.json until filesInFlight == 0; returns the counters.

    Tests that check what a landed file refuses call this first: a file lands
    at RELEASE, which the kernel sends asynchronously after close(2)."""
    state = {}

    def done():
        state["d"] = read_landing(mnt)
        return state["d"]["filesInFlight"] == 0

    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            pytest.fail("filesInFlight still %d after %ss: %r"
                        % (state["d"]["filesInFlight"], timeout, state["d"]))
        time.sleep(0.02)
    return state["d"]


def wait_counters(mnt, timeout=LAND_TIMEOUT, **want):
    """Poll until every given counter (filesLanded=..., filesInFlight=...) has the value."""
    state = {}

    def ok():
        state["d"] = read_landing(mnt)
        return all(state["d"][k] == v for k, v in want.items())

    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > deadline:
            pytest.fail("counters %r not reached after %ss: %r" % (want, timeout, state["d"]))
        time.sleep(0.02)
    return state["d"]


def refused(d, name="EPERM"):
    return int(d.get("refused", {}).get(name, 0))


def write_file(path, data, mode=None, mtime_ns=None):
    """open/write/close through plain os calls; returns the path."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd = os.open(path, flags, 0o644 if mode is None else mode)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if mode is not None:
            os.fchmod(fd, mode)
        if mtime_ns is not None:
            os.utime(fd, ns=(mtime_ns, mtime_ns))
    finally:
        os.close(fd)
    return path


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def pattern(n, seed=0):
    """n deterministic, non-repeating-looking bytes."""
    import hashlib
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(b"%d:%d" % (seed, i)).digest()
        i += 1
    return bytes(out[:n])


def expect_errno(err, fn, *args, **kw):
    """fn(*args) must raise OSError with errno err."""
    with pytest.raises(OSError) as ei:
        fn(*args, **kw)
    assert ei.value.errno == err, "expected %s, got %s (%s)" % (
        errno.errorcode[err], errno.errorcode.get(ei.value.errno), ei.value)


def faults_compiled():
    """Whether the binary was built with fault points (-Dfaults=true)."""
    return "(faults)" in sluice("--version").stdout


def mount_tmpfs(path, size):
    """A tmpfs of size (mount -o size=) at path, an existing folder; skips
    the test when tmpfs cannot be mounted here."""
    p = run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0700" % size, "tmpfs", str(path)])
    if p.returncode != 0:
        pytest.skip("cannot mount a tmpfs: %s" % p.stderr.decode(errors="replace").strip())


def umount_tmpfs(path):
    """Unmounts a tmpfs, retrying while a daemon that just exited still holds
    files on it; lazily at last."""
    for _ in range(50):
        if run(["umount", str(path)], timeout=10).returncode == 0:
            return
        time.sleep(0.1)
    run(["umount", "-l", str(path)], timeout=10)


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


SPARK_LOG = "_spark_metadata"


def walk_out(base):
    """os.walk of an out/<query>/ folder without Spark's _spark_metadata log
    (rendered beside the parts of append-mode queries): the parts only."""
    for dirpath, dirs, names in os.walk(base):
        if dirpath == base and SPARK_LOG in dirs:
            dirs.remove(SPARK_LOG)
        yield dirpath, dirs, names


def list_out(folder):
    """os.listdir of an out/<query>/ folder without _spark_metadata."""
    return [n for n in os.listdir(folder) if n != SPARK_LOG]


def count_files(root):
    n = 0
    for _dirpath, _dirs, files in os.walk(root):
        n += len(files)
    return n


# -- renameat2 through ctypes -------------------------------------------------
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
RENAME_WHITEOUT = 4
AT_FDCWD = -100
_SYS_renameat2 = {"x86_64": 316, "aarch64": 276, "i686": 353, "i386": 353,
                  "armv7l": 382, "riscv64": 276, "ppc64le": 357, "s390x": 347}


def renameat2(old, new, flags):
    import ctypes
    import platform
    libc = ctypes.CDLL(None, use_errno=True)
    o = os.fsencode(old)
    n = os.fsencode(new)
    fn = getattr(libc, "renameat2", None)
    if fn is not None:
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        rc = fn(AT_FDCWD, o, AT_FDCWD, n, flags)
    else:
        nr = _SYS_renameat2[platform.machine()]
        libc.syscall.restype = ctypes.c_long
        rc = libc.syscall(ctypes.c_long(nr), ctypes.c_int(AT_FDCWD), ctypes.c_char_p(o),
                          ctypes.c_int(AT_FDCWD), ctypes.c_char_p(n), ctypes.c_uint(flags))
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), old)


# -- outside readers: DuckDB and hyparquet from npm ------------------------------

NPM_PACKAGES = ("@duckdb/node-api", "hyparquet", "hyparquet-compressors")
_npm_lock = threading.Lock()
_npm_state = {}


def npm_modules():
    """The node_modules folder holding NPM_PACKAGES, installed with npm on
    first use into $SLUICE_NPM_DIR (default tests/.npm); None when node or
    npm is missing or the install fails (then `npm_missing` says why).
    Tests that need them skip with that reason."""
    with _npm_lock:
        if "dir" in _npm_state:
            return _npm_state["dir"]
        root = os.environ.get("SLUICE_NPM_DIR") or os.path.join(REPO, "tests", ".npm")
        mods = os.path.join(root, "node_modules")
        have = all(os.path.exists(os.path.join(mods, p, "package.json")) for p in NPM_PACKAGES)
        why = None
        if shutil.which("node") is None:
            why = "node not found"
        elif not have and shutil.which("npm") is None:
            why = "npm not found, and %s lacks %s" % (mods, " ".join(NPM_PACKAGES))
        elif not have:
            os.makedirs(root, exist_ok=True)
            # a file lock: parallel pytest sessions share the folder
            import fcntl
            with open(os.path.join(root, ".lock"), "w") as lk:
                fcntl.flock(lk, fcntl.LOCK_EX)
                have = all(os.path.exists(os.path.join(mods, p, "package.json"))
                           for p in NPM_PACKAGES)
                if not have:
                    p = subprocess.run(["npm", "install", "--no-audit", "--no-fund",
                                        "--prefix", root] + list(NPM_PACKAGES),
                                       stdin=subprocess.DEVNULL, capture_output=True,
                                       timeout=600)
                    if p.returncode != 0:
                        why = "npm install failed: %s" % _txt(p.stderr)[-300:]
        _npm_state["dir"] = None if why else mods
        _npm_state["why"] = why
        return _npm_state["dir"]


def npm_missing():
    npm_modules()
    return _npm_state.get("why")


def duckdb_json(sql, timeout=120):
    """Runs each statement of sql (a list) in an in-memory DuckDB; returns a
    list of results, each a list of row objects as @duckdb/node-api's
    getRowObjectsJson gives them (BIGINT as strings, NaN/Infinity as strings,
    TIMESTAMPTZ as '2026-10-04 12:00:00+00'). Skips the test without DuckDB."""
    mods = npm_modules()
    if mods is None:
        pytest.skip(npm_missing())
    p = subprocess.run(["node", os.path.join(HERE, "duckdb_json.cjs"), mods] + list(sql),
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    assert p.returncode == 0, "duckdb failed: %s" % _txt(p.stderr)
    return [json.loads(l) for l in _txt(p.stdout).splitlines()]
