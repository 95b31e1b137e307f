"""Operations racing RELEASE (DESIGN.md §1, landing rules, the RELEASE
bullet): a file lands when its last writable handle is released, and from
that RELEASE on it is landed for every caller. An open for write or a
truncate that the daemon orders after the RELEASE gets EPERM and never
changes what lands; one ordered before it joins the same landing. chmod,
chown and utimensat succeed either way and are kept, durably. A file being
published counts in filesInFlight until its commit.

Each test races one kind of operation against the RELEASE of hundreds of
files from several threads (and bash processes), then checks, per file, that
what landed is what its writer was told, whichever of the two allowed
outcomes it got; that the counters never go backwards, never lose a closed
file and never count one twice; that `sluice status` never shows an absurd
backlog; and that after an unmount `sluice run --available-now` has
processed every landed file exactly once with all its rows (two queries: one
that ran live in the mount during the race, one on a timer), `sluice check`
is clean, and a remount shows the same bytes and attributes.

Reproduce a failure with SLUICE_RACE_SEED=<seed printed in the failure>;
SLUICE_RACE_FILES scales the number of files per test.
"""

import concurrent.futures
import errno
import json
import os
import random
import re
import stat
import subprocess
import tempfile
import threading
import time
import zlib

import pytest

import util

SEED = int(os.environ.get("SLUICE_RACE_SEED", "20261201"))
NFILES = int(os.environ.get("SLUICE_RACE_FILES", "360"))  # python-driven files per test
NSHELL = max(1, NFILES // 4)                              # bash-driven files per test
WORKERS = 6
RACE_BUDGET = 60   # seconds: a worker stops starting new files after this
HUGE = 2 ** 62     # any counter at or above this is an unsigned underflow

pytestmark = pytest.mark.timeout(240)

SCHEMA = "event_id STRING, n BIGINT, pad STRING"
QUERIES = {
    # runs in the mount while the race goes on: woken by every landing
    "live": {"source": {"format": "json", "path": "race", "schema": SCHEMA,
                        "maxFilesPerTrigger": 7}},
    # a timer and a byte cap: batches that straddle many landings
    "timed": {"source": {"format": "json", "path": "race", "schema": SCHEMA,
                         "maxBytesPerTrigger": "256k"},
              "trigger": {"processingTime": "250 ms"}},
}

MODES = [0o600, 0o640, 0o444, 0o604, 0o660]
BASE_MTIME_NS = 1_650_000_000_000_000_000
OTHER_GIDS = [1001, 1002, 4242, 65533]


# -- contents ----------------------------------------------------------------

def rows(tag, nrows, pad):
    """JSON lines with unique event ids: every landed row is traceable."""
    return b"".join(json.dumps({"event_id": "%s/%d" % (tag, i), "n": i, "pad": "p" * pad},
                               separators=(",", ":")).encode() + b"\n"
                    for i in range(nrows))


def content(rnd, tag):
    """Mostly small (inline) files, some above the 64 KiB inline limit (blobs)."""
    if rnd.random() < 0.1:
        return rows(tag, rnd.randint(60, 90), 1200)   # ~75-110 KB: a blob
    return rows(tag, rnd.randint(1, 12), rnd.randint(0, 40))


def event_ids(data):
    return [json.loads(l)["event_id"] for l in data.decode().splitlines() if l.strip()]


def short(data):
    return "%d bytes, %d rows" % (len(data), data.count(b"\n"))


# -- the per-file ledger -------------------------------------------------------

class Ledger:
    """What each writer was told, per file, and the counts the monitor uses.

    `created` counts every create attempt before it is made (an upper bound
    on what can have landed); `closed` counts creates whose close(2) returned
    success, after it returned, less the files a test is about to remove (a
    lower bound on landed + in flight). `removed` holds the files an rm took
    away: each may have landed (and been processed) or not, never twice."""

    def __init__(self, seed):
        self.seed = seed
        self.lock = threading.Lock()
        self.files = {}       # final rel path -> (acceptable contents, attrs or None, label)
        self.created = 0
        self.closed = 0
        self.eperm = 0        # EPERMs the test's own calls got
        self.ebusy = 0        # EBUSYs the test's own calls got
        self.removed = {}     # rel path -> contents, of files an rm took away
        self.outcomes = {}    # label -> count
        self.problems = []

    def will_create(self, n=1):
        with self.lock:
            self.created += n

    def did_close(self, n=1):
        with self.lock:
            self.closed += n

    def expect(self, rel, want, label, attrs=None):
        with self.lock:
            assert rel not in self.files, rel
            self.files[rel] = (frozenset(want), attrs, label)
            self.outcomes[label] = self.outcomes.get(label, 0) + 1

    def refused(self, n=1):
        with self.lock:
            self.eperm += n

    def remove(self, rel, data, label):
        with self.lock:
            self.removed[rel] = data
            self.outcomes[label] = self.outcomes.get(label, 0) + 1

    def problem(self, msg):
        with self.lock:
            self.problems.append(msg)

    def summary(self):
        return ", ".join("%s=%d" % kv for kv in sorted(self.outcomes.items()))


def write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def create(led, path, data, mode=0o644):
    """A fresh file through plain calls; counted in the ledger."""
    led.will_create()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)
    led.did_close()


def late_write(path, flags, data):
    """open/write/close; returns (None, None) or (stage, errno) of the first failure."""
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        return "open", e.errno
    stage = "write"
    try:
        write_all(fd, data)
    except OSError as e:
        try:
            os.close(fd)
        except OSError:
            pass
        return stage, e.errno
    try:
        os.close(fd)
    except OSError as e:
        return "close", e.errno
    return None, None


