#!/usr/bin/env python3
"""sluice's kill -9 torture: producers land files through a mount with cp,
mv, temp+rename, rsync and plain writes, appends right after a close, chmod
and utime right after a close, bundles (`cp -r` into a temp-named folder,
then `mv` to a final name) and `sed -i` on a temp-named draft then `mv`,
while the daemon is killed at random moments (kill -9, or a fault point) and
remounted, again and again. Then it checks the promise: every file whose
close/rename returned success is in in/ byte for byte (an append that raced
the RELEASE either joined the landing or was refused with EPERM); no landed
file is partial; a bundle is in in/ whole or not at all, and whole when its
`mv` returned success; a mode or mtime set after a close is the one set or
the one before, never another; every row of a landed file is in out/ exactly
once; no part is visible that its batch did not commit; `sluice check` finds
the catalog and blobs consistent.

    tests/torture/torture.py [--seed N] [--points N] [--sluice PATH]

Prints one summary line; exits 1 when an invariant breaks.
"""

import argparse
import errno
import json
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

FAULTS = ["catalog.before_commit", "catalog.after_commit", "land.before_record",
          "land.after_record", "land.before_publish", "engine.after_offsets",
          "engine.before_commit", "engine.after_commit", "land.before_rename_record",
          "land.after_rename_record", "land.before_folder_record",
          "land.after_folder_record"]

# What producers do, with weights: the first four as before, the rest race
# the RELEASE (append, attrs), rename folders (bundle) or replace a draft.
HOW = (["write"] * 3 + ["cp"] * 3 + ["mv"] * 3 + ["rsync"] * 3
       + ["append"] * 2 + ["attrs"] * 2 + ["bundle"] + ["sed"])
OLD_MTIME = 1_500_000_000  # utime targets: far from any real write time


# A child forked while another thread holds a file of the mount open closes
# its copy of the descriptor at exec: that close is a FLUSH, and the file can
# land the prefix written so far if the daemon then dies (DESIGN's
# documented hazard for dup'd or forked writers). The driver tests sluice,
# not that hazard: it never forks while one of its threads writes a file.
SPAWN = threading.Lock()


def sh(args, **kw):
    with SPAWN:
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    return subprocess.CompletedProcess(args, p.returncode, out, err)


def is_mount(path):
    path = os.path.realpath(path)
    with open("/proc/mounts") as f:
        return any(l.split()[1] == path for l in f)