def judge_late_write(led, rel, first, joined, failure, what):
    """The two outcomes DESIGN allows for a write-open or truncate racing RELEASE:
    it joined the landing (all of it succeeded: `joined` lands) or it was refused
    with EPERM (`first` lands). A refusal after a successful open (at write or
    close) is accepted with either content but labelled, so it shows."""
    stage, err = failure
    if stage is None:
        led.expect(rel, {joined}, what + ":joined")
        return
    if err != errno.EPERM:
        led.problem("%s: %s got %s at %s (only success or EPERM are allowed)"
                    % (rel, what, errno.errorcode.get(err, err), stage))
        led.expect(rel, {first, joined}, what + ":error")
        return
    led.refused()
    if stage == "open":
        led.expect(rel, {first}, what + ":EPERM")
    else:
        led.expect(rel, {first, joined}, what + ":EPERM@" + stage)


def pause(rnd):
    """Mostly nothing between the close and the racing call; sometimes a
    little, to sweep the RELEASE -> group commit window."""
    r = rnd.random()
    if r < 0.6:
        return
    if r < 0.8:
        time.sleep(0)
    else:
        time.sleep(rnd.choice([0.0002, 0.0005, 0.001, 0.002]))


# -- the counters monitor --------------------------------------------------------

BACKLOG = re.compile(r"^(\S+) .*\bbacklog=(-?\d+)/(-?\d+)\b")
LANDING = re.compile(r"^landing files=(-?\d+) bytes=(-?\d+) in_flight=(-?\d+)\b")


class Monitor(threading.Thread):
    """Reads status/landing.json and `sluice status` over and over during
    the race. Truthful checks only:
    - filesLanded never decreases (it counts since the data dir was made);
    - filesLanded <= files created so far (read after the sample): a file
      that lands once is counted once;
    - filesLanded + filesInFlight >= files whose close returned before the
      sample was taken, less those a test began to remove (a file being
      published still counts in flight until its commit);
    - no counter, and no backlog in `sluice status`, is negative or near
      2**64 (an unsigned underflow)."""

    def __init__(self, m, led, budget=RACE_BUDGET + 60):
        super().__init__(daemon=True)
        self.m = m
        self.led = led
        self.stop_ev = threading.Event()
        self.deadline = time.monotonic() + budget
        self.samples = 0
        self.status_runs = 0
        self.problems = []
        self.last_landed = 0

    def note(self, msg):
        if len(self.problems) < 20:
            self.problems.append(msg)

    def check_landing(self):
        with self.led.lock:
            closed = self.led.closed
        d = util.read_landing(self.m.mnt)
        with self.led.lock:
            created = self.led.created
        landed, inflight = d["filesLanded"], d["filesInFlight"]
        self.samples += 1
        if not (0 <= landed < HUGE and 0 <= inflight < HUGE and 0 <= d["bytesLanded"] < HUGE):
            self.note("absurd counters in landing.json: %r" % d)
            return
        if landed < self.last_landed:
            self.note("filesLanded went back from %d to %d" % (self.last_landed, landed))
        self.last_landed = max(self.last_landed, landed)
        if landed > created:
            self.note("filesLanded %d > %d files ever created (double count): %r"
                      % (landed, created, d))
        if landed + inflight < closed:
            self.note("filesLanded %d + filesInFlight %d < %d files closed before the read: %r"
                      % (landed, inflight, closed, d))

    def check_status(self):
        p = util.sluice("status", self.m.data, timeout=30)
        self.status_runs += 1
        with self.led.lock:
            created = self.led.created
        if p.returncode != 0:
            self.note("sluice status exited %d: %s" % (p.returncode, p.stderr.strip()))
            return
        check_status_text(p.stdout, created, self.note)

    def run(self):
        i = 0
        while not self.stop_ev.is_set() and time.monotonic() < self.deadline:
            try:
                self.check_landing()
                if i % 10 == 0:
                    self.check_status()
            except (OSError, ValueError, AssertionError, subprocess.TimeoutExpired) as e:
                self.note("monitor: %s" % e)
            i += 1
            time.sleep(0.003)

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=60)
        assert not self.is_alive(), "the counters monitor is stuck"
        assert self.samples > 0


def check_status_text(text, created, note):
    seen_landing = False
    for line in text.splitlines():
        m = LANDING.match(line)
        if m:
            seen_landing = True
            files, nbytes, inflight = (int(x) for x in m.groups())
            if not (0 <= files <= created and 0 <= nbytes < HUGE and 0 <= inflight < HUGE):
                note("sluice status: absurd landing line (%d files created): %s" % (created, line))
            continue
        m = BACKLOG.match(line)
        if m:
            f, b = int(m.group(2)), int(m.group(3))
            if not (0 <= f < HUGE and 0 <= b < HUGE) or f > created:
                note("sluice status: absurd backlog (%d files created): %s" % (created, line))
    if not seen_landing:
        note("sluice status printed no landing line: %r" % text)


# -- set-up and the final verification ----------------------------------------------

# A test build sleeps this long where a rename or rm has looked a file up
# and its publish may finish before it acts (core/land land_test_gap()).
GAPS = [0, 3000]


def new_mount(mounts, tmp_path, gap_us=0):
    data = str(tmp_path / "data")
    os.makedirs(data)
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump({"queries": QUERIES}, f)
    env = dict(os.environ, SLUICE_FAULT_SIZE="land.race_gap_us:%d" % gap_us) if gap_us else None
    m = mounts.new(data=data, env=env)
    os.mkdir(m.inp("race"))
    return m


def worker_dirs(m, prefix, n):
    out = []
    for w in range(n):
        rel = "race/w=%s%d" % (prefix, w)
        os.mkdir(m.inp(rel))
        out.append(rel)
    return out


def run_workers(fn, n, seed):
    """fn(worker index, its Random) on n threads; re-raises their exceptions."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=n) as ex:
        futs = [ex.submit(fn, w, random.Random("%d:%d" % (seed, w))) for w in range(n)]
        for f in futs:
            f.result(timeout=RACE_BUDGET + 60)


def race_deadline():
    return time.monotonic() + RACE_BUDGET


def listing(root):
    out = set()
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            out.add(os.path.relpath(os.path.join(dirpath, n), root))
    return out


def verify_files(m, led, when, problems):
    """Per file: it is there with one of its acceptable contents and the
    attributes its writer set; nothing else is in in/race."""
    got = {}
    names = {os.path.join("race", p) for p in listing(m.inp("race"))}
    extra = sorted(names - set(led.files))
    back = sorted(names & set(led.removed))
    if back:
        problems.append("%s: %d removed files are listed, e.g. %s" % (when, len(back), back[:5]))
    missing = sorted(set(led.files) - names)
    if extra:
        problems.append("%s: %d unexpected files, e.g. %s" % (when, len(extra), extra[:5]))
    if missing:
        labels = [led.files[r][2] for r in missing]
        problems.append("%s: %d files missing, e.g. %s (outcomes %s)"
                        % (when, len(missing), missing[:5], sorted(set(labels))))
    for rel, (want, attrs, label) in sorted(led.files.items()):
        if rel not in names:
            continue
        p = m.inp(rel)
        try:
            data = util.read_file(p)
            st = os.stat(p)
        except OSError as e:
            problems.append("%s: %s (%s): listed, but reading it: %s" % (when, rel, label, e))
            continue
        got[rel] = data
        if data not in want:
            problems.append("%s: %s (%s): landed %s, want %s" % (
                when, rel, label, short(data), " or ".join(short(w) for w in want)))
        if st.st_size != len(data):
            problems.append("%s: %s: st_size %d but %d bytes read" % (when, rel, st.st_size,
                                                                       len(data)))
        for k, v in (attrs or {}).items():
            have = {"mode": stat.S_IMODE(st.st_mode), "mtime_ns": st.st_mtime_ns,
                    "gid": st.st_gid, "uid": st.st_uid}[k]
            if have != v:
                problems.append("%s: %s (%s): %s is %s, its writer set %s" % (
                    when, rel, label, k, oct(have) if k == "mode" else have,
                    oct(v) if k == "mode" else v))
    return got


def out_rows(m, query):
    ids = {}
    base = os.path.join(m.mnt, "out", query)
    for dirpath, _dirs, names in util.walk_out(base):
        for n in names:
            with open(os.path.join(dirpath, n), "rb") as f:
                for line in f.read().decode().splitlines():
                    if line.strip():
                        eid = json.loads(line).get("event_id")
                        ids[eid] = ids.get(eid, 0) + 1
    return ids


def finish(mounts, m, led, mon):
    """Counters settle, every file is as its writer was told (now, and after
    an unmount, `sluice run --available-now` and a remount), every landed row
    is in each query's output exactly once, `sluice check` is clean."""
    mon.stop()
    problems = list(led.problems) + ["counters during the race: " + p for p in mon.problems]
    d = util.wait_landed(m.mnt, timeout=60)
    n = len(led.files)
    print("race seed %d: %d files (%s); %d counter samples, %d status runs"
          % (led.seed, n, led.summary(), mon.samples, mon.status_runs))

    got = verify_files(m, led, "mounted", problems)
    # a removed file counts in filesLanded (since the data dir was made) if it landed
    nrm = len(led.removed)
    if not n <= d["filesLanded"] <= n + nrm:
        problems.append("filesLanded %d once filesInFlight == 0, but %d files were created "
                        "and kept, %d removed: %r" % (d["filesLanded"], n, nrm, d))
    kept_bytes = sum(len(v) for v in got.values())
    rm_bytes = sum(len(v) for v in led.removed.values())
    if not kept_bytes <= d["bytesLanded"] <= kept_bytes + rm_bytes:
        problems.append("bytesLanded %d, the landed files hold %d bytes (removed ones %d)"
                        % (d["bytesLanded"], kept_bytes, rm_bytes))
    if util.refused(d) != led.eperm:
        problems.append("refused.EPERM is %d, the test's calls got EPERM %d times"
                        % (util.refused(d), led.eperm))
    if util.refused(d, "EBUSY") != led.ebusy:
        problems.append("refused.EBUSY is %d, the test's calls got EBUSY %d times"
                        % (util.refused(d, "EBUSY"), led.ebusy))
    p = util.sluice("status", m.data)
    check_status_text(p.stdout, n + nrm, lambda s: problems.append("after the race: " + s))

    m.unmount()
    p = util.sluice("run", "--available-now", m.data, timeout=120)
    if p.returncode != 0:
        problems.append("sluice run --available-now exited %d: %s" % (p.returncode,
                                                                     p.stderr.strip()))
    p = util.sluice("check", m.data, timeout=120)
    if p.returncode != 0:
        problems.append("sluice check exited %d: %s" % (p.returncode,
                                                       (p.stdout + p.stderr).strip()[:2000]))
    p = util.sluice("status", m.data)
    for line in p.stdout.splitlines():
        lm = LANDING.match(line)
        if lm and int(lm.group(1)) != d["filesLanded"]:
            problems.append("sluice status after run: %s (%d files landed)"
                            % (line, d["filesLanded"]))
        bm = BACKLOG.match(line)
        if bm and (bm.group(2), bm.group(3)) != ("0", "0"):
            problems.append("sluice status after run --available-now: %s" % line)

    m2 = mounts.remount(m)
    d2 = util.wait_landed(m2.mnt, timeout=30)
    got2 = verify_files(m2, led, "remounted", problems)
    for rel in sorted(set(got) & set(got2)):
        if got[rel] != got2[rel]:
            problems.append("%s: %s before the remount, %s after" % (rel, short(got[rel]),
                                                                     short(got2[rel])))
    if d2["filesLanded"] != d["filesLanded"]:
        problems.append("after the remount filesLanded %d, before it %d"
                        % (d2["filesLanded"], d["filesLanded"]))
    want = {}
    for rel, data in got2.items():
        try:
            ids = event_ids(data)
        except ValueError:
            # already reported: its bytes are not what its writer wrote
            ids = [l for l in event_ids(b"".join(w for w in led.files[rel][0]))]
        for eid in ids:
            want[eid] = rel
    maybe = {}  # rows of removed files: processed once before the rm, or never
    for rel, data in led.removed.items():
        for eid in event_ids(data):
            maybe[eid] = rel
    for q in QUERIES:
        have = out_rows(m2, q)
        lost = sorted(set(want) - set(have))
        dup = sorted(k for k, v in have.items() if v > 1)
        foreign = sorted(set(have) - set(want) - set(maybe))
        if lost:
            problems.append("out/%s: %d landed rows missing, e.g. %s of %s"
                            % (q, len(lost), lost[:3], sorted({want[k] for k in lost})[:5]))
        if dup:
            files = sorted({want.get(k, "?") for k in dup})
            problems.append("out/%s: %d rows more than once, of %d files, e.g. %s" % (
                q, len(dup), len(files),
                ["%s (%s)" % (f, led.files[f][2] if f in led.files else
                              "removed" if f in led.removed else "?") for f in files[:4]]))
        # a removed file's rows come out whole or not at all
        for rel in led.removed:
            ids = event_ids(led.removed[rel])
            n_out = sum(1 for eid in ids if eid in have)
            if 0 < n_out < len(ids):
                problems.append("out/%s: removed %s: %d of its %d rows processed"
                                % (q, rel, n_out, len(ids)))
        if foreign:
            problems.append("out/%s: %d rows of bytes that did not land, e.g. %s"
                            % (q, len(foreign), foreign[:3]))
    if problems:
        pytest.fail(report(led, problems), pytrace=False)