class Torture:
    def __init__(self, sluice, seed, workdir):
        self.sluice = sluice
        self.rnd = random.Random(seed)
        self.work = workdir
        self.data = os.path.join(workdir, "data")
        self.mnt = os.path.join(workdir, "mnt")
        self.src = os.path.join(workdir, "src")
        os.makedirs(self.mnt)
        os.makedirs(self.src)
        os.makedirs(self.data)
        with open(os.path.join(self.data, "sluice.json"), "w") as f:
            schema = "event_id STRING, n BIGINT, g BIGINT"
            json.dump({"queries": {
                "dev": {"source": {"format": "json", "path": "dev", "schema": schema,
                                   "maxFilesPerTrigger": 3}},
                # stateful: its state must count every landed row exactly once
                "agg": {"source": {"format": "json", "path": "dev", "schema": schema,
                                   "maxFilesPerTrigger": 5},
                        "dropDuplicates": ["event_id"],
                        "groupBy": {"columns": ["g"]},
                        "aggregate": {"rows": "count(*)", "total": "sum(n)"},
                        "outputMode": "complete"}}}, f)
        self.proc = None
        # names are paths relative to in/dev
        self.acked = {}      # name -> set of bytes: what may land once close/rename succeeded
        self.written = {}    # name -> set of bytes: every content that may land under a name
        self.bundles = []    # (names, mv returned success)
        self.attrs = {}      # name -> {mode0: before, mode/mtime: set or None, done}
        self.stats = {}      # counts of outcomes, for the summary
        self.settle_problems = []
        self.started = time.time()
        self.umask = os.umask(0)
        os.umask(self.umask)
        self.lock = threading.Lock()
        self.seq = 0
        self.faults_compiled = "(faults)" in sh([sluice, "--version"]).stdout.decode()
        self.kills = 0

    def mount(self, fault=None):
        env = dict(os.environ)
        if fault:
            env["SLUICE_FAULT"] = fault
        self.log = open(os.path.join(self.work, "daemon.log"), "a")
        with SPAWN:
            self.proc = subprocess.Popen([self.sluice, "mount", self.data, self.mnt, "-f"],
                                         stdout=self.log, stderr=self.log, env=env)
        deadline = time.monotonic() + 10
        while not is_mount(self.mnt):
            if self.proc.poll() is not None and fault and self.proc.returncode == 86:
                return False  # the fault point fired during start-up: a crash too
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("mount failed (exit %s), see %s/daemon.log"
                                   % (self.proc.poll(), self.work))
            time.sleep(0.01)
        try:
            os.makedirs(os.path.join(self.mnt, "in", "dev"), exist_ok=True)
        except OSError:
            if fault:
                return False  # killed by its fault point right after mounting
            raise
        return True

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc:
            self.proc.wait(timeout=30)
        sh(["fusermount3", "-u", "-z", "-q", self.mnt])
        self.proc = None

    def content(self, name, rnd=None):
        rows = (rnd or self.rnd).randint(1, 40)
        return "".join(json.dumps({"event_id": "%s-%d" % (name, i), "n": i, "g": i % 7}) + "\n"
                       for i in range(rows)).encode()

    def may_land(self, name, *datas):
        with self.lock:
            self.written.setdefault(name, set()).update(datas)

    def ack(self, name, *datas):
        with self.lock:
            self.acked[name] = set(datas)

    def count(self, what):
        with self.lock:
            self.stats[what] = self.stats.get(what, 0) + 1

    def next_name(self):
        with self.lock:
            self.seq += 1
            return self.seq

    def produce_one(self, rnd):
        how = rnd.choice(HOW)
        if how in ("append", "attrs", "bundle", "sed"):
            try:
                getattr(self, "produce_" + how)(rnd)
            except (OSError, subprocess.TimeoutExpired) as e:
                # the daemon died under it: what was acked is recorded
                self.count("%s:%s" % (how, errno.errorcode.get(getattr(e, "errno", 0), "error")))
            return
        name = "f%06d.json" % self.next_name()
        data = self.content(name)
        self.may_land(name, data)
        dest = os.path.join(self.mnt, "in", "dev", name)
        try:
            if how == "write":
                with SPAWN, open(dest, "wb") as f:
                    f.write(data)
                ok = True
            else:
                src = os.path.join(self.src, name)
                with open(src, "wb") as f:
                    f.write(data)
                if how == "cp":
                    ok = sh(["cp", src, dest]).returncode == 0
                elif how == "mv":
                    tmp = os.path.join(self.mnt, "in", "dev", "." + name + ".tmp")
                    ok = sh(["cp", src, tmp]).returncode == 0 and \
                        sh(["mv", tmp, dest]).returncode == 0
                else:
                    ok = sh(["rsync", "-a", src, dest]).returncode == 0
                os.unlink(src)
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            self.ack(name, data)

    def produce_append(self, rnd):
        """close, then at once open(O_APPEND) and append: it joins the landing
        (both land) or its open gets EPERM (the first write lands alone)."""
        name = "f%06d.json" % self.next_name()
        first, second = self.content(name + "a", rnd), self.content(name + "b", rnd)
        dest = os.path.join(self.mnt, "in", "dev", name)
        self.may_land(name, first)
        with SPAWN:  # no fork while the file is open (see SPAWN)
            with open(dest, "wb") as f:
                f.write(first)
            self.ack(name, first)
            try:
                fd = os.open(dest, os.O_WRONLY | os.O_APPEND)
            except OSError as e:
                self.count("append:EPERM" if e.errno == errno.EPERM else "append:died")
                return
            # opened: from here the append may be part of what lands
            self.may_land(name, first + second)
            self.ack(name, first, first + second)
            try:
                os.write(fd, second)
            finally:
                os.close(fd)
        self.ack(name, first + second)
        self.count("append:joined")

    def produce_attrs(self, rnd):
        """close, then at once chmod and/or utime by path (install, cp -p,
        shutil.copy2): the file lands with its bytes; its mode and mtime are
        the ones set or the ones before, never anything else."""
        name = "f%06d.json" % self.next_name()
        data = self.content(name, rnd)
        dest = os.path.join(self.mnt, "in", "dev", name)
        self.may_land(name, data)
        mode = rnd.choice([0o600, 0o640, 0o444]) if rnd.random() < 0.7 else None
        mtime = OLD_MTIME + self.seq if mode is None or rnd.random() < 0.5 else None
        # what may be there after a crash: the mode/mtime before, or the one asked for
        # (a call cut by the kill may have been applied); `done` once the calls returned
        entry = {"mode0": 0o666 & ~self.umask, "mode": mode, "mtime": mtime, "done": False}
        with self.lock:
            self.attrs[name] = entry
        with SPAWN:
            with open(dest, "wb") as f:
                f.write(data)
        self.ack(name, data)
        if mode is not None:
            os.chmod(dest, mode)
        if mtime is not None:
            os.utime(dest, (mtime, mtime))
        entry["done"] = True
        self.count("attrs:set")

    def produce_bundle(self, rnd):
        """`cp -r` a folder into a temp-named folder, then `mv` it to a final
        name: the bundle lands whole or not at all; whole once mv returned."""
        k = self.next_name()
        final = "b=%06d" % k
        src = os.path.join(self.src, final)
        os.makedirs(src)
        names = []
        for j in range(rnd.randint(2, 6)):
            name = "%s/p%d.json" % (final, j)
            data = self.content(name, rnd)
            with open(os.path.join(src, "p%d.json" % j), "wb") as f:
                f.write(data)
            self.may_land(name, data)
            names.append((name, data))
        stage = os.path.join(self.mnt, "in", "dev", ".%s.stage" % final)
        entry = [[n for n, _ in names], False]
        with self.lock:
            self.bundles.append(entry)
        try:
            ok = sh(["cp", "-r", src, stage]).returncode == 0 and \
                sh(["mv", stage, os.path.join(self.mnt, "in", "dev", final)]).returncode == 0
        finally:
            shutil.rmtree(src, ignore_errors=True)
        if ok:
            entry[1] = True
            for n, d in names:
                self.ack(n, d)
        self.count("bundle:" + ("moved" if ok else "failed"))

    def produce_sed(self, rnd):
        """A temp-named draft edited with `sed -i` (its scratch file `sedXXXXXX`
        is temporary too), then `mv` to a final name: only the edited bytes land."""
        name = "f%06d.json" % self.next_name()
        draft = os.path.join(self.mnt, "in", "dev", ".%s.draft" % name)
        data = self.content("DRAFT", rnd)
        edited = data.replace(b"DRAFT", name.encode())
        self.may_land(name, edited)
        with SPAWN:
            with open(draft, "wb") as f:
                f.write(data)
        ok = sh(["sed", "-i", "s/DRAFT/%s/" % name, draft]).returncode == 0 and \
            sh(["mv", draft, os.path.join(self.mnt, "in", "dev", name)]).returncode == 0
        if ok:
            self.ack(name, edited)
        self.count("sed:" + ("moved" if ok else "failed"))

    def producers(self, seconds, n=3):
        stop = time.monotonic() + seconds

        def loop(seed):
            rnd = random.Random(seed)
            while time.monotonic() < stop:
                self.produce_one(rnd)
        threads = [threading.Thread(target=loop, args=(self.rnd.random(),)) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def point(self):
        fault = None
        if self.faults_compiled and self.rnd.random() < 0.4:
            fault = "%s:%d" % (self.rnd.choice(FAULTS), self.rnd.randint(1, 20))
        if not self.mount(fault):
            self.kill()
            self.kills += 1
            return
        killer = threading.Timer(self.rnd.uniform(0.05, 0.4), self.kill)
        killer.start()
        self.producers(self.rnd.uniform(0.1, 0.5))
        killer.join()
        self.kill()
        self.kills += 1

    def settle(self):
        """A last clean mount: the engine catches up with the backlog."""
        self.mount()
        deadline = time.monotonic() + 60
        while True:
            st = sh([self.sluice, "status", self.data]).stdout.decode().splitlines()
            land = json.load(open(os.path.join(self.mnt, "status", "landing.json")))
            qs = [l for l in st if l.startswith(("dev ", "agg "))]
            backlogs = [tuple(int(x) for x in re.search(r" backlog=(-?\d+)/(-?\d+) ", l).groups())
                        for l in qs]
            absurd = [l for l, (f, b) in zip(qs, backlogs) if not (0 <= f < 2**62 and 0 <= b < 2**62)]
            if absurd:
                # an underflowed counter never reads 0/0: report it, go on once no file is left
                self.settle_problems = ["sluice status shows an absurd backlog: %s" % l
                                        for l in absurd]
            stopped = [l for l in qs if not l.endswith(" error=-")]
            if stopped and land["filesInFlight"] == 0:
                # a query that stopped does not catch up: report it with what verify finds
                self.settle_problems += ["a query stopped: %s" % l for l in stopped]
                break
            if land["filesInFlight"] == 0 and len(qs) == 2 and \
                    all(f == 0 and (b == 0 or absurd) for f, b in backlogs):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the engine did not catch up: %s" % st)
            time.sleep(0.05)

    @staticmethod
    def verify_spark_log(outdir):
        """out/dev/_spark_metadata (Spark's file sink log) names exactly the
        parts of the batches it lists, each once, with their sizes."""
        meta = os.path.join(outdir, "_spark_metadata")
        if not os.path.isdir(meta):
            return []
        problems = []
        named = {}
        last = -1
        for name in os.listdir(meta):
            last = max(last, int(name.split(".")[0]))
            with open(os.path.join(meta, name)) as f:
                lines = f.read().split("\n")
            if lines[0] != "v1":
                problems.append("_spark_metadata/%s starts with %r" % (name, lines[0]))
            for line in lines[1:]:
                e = json.loads(line)
                part = e["path"].rsplit("/", 1)[1]
                named[part] = named.get(part, 0) + 1
                try:
                    size = os.stat(os.path.join(outdir, part)).st_size
                except FileNotFoundError:
                    problems.append("_spark_metadata/%s names %s, not in out/" % (name, part))
                    continue
                if size != e["size"]:
                    problems.append("_spark_metadata/%s: %s size %d, the part %d" % (
                        name, part, e["size"], size))
        for part in os.listdir(outdir):
            if part.startswith("part-") and int(part.split("-")[1]) <= last \
                    and named.get(part) != 1:
                problems.append("%s named %d times in _spark_metadata" % (part, named.get(part, 0)))
        return problems

    def verify(self):
        problems = []
        indir = os.path.join(self.mnt, "in", "dev")
        landed = {}
        for dirpath, _dirs, names in os.walk(indir):
            for n in names:
                path = os.path.join(dirpath, n)
                with open(path, "rb") as f:
                    landed[os.path.relpath(path, indir)] = f.read()
        for name, datas in self.acked.items():
            if landed.get(name) not in datas:
                problems.append("acknowledged %s lost or changed (%s)" % (
                    name, "missing" if name not in landed else "%d bytes" % len(landed[name])))
        for name, data in landed.items():
            if data not in self.written.get(name, ()):
                problems.append("landed %s is partial or foreign (%d bytes)" % (name, len(data)))
        problems += self.settle_problems
        problems += self.verify_bundles(landed)
        problems += self.verify_attrs(indir, landed)
        commits = set(os.listdir(os.path.join(self.mnt, "checkpoint", "dev", "commits")))
        rows = {}
        outdir = os.path.join(self.mnt, "out", "dev")
        problems += self.verify_spark_log(outdir)
        for part in os.listdir(outdir):
            if part == "_spark_metadata":
                continue
            batch = str(int(part.split("-")[1]))
            if batch not in commits and len(commits) >= 100:
                pass  # older than the retained checkpoint
            elif batch not in commits:
                problems.append("part %s of uncommitted batch %s visible" % (part, batch))
            for line in open(os.path.join(outdir, part)).read().splitlines():
                eid = json.loads(line)["event_id"]
                rows[eid] = rows.get(eid, 0) + 1
        expected = set()
        for name, data in landed.items():
            for line in data.decode().splitlines():
                expected.add(json.loads(line)["event_id"])
        lost = expected - set(rows)
        dup = [k for k, v in rows.items() if v > 1]
        foreign = set(rows) - expected
        if lost:
            files = sorted({k.rsplit("-", 1)[0] for k in lost})
            problems.append("%d rows lost, of %d landed files, e.g. %s" % (
                len(lost), len(files), files[:8]))
        if dup:
            problems.append("%d rows duplicated, e.g. %s" % (len(dup), dup[:3]))
        if foreign:
            problems.append("%d rows from no landed file" % len(foreign))
        problems += self.verify_agg(landed)
        self.kill_clean()
        p = sh([self.sluice, "check", self.data])
        if p.returncode != 0:
            problems.append("sluice check: " + p.stdout.decode().strip().replace("\n", "; "))
        return problems, len(rows), len(landed), len(lost), len(dup)

    def verify_bundles(self, landed):
        """A bundle renamed from a temp folder is there whole or not at all."""
        problems = []
        whole = none = 0
        for names, moved in self.bundles:
            there = [n for n in names if n in landed]
            if len(there) == len(names):
                whole += 1
            elif not there:
                none += 1
                if moved:
                    problems.append("bundle %s lost after its mv returned success"
                                    % os.path.dirname(names[0]))
            else:
                problems.append("bundle %s is partial: %d of its %d files landed (mv %s)"
                                % (os.path.dirname(names[0]), len(there), len(names),
                                   "returned success" if moved else "did not return success"))
        self.bundle_summary = (len(self.bundles), whole, none)
        return problems

    def verify_attrs(self, indir, landed):
        """A mode or mtime set by path right after close: after the kills the
        file shows the one set or the one before, never another. The summary
        counts how many came back to the one before after a kill: allowed
        only when the call met the file before its RELEASE (in flight, so the
        record recovery lands from predates it); a call that met the file
        landed or being published waits for the commit that records it."""
        problems = []
        kept = reverted = 0
        for name, a in self.attrs.items():
            if name not in landed:
                continue
            st = os.stat(os.path.join(indir, name))
            mode = stat.S_IMODE(st.st_mode)
            if a["mode"] is not None:
                if mode not in (a["mode"], a["mode0"]):
                    problems.append("%s: mode %o, neither the %o set nor the %o before"
                                    % (name, mode, a["mode"], a["mode0"]))
                elif a["done"]:
                    kept += mode == a["mode"]
                    reverted += mode != a["mode"]
            if a["mtime"] is not None:
                if st.st_mtime_ns != a["mtime"] * 10**9 and st.st_mtime < self.started - 2:
                    problems.append("%s: mtime %d, neither the %d set nor a write's"
                                    % (name, st.st_mtime, a["mtime"]))
                elif a["done"]:
                    kept += st.st_mtime_ns == a["mtime"] * 10**9
                    reverted += st.st_mtime_ns != a["mtime"] * 10**9
        self.attr_summary = (kept, reverted)
        return problems

    def verify_agg(self, landed):
        """The complete-mode query: one committed snapshot whose counts and
        sums are those of every landed row, each counted once."""
        problems = []
        want = {}
        for data in landed.values():
            for line in data.decode().splitlines():
                r = json.loads(line)
                c, t = want.get(r["g"], (0, 0))
                want[r["g"]] = (c + 1, t + r["n"])
        outdir = os.path.join(self.mnt, "out", "agg")
        parts = sorted(os.listdir(outdir)) if os.path.isdir(outdir) else []
        batches = {p.split("-")[1] for p in parts}
        if len(batches) > 1:
            problems.append("agg: parts of %d batches visible in complete mode" % len(batches))
        got = {}
        for part in parts:
            for line in open(os.path.join(outdir, part)).read().splitlines():
                r = json.loads(line)
                got[r["g"]] = (r["rows"], r["total"])
        if got != want:
            diff = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
            problems.append("agg: groups %s differ: want %s, got %s" % (
                diff[:3], [want.get(k) for k in diff[:3]], [got.get(k) for k in diff[:3]]))
        return problems

    def kill_clean(self):
        if self.proc and self.proc.poll() is None:
            sh(["fusermount3", "-u", self.mnt])
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--points", type=int, default=200, help="kill points")
    ap.add_argument("--sluice", default=os.environ.get("SLUICE_BIN", os.path.join(
        os.path.dirname(__file__), "..", "..", "build", "tools", "sluice")))
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="sluice-torture.")
    t = Torture(os.path.abspath(a.sluice), a.seed, work)
    try:
        for _ in range(a.points):
            t.point()
        t.settle()
        problems, rows, files, lost, dup = t.verify()
    finally:
        t.kill()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("torture: seed %d, %d kill points, %d files landed (%d acknowledged), %d rows "
          "checked, lost %d, duplicated %d, partial %d%s"
          % (a.seed, t.kills, files, len(t.acked), rows, lost, dup,
             sum("partial" in p for p in problems), "" if not problems else ": FAILED"))
    nb, whole, none = getattr(t, "bundle_summary", (0, 0, 0))
    kept, reverted = getattr(t, "attr_summary", (0, 0))
    print("  bundles %d (whole %d, none %d); attributes set after close: kept %d, "
          "back to the one before after a kill %d; %s"
          % (nb, whole, none, kept, reverted,
             ", ".join("%s %d" % kv for kv in sorted(t.stats.items()))))
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