def report(led, problems):
    """Problems grouped by kind (digits and names masked), a few of each."""
    kinds = {}
    for p in problems:
        k = re.sub(r"race/\S+", "F", re.sub(r"\d+", "N", p.split(":  ")[0]))[:110]
        kinds.setdefault(k, []).append(p)
    out = ["SLUICE_RACE_SEED=%d: %d problem(s) of %d kind(s); outcomes %s"
           % (led.seed, len(problems), len(kinds), led.summary())]
    for k, ps in sorted(kinds.items(), key=lambda kv: -len(kv[1])):
        out.append("[%d x] %s" % (len(ps), ps[0]))
        out += ["       " + p for p in ps[1:4]]
    return "\n  ".join(out)


def seed_for(request):
    """SLUICE_RACE_SEED as given (to replay a failure), else one per test."""
    if "SLUICE_RACE_SEED" in os.environ:
        return SEED
    return SEED ^ zlib.crc32(request.node.name.encode())


# -- bash-driven files ------------------------------------------------------------

def run_bash(led, script, cwd):
    """A bash script whose stdout lines are '<verdict> <index>'; returns them
    and its stderr lines."""
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
        f.write(script)
    try:
        p = subprocess.run(["bash", f.name], cwd=cwd, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=RACE_BUDGET + 60)
    finally:
        os.unlink(f.name)
    if p.returncode != 0:
        led.problem("bash exited %d: %s" % (p.returncode, p.stderr.decode()[-500:]))
    verdicts = {}
    for line in p.stdout.decode().splitlines():
        v, i = line.split()
        verdicts[int(i)] = v
    return verdicts, p.stderr.decode().splitlines()


def q(b):
    """bytes as one shell word (JSON lines hold no single quote)."""
    s = b.decode()
    assert "'" not in s
    return "'" + s + "'"


def shell_pairs(m, led, rnd, rel_dir, count, second_op):
    """`printf A > f; printf B >> f` (or `> f` again) with builtins only, so
    the second open follows the first close at once (DESIGN's `echo a > f;
    echo b >> f`). second_op is '>>' or '>'."""
    lines, plan = [], {}
    for i in range(count):
        name = "s%04d.json" % i
        first = content(rnd, "%s/%s/a" % (rel_dir, name))
        second = content(rnd, "%s/%s/b" % (rel_dir, name))
        plan[i] = (name, first, second)
        lines.append("printf '%%s' %s > %s || echo first-failed %d" % (q(first), name, i))
        lines.append("if printf '%%s' %s %s %s; then echo ok %d; else echo refused %d; fi"
                     % (q(second), second_op, name, i, i))
    return plan, "\n".join(lines) + "\n"


def judge_shell_pairs(led, rel_dir, plan, verdicts, errs, second_op, what):
    refused = 0
    for i, (name, first, second) in plan.items():
        rel = os.path.join(rel_dir, name)
        v = verdicts.get(i)
        joined = first + second if second_op == ">>" else second
        if v == "ok":
            led.expect(rel, {joined}, what + ":joined")
        elif v == "refused":
            refused += 1
            led.refused()
            led.expect(rel, {first}, what + ":EPERM")
        else:
            led.problem("%s: bash said %r" % (rel, v))
            led.expect(rel, {first, joined}, what + ":??")
    bad = [e for e in errs if "Operation not permitted" not in e]
    if bad or len(errs) != refused:
        led.problem("%s: bash stderr has %d lines for %d refusals, other errors: %s"
                    % (what, len(errs), refused, bad[:5]))


# =============================================================================
# 1. write-opens and truncates right after close
# =============================================================================

def test_append_right_after_close(mounts, tmp_path, request):
    """close, then at once open(O_APPEND) and append (python 'ab', os.open,
    and bash `>>`): the append lands with the first write, or its open gets
    EPERM and exactly the first write lands."""
    seed = seed_for(request)
    m = new_mount(mounts, tmp_path)
    led = Ledger(seed)
    dirs = worker_dirs(m, "py", WORKERS)
    sdirs = worker_dirs(m, "sh", 2)
    rnd = random.Random(seed)
    scripts = []
    for d in sdirs:
        plan, script = shell_pairs(m, led, rnd, d, NSHELL // 2, ">>")
        scripts.append((d, plan, script))
        led.will_create(len(plan))
    mon = Monitor(m, led)
    mon.start()
    deadline = race_deadline()

    def shell(k):
        d, plan, script = scripts[k]
        verdicts, errs = run_bash(led, script, m.inp(d))
        judge_shell_pairs(led, d, plan, verdicts, errs, ">>", "bash>>")

    def work(w, r):
        for i in range(NFILES // WORKERS):
            if time.monotonic() > deadline:
                break
            rel = os.path.join(dirs[w], "a%04d.json" % i)
            first = content(r, rel + "/a")
            second = content(r, rel + "/b")
            create(led, m.inp(rel), first)
            pause(r)
            how = r.choice(["py", "os"])
            if how == "py":
                try:
                    with open(m.inp(rel), "ab") as f:
                        f.write(second)
                    failure = (None, None)
                except OSError as e:
                    # 'ab' opens, then writes at close: tell the stages apart by errno only
                    failure = ("open" if e.filename else "close", e.errno)
            else:
                failure = late_write(m.inp(rel), os.O_WRONLY | os.O_APPEND, second)
            judge_late_write(led, rel, first, first + second, failure, "append-" + how)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        sh = [ex.submit(shell, k) for k in range(len(scripts))]
        run_workers(work, WORKERS, seed)
        for f in sh:
            f.result(timeout=RACE_BUDGET + 60)
    finish(mounts, m, led, mon)


@pytest.mark.parametrize("gap_us", GAPS)
def test_truncate_right_after_close(mounts, tmp_path, request, gap_us):
    """close, then at once O_TRUNC reopen and rewrite, or truncate(2) by path,
    or bash `>` again: the new content lands, or EPERM and the first does.
    With a gap after a truncate's lookup, its file's landing finishes under
    it: it must get EPERM, never truncate the landed bytes."""
    seed = seed_for(request)
    m = new_mount(mounts, tmp_path, gap_us)
    led = Ledger(seed)
    dirs = worker_dirs(m, "py", WORKERS)
    sdirs = worker_dirs(m, "sh", 2)
    rnd = random.Random(seed)
    scripts = []
    for d in sdirs:
        plan, script = shell_pairs(m, led, rnd, d, NSHELL // 2, ">")
        scripts.append((d, plan, script))
        led.will_create(len(plan))
    mon = Monitor(m, led)
    mon.start()
    deadline = race_deadline()

    def shell(k):
        d, plan, script = scripts[k]
        verdicts, errs = run_bash(led, script, m.inp(d))
        judge_shell_pairs(led, d, plan, verdicts, errs, ">", "bash>")

    def work(w, r):
        for i in range(NFILES // WORKERS):
            if time.monotonic() > deadline:
                break
            rel = os.path.join(dirs[w], "t%04d.json" % i)
            first = content(r, rel + "/a")
            create(led, m.inp(rel), first)
            pause(r)
            how = r.choice(["otrunc", "otrunc", "truncate", "truncate0"])
            if how == "otrunc":
                third = content(r, rel + "/c")
                failure = late_write(m.inp(rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, third)
                judge_late_write(led, rel, first, third, failure, "O_TRUNC")
                continue
            # cut at a line boundary, so the shorter file still parses
            cuts = [0] + [k + 1 for k in range(len(first)) if first[k:k + 1] == b"\n"]
            size = 0 if how == "truncate0" else r.choice(cuts[:-1] or [0])
            try:
                os.truncate(m.inp(rel), size)
                failure = (None, None)
            except OSError as e:
                failure = ("open", e.errno)   # one call: refused means nothing changed
            judge_late_write(led, rel, first, first[:size], failure, "truncate")

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        sh = [ex.submit(shell, k) for k in range(len(scripts))]
        run_workers(work, WORKERS, seed)
        for f in sh:
            f.result(timeout=RACE_BUDGET + 60)
    finish(mounts, m, led, mon)


# =============================================================================
# 2. attributes by path right after close
# =============================================================================

@pytest.mark.parametrize("gap_us", GAPS)
def test_setattr_right_after_close(mounts, tmp_path, request, gap_us):
    """close, then at once chmod / utime / chown (same uid, another gid) by
    path, as install, cp -p, shutil.copy2 and scp do: every call succeeds
    whether it meets the file in flight, being published or landed, and the
    file keeps what was set, now and after a remount."""
    seed = seed_for(request)
    m = new_mount(mounts, tmp_path, gap_us)
    led = Ledger(seed)
    dirs = worker_dirs(m, "py", WORKERS)
    sdir = worker_dirs(m, "sh", 1)[0]
    uid = os.getuid()
    mon = Monitor(m, led)

    # bash: `printf > f; chmod; touch -c -m -d` (forks: a wider, later window)
    rnd = random.Random(seed)
    plan, lines = {}, []
    for i in range(NSHELL):
        name = "s%04d.json" % i
        data = content(rnd, "%s/%s" % (sdir, name))
        mode = rnd.choice(MODES)
        secs = BASE_MTIME_NS // 10**9 + rnd.randint(0, 10**6)
        plan[i] = (name, data, mode, secs)
        lines.append("printf '%%s' %s > %s && chmod %o %s && touch -c -m -d @%d %s && echo ok %d"
                     " || echo failed %d" % (q(data), name, mode, name, secs, name, i, i))
    led.will_create(len(plan))
    mon.start()
    deadline = race_deadline()

    def shell():
        verdicts, errs = run_bash(led, "\n".join(lines) + "\n", m.inp(sdir))
        # touch -c: utimensat by path, without touch's open(O_WRONLY|O_CREAT)
        for e in errs:
            led.problem("bash chmod/touch: %s" % e)
            if "Operation not permitted" in e:
                led.refused()
        for i, (name, data, mode, secs) in plan.items():
            rel = os.path.join(sdir, name)
            if verdicts.get(i) != "ok":
                led.problem("%s: printf/chmod/touch -m did not succeed" % rel)
            led.expect(rel, {data}, "bash-chmod-touch",
                       {"mode": mode, "mtime_ns": secs * 10**9})

    def work(w, r):
        for i in range(NFILES // WORKERS):
            if time.monotonic() > deadline:
                break
            rel = os.path.join(dirs[w], "m%04d.json" % i)
            p = m.inp(rel)
            data = content(r, rel)
            create(led, p, data)
            pause(r)
            ops = r.sample(["chmod", "utime", "chown"], r.randint(1, 3))
            attrs = {}
            try:
                for op in ops:
                    if op == "chmod":
                        attrs["mode"] = r.choice(MODES)
                        os.chmod(p, attrs["mode"])
                    elif op == "utime":
                        attrs["mtime_ns"] = BASE_MTIME_NS + r.randint(0, 10**15)
                        os.utime(p, ns=(attrs["mtime_ns"] - 5, attrs["mtime_ns"]))
                    else:
                        attrs["gid"] = r.choice(OTHER_GIDS)
                        attrs["uid"] = uid
                        os.chown(p, uid, attrs["gid"])
            except OSError as e:
                led.problem("%s: %s right after close got %s (never refused)"
                            % (rel, op, errno.errorcode.get(e.errno, e.errno)))
                if e.errno == errno.EPERM:
                    led.refused()
                attrs = None
            led.expect(rel, {data}, "+".join(ops), attrs)

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as ex:
        sh = ex.submit(shell)
        run_workers(work, WORKERS, seed)
        sh.result(timeout=RACE_BUDGET + 60)
    finish(mounts, m, led, mon)


# =============================================================================
# 3. renames right after close
# =============================================================================

@pytest.mark.parametrize("gap_us", GAPS)
def test_rename_right_after_close(mounts, tmp_path, request, gap_us):
    """close, then at once rename to another final name (os.rename and mv)
    or to a temp name: EPERM (the file landed under its first name) or
    success (it lands under the new final name; a temp-named one does not
    land until it is renamed back to a final name)."""
    seed = seed_for(request)
    m = new_mount(mounts, tmp_path, gap_us)
    led = Ledger(seed)
    dirs = worker_dirs(m, "py", WORKERS)
    mon = Monitor(m, led)
    mon.start()
    deadline = race_deadline()
    spawn = threading.Lock()

    def work(w, r):
        for i in range(NFILES // WORKERS):
            if time.monotonic() > deadline:
                break
            rel = os.path.join(dirs[w], "r%04d.json" % i)
            data = content(r, rel)
            how = r.choice(["final", "final", "temp", "temp", "mv"])
            if how == "mv":
                # mv forks; hold the others' opens off meanwhile (see torture.py's SPAWN)
                with spawn:
                    create(led, m.inp(rel), data)
                    pause(r)
                    dst = rel[:-5] + ".moved.json"
                    p = util.run(["mv", m.inp(rel), m.inp(dst)])
                if p.returncode == 0:
                    led.expect(dst, {data}, "mv:renamed")
                elif b"Operation not permitted" in p.stderr:
                    led.refused()
                    led.expect(rel, {data}, "mv:EPERM")
                else:
                    led.problem("%s: mv failed: %s" % (rel, p.stderr.decode().strip()))
                continue
            with spawn:
                create(led, m.inp(rel), data)
            pause(r)
            if how == "final":
                dst = rel[:-5] + ".final.json"
            else:
                dst = os.path.join(os.path.dirname(rel), "." + os.path.basename(rel) + ".tmp")
            try:
                os.rename(m.inp(rel), m.inp(dst))
            except OSError as e:
                if e.errno == errno.EPERM:
                    led.refused()
                    led.expect(rel, {data}, how + ":EPERM")
                else:
                    led.problem("%s: rename to %s got %s" % (rel, how,
                                                             errno.errorcode.get(e.errno)))
                continue
            if how == "final":
                led.expect(dst, {data}, "final:renamed")
                continue
            # in flight under a temp name: it must not have landed; rename it back
            back = rel[:-5] + ".back.json"
            try:
                os.rename(m.inp(dst), m.inp(back))
                led.expect(back, {data}, "temp:renamed")
            except OSError as e:
                led.problem("%s: renamed to a temp name, then renaming it back to %s got %s"
                            % (rel, back, errno.errorcode.get(e.errno)))

    run_workers(work, WORKERS, seed)
    finish(mounts, m, led, mon)


@pytest.mark.parametrize("gap_us", GAPS)
def test_folder_rename_right_after_close(mounts, tmp_path, request, gap_us):
    """A file closed in a fresh folder, then at once the folder renamed
    (os.rename and mv): EPERM (the file landed or is being published, and
    a landed file's folders are final) or success (the file was still in
    flight: it lands under the folder's new name). Never a landed file
    moved: the rename is judged in the commit that moves the folder."""
    seed = seed_for(request)
    m = new_mount(mounts, tmp_path, gap_us)
    led = Ledger(seed)
    dirs = worker_dirs(m, "py", WORKERS)
    mon = Monitor(m, led)
    mon.start()
    deadline = race_deadline()
    spawn = threading.Lock()

    def work(w, r):
        for i in range(NFILES // WORKERS):
            if time.monotonic() > deadline:
                break
            # partition-style folders: the queries' path reads race/*/*/
            sub = os.path.join(dirs[w], "d=%04d" % i)
            moved = sub + "m"
            os.mkdir(m.inp(sub))
            names = ["f%d.json" % k for k in range(r.choice([1, 1, 2, 3]))]
            datas = [content(r, os.path.join(sub, n)) for n in names]
            use_mv = r.random() < 0.2
            with spawn:
                for n, data in zip(names, datas):
                    create(led, m.inp(os.path.join(sub, n)), data)
                if use_mv:
                    p = util.run(["mv", m.inp(sub), m.inp(moved)])
                    ok = p.returncode == 0
                    err = None if ok else (errno.EPERM if b"Operation not permitted"
                                           in p.stderr else p.stderr.decode().strip())
            if not use_mv:
                pause(r)
                try:
                    os.rename(m.inp(sub), m.inp(moved))
                    ok, err = True, None
                except OSError as e:
                    ok, err = False, e.errno
            how = "mv" if use_mv else "rename"
            if ok:
                for n, data in zip(names, datas):
                    led.expect(os.path.join(moved, n), {data}, how + ":moved")
                continue
            if err != errno.EPERM:
                led.problem("%s: folder %s got %s" % (sub, how, errno.errorcode.get(err, err)))
            else:
                led.refused()
            for n, data in zip(names, datas):
                led.expect(os.path.join(sub, n), {data}, how + ":EPERM")

    run_workers(work, WORKERS, seed)
    finish(mounts, m, led, mon)


def rm_right_after_close(led, m, rel, data, label):
    """rm of a just-closed file: it goes (whether its landing had finished,
    was on its way, or not begun), or EBUSY (landed, and a query still needs
    it: it stays, whole)."""
    led.did_close(-1)  # about to go: no longer a lower bound on landed + in flight
    try:
        os.unlink(m.inp(rel))
    except OSError as e:
        led.did_close()
        if e.errno == errno.EBUSY:
            with led.lock:
                led.ebusy += 1
            led.expect(rel, {data}, label + ":EBUSY")
        else:
            led.problem("%s: rm right after close got %s" % (rel, errno.errorcode.get(e.errno)))
            led.expect(rel, {data}, label + ":error")
        return
    led.remove(rel, data, label + ":removed")


@pytest.mark.parametrize("gap_us", GAPS)
def test_unlink_right_after_close(mounts, tmp_path, request, gap_us):
    """close, then at once rm (os.unlink and rm(1)), racing the RELEASE and
    the commit that lands the file: the rm succeeds and the file is gone for
    good (its rows processed once if a batch took it first, or never), or it
    gets EBUSY because a query still needs the landed file, which then stays
    whole. An rm that reaches a file whose landing finished after the rm
    looked it up is judged as a landed file's rm, never as an in-flight one's."""
    seed = seed_for(request)
    m = new_mount(mounts, tmp_path, gap_us)
    led = Ledger(seed)
    dirs = worker_dirs(m, "py", WORKERS)
    mon = Monitor(m, led)
    mon.start()
    deadline = race_deadline()
    spawn = threading.Lock()

    def work(w, r):
        for i in range(NFILES // WORKERS):
            if time.monotonic() > deadline:
                break
            rel = os.path.join(dirs[w], "u%04d.json" % i)
            data = content(r, rel)
            with spawn:
                create(led, m.inp(rel), data)
                if r.random() < 0.2:
                    # rm(1) forks: hold the others' opens off meanwhile
                    led.did_close(-1)
                    p = util.run(["rm", "-f", m.inp(rel)])
                    if p.returncode == 0:
                        led.remove(rel, data, "rm:removed")
                        continue
                    led.did_close()
                    if b"Device or resource busy" in p.stderr:
                        with led.lock:
                            led.ebusy += 1
                        led.expect(rel, {data}, "rm:EBUSY")
                    else:
                        led.problem("%s: rm failed: %s" % (rel, p.stderr.decode().strip()))
                        led.expect(rel, {data}, "rm:error")
                    continue
            pause(r)
            rm_right_after_close(led, m, rel, data, "unlink")

    run_workers(work, WORKERS, seed)
    finish(mounts, m, led, mon)


# =============================================================================
# 4. several handles on one file, one closing early
# =============================================================================

def test_dup_and_second_open_one_closing_early(mounts, tmp_path, request):
    """Writers sharing a file, one closing first: a dup'd descriptor written
    from another thread, a second open(O_APPEND) made before the first
    close, a child process holding the descriptor (bash `{ ...; } &` and
    subprocess pass_fds): the file lands only at the last close, with every
    byte. A second open racing the first close (another thread) lands both
    writes or gets EPERM."""
    seed = seed_for(request)
    m = new_mount(mounts, tmp_path)
    led = Ledger(seed)
    dirs = worker_dirs(m, "py", WORKERS)
    sdir = worker_dirs(m, "sh", 1)[0]
    mon = Monitor(m, led)

    rnd = random.Random(seed)
    plan, lines = {}, []
    for i in range(NSHELL):
        name = "s%04d.json" % i
        a = content(rnd, "%s/%s/a" % (sdir, name))
        b = content(rnd, "%s/%s/b" % (sdir, name))
        plan[i] = (name, a, b)
        # the parent closes fd 3 at once; the background child writes later
        lines.append("exec 3> %s; printf '%%s' %s >&3; { sleep 0.00%d; printf '%%s' %s >&3; } & "
                     "exec 3>&-; wait $! && echo ok %d || echo failed %d"
                     % (name, q(a), rnd.randint(0, 3), q(b), i, i))
    led.will_create(len(plan))
    mon.start()
    deadline = race_deadline()

    def shell():
        verdicts, errs = run_bash(led, "\n".join(lines) + "\n", m.inp(sdir))
        for e in errs:
            led.problem("bash fork writer: %s" % e)
        for i, (name, a, b) in plan.items():
            if verdicts.get(i) != "ok":
                led.problem("%s: the background writer failed" % name)
            led.expect(os.path.join(sdir, name), {a + b}, "bash-fork")
        led.did_close(len(plan))

    spawn = threading.Lock()

    def work(w, r):
        helper = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        try:
            for i in range(NFILES // WORKERS):
                if time.monotonic() > deadline:
                    break
                rel = os.path.join(dirs[w], "d%04d.json" % i)
                p = m.inp(rel)
                a, b = content(r, rel + "/a"), content(r, rel + "/b")
                how = r.choice(["dup", "two-opens", "racing-open", "child"])
                led.will_create()
                if how == "child":
                    with spawn:
                        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                        write_all(fd, a)
                        child = subprocess.Popen(
                            ["bash", "-c", "sleep 0.00%d; cat >&%d" % (r.randint(0, 3), fd)],
                            stdin=subprocess.PIPE, pass_fds=[fd])
                        os.close(fd)  # closes early: the child still writes
                    child.communicate(b, timeout=30)
                    if child.returncode != 0:
                        led.problem("%s: the child writer failed" % rel)
                    led.did_close()
                    led.expect(rel, {a + b}, "child")
                    continue
                with spawn:
                    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                write_all(fd, a)
                if how == "dup":
                    fd2 = os.dup(fd)
                    fut = helper.submit(lambda: (write_all(fd2, b), os.close(fd2)))
                    pause(r)
                    os.close(fd)
                    fut.result(timeout=30)
                    led.did_close()
                    led.expect(rel, {a + b}, "dup")
                elif how == "two-opens":
                    fd2 = os.open(p, os.O_WRONLY | os.O_APPEND)
                    fut = helper.submit(lambda: (pause(r), write_all(fd2, b), os.close(fd2)))
                    os.close(fd)
                    fut.result(timeout=30)
                    led.did_close()
                    led.expect(rel, {a + b}, "two-opens")
                else:
                    fut = helper.submit(late_write, p, os.O_WRONLY | os.O_APPEND, b)
                    os.close(fd)
                    led.did_close()
                    judge_late_write(led, rel, a, a + b, fut.result(timeout=30),
                                     "racing-open")
        finally:
            helper.shutdown(wait=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as ex:
        sh = ex.submit(shell)
        run_workers(work, WORKERS, seed)
        sh.result(timeout=RACE_BUDGET + 60)
    finish(mounts, m, led, mon)


# =============================================================================
# 5. everything at once
# =============================================================================

def test_mixed_race_counters(mounts, tmp_path, request):
    """All of the above mixed on one mount, many threads: the counters and
    the engine see each file exactly once."""
    seed = seed_for(request)
    m = new_mount(mounts, tmp_path)
    led = Ledger(seed)
    dirs = worker_dirs(m, "py", WORKERS + 2)
    uid = os.getuid()
    mon = Monitor(m, led)
    mon.start()
    deadline = race_deadline()

    def work(w, r):
        for i in range(NFILES // (WORKERS + 2) + 10):
            if time.monotonic() > deadline:
                break
            rel = os.path.join(dirs[w], "x%04d.json" % i)
            p = m.inp(rel)
            first, second = content(r, rel + "/a"), content(r, rel + "/b")
            create(led, p, first)
            pause(r)
            how = r.choice(["append", "otrunc", "truncate", "chmod", "utime", "chown",
                            "rename", "rm", "none"])
            if how == "append":
                judge_late_write(led, rel, first, first + second,
                                 late_write(p, os.O_WRONLY | os.O_APPEND, second), how)
            elif how == "otrunc":
                judge_late_write(led, rel, first, second,
                                 late_write(p, os.O_WRONLY | os.O_TRUNC, second), how)
            elif how == "truncate":
                try:
                    os.truncate(p, 0)
                    failure = (None, None)
                except OSError as e:
                    failure = ("open", e.errno)
                judge_late_write(led, rel, first, b"", failure, how)
            elif how in ("chmod", "utime", "chown"):
                attrs = {}
                try:
                    if how == "chmod":
                        attrs["mode"] = r.choice(MODES)
                        os.chmod(p, attrs["mode"])
                    elif how == "utime":
                        attrs["mtime_ns"] = BASE_MTIME_NS + r.randint(0, 10**15)
                        os.utime(p, ns=(attrs["mtime_ns"], attrs["mtime_ns"]))
                    else:
                        attrs["gid"] = r.choice(OTHER_GIDS)
                        os.chown(p, uid, attrs["gid"])
                except OSError as e:
                    led.problem("%s: %s right after close got %s" % (
                        rel, how, errno.errorcode.get(e.errno, e.errno)))
                    if e.errno == errno.EPERM:
                        led.refused()
                    attrs = None
                led.expect(rel, {first}, how, attrs)
            elif how == "rename":
                dst = rel[:-5] + ".renamed.json"
                try:
                    os.rename(p, m.inp(dst))
                    led.expect(dst, {first}, "rename:renamed")
                except OSError as e:
                    if e.errno != errno.EPERM:
                        led.problem("%s: rename got %s" % (rel, errno.errorcode.get(e.errno)))
                    else:
                        led.refused()
                    led.expect(rel, {first}, "rename:EPERM")
            elif how == "rm":
                rm_right_after_close(led, m, rel, first, "rm")
            else:
                led.expect(rel, {first}, "none")

    run_workers(work, WORKERS + 2, seed)
    finish(mounts, m, led, mon)
