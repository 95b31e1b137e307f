"""Planning (DESIGN.md §1 "Source", "Which files a query reads", unlink row of
the landing table): caps (maxFilesPerTrigger, maxBytesPerTrigger) and how
invalid ones are refused, maxFileAge on both clocks (fileAgeBy landed and
mtime) and what it makes deletable, and which landed paths a query reads.

Tests that count batches land first (`sluice land`) and then run
`sluice run --available-now`; tests about landing land through a mount."""

import errno
import json
import os
import subprocess
import time

import pytest

import util
from util import write_file

pytestmark = pytest.mark.timeout(60)

SCHEMA = "id STRING, n BIGINT"
DAY = 86400


# -- helpers ------------------------------------------------------------------

def write_config(data, queries, trigger=None):
    """queries: {name: source options (format json, schema SCHEMA by default)}."""
    os.makedirs(data, exist_ok=True)
    doc = {"queries": {}}
    for name, src in queries.items():
        s = {"format": "json", "schema": SCHEMA}
        s.update(src)
        q = {"source": s}
        if trigger:
            q["trigger"] = trigger
        doc["queries"][name] = q
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump(doc, f)


def sized(path, ident, size):
    """A one-row JSON Lines file of exactly size bytes."""
    head = '{"id":"%s","n":1,"pad":"' % ident
    tail = '"}\n'
    pad = size - len(head) - len(tail)
    assert pad >= 0
    with open(path, "w") as f:
        f.write(head + "x" * pad + tail)
    assert os.path.getsize(path) == size
    return str(path)


def src_file(tmp_path, name, ident=None, n=1, age_days=None):
    """A one-row JSON file in tmp_path/src; age_days sets its mtime in the past."""
    d = tmp_path / "src"
    d.mkdir(exist_ok=True)
    p = d / name
    p.write_text('{"id":"%s","n":%d}\n' % (ident or name, n))
    if age_days is not None:
        t = time.time() - age_days * DAY
        os.utime(p, (t, t))
    return str(p)


def land(data, *files, to="dev"):
    p = util.sluice("land", data, *files, "--to", to)
    assert p.returncode == 0, p.stderr
    return p


def run(data, expect=0):
    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.returncode == expect, (p.returncode, p.stdout, p.stderr)
    return p


def run_lines(data):
    return sorted(run(data).stdout.splitlines())


def out_files(m, query="dev"):
    base = os.path.join(m.mnt, "out", query)
    found = []
    for dirpath, _dirs, names in util.walk_out(base):
        for n in names:
            found.append(os.path.relpath(os.path.join(dirpath, n), base))
    return sorted(found)


def out_ids(m, query="dev"):
    ids = []
    for rel in out_files(m, query):
        with open(os.path.join(m.mnt, "out", query, rel)) as f:
            ids += [json.loads(l).get("id") for l in f.read().splitlines()]
    return ids


def sources(m, k, query="dev"):
    """The in/ paths batch K (source offset) planned, in file order."""
    with open(os.path.join(m.mnt, "checkpoint", query, "sources", "0", str(k))) as f:
        lines = f.read().split("\n")
    assert lines[0] == "v1"
    return [json.loads(l)["path"] for l in lines[1:]]


def commits(m, query="dev"):
    d = os.path.join(m.mnt, "checkpoint", query, "commits")
    return sorted(os.listdir(d), key=int) if os.path.isdir(d) else []


def query_status(data, name="dev"):
    p = util.sluice("status", data)
    assert p.returncode == 0, p.stderr
    lines = [l for l in p.stdout.splitlines() if l.startswith(name + " ")]
    assert len(lines) == 1, p.stdout
    return lines[0]


# -- caps ---------------------------------------------------------------------

def test_max_files_per_trigger(mounts, tmp_path):
    data = str(tmp_path / "data")
    # a Spark user's string form is accepted
    write_config(data, {"dev": {"path": "dev", "maxFilesPerTrigger": "3"}})
    files = [src_file(tmp_path, "f%d.json" % i) for i in range(7)]
    for f in files:  # one landing each, so landing order is f0..f6
        land(data, f)
    assert run_lines(data) == ["dev: 3 batches, 7 rows"]  # 3 + 3 + 1
    # two more: one batch, ids go on
    land(data, src_file(tmp_path, "g0.json"), src_file(tmp_path, "g1.json"))
    assert run_lines(data) == ["dev: 1 batches, 2 rows"]
    assert run_lines(data) == ["dev: 0 batches, 0 rows"]

    m = mounts.new(data=data)
    assert out_files(m) == ["part-%05d-00000.jsonl" % i for i in range(4)]
    # landing order, each file exactly once
    assert sources(m, 0) == ["in/dev/f0.json", "in/dev/f1.json", "in/dev/f2.json"]
    assert sources(m, 1) == ["in/dev/f3.json", "in/dev/f4.json", "in/dev/f5.json"]
    assert sources(m, 2) == ["in/dev/f6.json"]
    assert sorted(sources(m, 3)) == ["in/dev/g0.json", "in/dev/g1.json"]
    assert out_ids(m) == ["f%d.json" % i for i in range(7)] + ["g0.json", "g1.json"]
    assert commits(m) == ["0", "1", "2", "3"]


def test_max_bytes_per_trigger(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": {"path": "dev", "maxBytesPerTrigger": "250"}})
    d = tmp_path / "src"
    d.mkdir()
    sizes = [100, 100, 100, 2000, 100, 150, 120]
    for i, size in enumerate(sizes):
        land(data, sized(d / ("s%d.json" % i), "s%d" % i, size))
    # [100,100] [100] (2000 does not fit) [2000] alone (a batch takes at least
    # one file) [100,150] [120]
    assert run_lines(data) == ["dev: 5 batches, 7 rows"]
    m = mounts.new(data=data)
    assert out_files(m) == ["part-%05d-00000.jsonl" % i for i in range(5)]
    got = [[os.path.basename(p) for p in sources(m, k)] for k in range(5)]
    assert got == [["s0.json", "s1.json"], ["s2.json"], ["s3.json"],
                   ["s4.json", "s5.json"], ["s6.json"]]


def test_max_bytes_counts_landed_compressed_bytes(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": {"path": "dev", "maxBytesPerTrigger": "1k"}})
    d = tmp_path / "src"
    d.mkdir()
    zs = []
    for i in range(3):
        plain = ('{"id":"z%d","n":%d}\n' % (i, i)).encode() * 5000
        z = d / ("z%d.json.zst" % i)
        z.write_bytes(subprocess.run(["zstd", "-q", "-19", "-c"], input=plain,
                                     stdout=subprocess.PIPE, check=True, timeout=30).stdout)
        zs.append(z)
    total = sum(os.path.getsize(z) for z in zs)
    assert total <= 1024, total  # ~100 KB each decompressed, tiny compressed
    land(data, *[str(z) for z in zs])
    assert run_lines(data) == ["dev: 1 batches, 15000 rows"]


def test_max_bytes_units(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": {"path": "dev", "maxBytesPerTrigger": "2kb"}})
    d = tmp_path / "src"
    d.mkdir()
    for i in range(4):
        land(data, sized(d / ("k%d.json" % i), "k%d" % i, 1024))
    assert run_lines(data) == ["dev: 2 batches, 4 rows"]  # 2 KiB = two files


INVALID_CAPS = [
    ("maxFilesPerTrigger", 0),
    ("maxFilesPerTrigger", -1),
    ("maxFilesPerTrigger", "0"),
    ("maxFilesPerTrigger", "ten"),
    ("maxFilesPerTrigger", 1.5),
    ("maxFilesPerTrigger", ""),
    ("maxFilesPerTrigger", None),
    ("maxFilesPerTrigger", [5]),
    ("maxBytesPerTrigger", 0),
    ("maxBytesPerTrigger", -100),
    ("maxBytesPerTrigger", "0k"),
    ("maxBytesPerTrigger", "12x"),
    ("maxBytesPerTrigger", "lots"),
    ("maxBytesPerTrigger", "-1m"),
    ("maxBytesPerTrigger", ""),
    ("maxBytesPerTrigger", {"k": 1}),
]


@pytest.mark.parametrize("option,value", INVALID_CAPS,
                         ids=["%s=%r" % c for c in INVALID_CAPS])
def test_invalid_cap_refused(tmp_path, option, value):
    data = str(tmp_path / "data")
    write_config(data, {"dev": {"path": "dev", option: value}})
    p = util.sluice("run", "--available-now", data)
    assert p.returncode == 4, (p.returncode, p.stdout, p.stderr)
    line = util.one_line(p.stderr)
    assert "queries.dev.source." + option in line, line
    assert p.stdout == ""

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        p = util.sluice("mount", data, mnt, timeout=20)
    finally:
        if util.is_listed_mount(str(mnt)):
            util.lazy_unmount(mnt)
            pytest.fail("mount accepted %s=%r" % (option, value))
    assert p.returncode == 4, (p.returncode, p.stdout, p.stderr)
    assert "queries.dev.source." + option in util.one_line(p.stderr)


def test_both_caps_refused(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": {"path": "dev", "maxFilesPerTrigger": 2,
                                "maxBytesPerTrigger": "1m"}})
    p = util.sluice("run", "--available-now", data)
    assert p.returncode == 4, (p.returncode, p.stderr)
    line = util.one_line(p.stderr)
    assert "queries.dev.source.max" in line and "PerTrigger" in line, line


# -- maxFileAge ---------------------------------------------------------------

def first_batch_then_old_files(data, tmp_path, ages=(30, 30, 3)):
    """Batch 0 plans one fresh file; then files with old mtimes land (now)."""
    land(data, src_file(tmp_path, "fresh.json"))
    assert run_lines(data) == ["dev: 1 batches, 1 rows"]
    olds = [src_file(tmp_path, "old%d.json" % i, age_days=a) for i, a in enumerate(ages)]
    land(data, *olds)
    # `sluice land` keeps the producer's mtime
    for f in olds:
        assert abs(os.stat(f).st_mtime - time.time()) > 2 * DAY


def test_max_file_age_default_clock_is_landing_time(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": {"path": "dev"}})  # maxFileAge 7 days, fileAgeBy landed
    first_batch_then_old_files(data, tmp_path)
    # landed just now: not old, whatever the producer's mtime says
    assert run_lines(data) == ["dev: 1 batches, 3 rows"]
    m = mounts.new(data=data)
    assert sorted(out_ids(m)) == ["fresh.json", "old0.json", "old1.json", "old2.json"]
    # the landed files keep their old mtime
    assert time.time() - os.stat(m.inp("dev", "old0.json")).st_mtime > 29 * DAY


def test_max_file_age_by_mtime_skips_old_files(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": {"path": "dev", "fileAgeBy": "mtime"}})  # 7 days
    first_batch_then_old_files(data, tmp_path)
    # old0, old1 (30 days) are older than the newest planned minus 7 days:
    # skipped; old2 (3 days) is not
    assert run_lines(data) == ["dev: 1 batches, 1 rows"]
    assert " backlog=0/0 " in query_status(data)
    assert run_lines(data) == ["dev: 0 batches, 0 rows"]  # skipped for good
    m = mounts.new(data=data)
    assert sorted(out_ids(m)) == ["fresh.json", "old2.json"]
    assert sources(m, 1) == ["in/dev/old2.json"]
    # skipped files are deletable, like committed ones
    os.unlink(m.inp("dev", "old0.json"))
    os.unlink(m.inp("dev", "old1.json"))
    os.unlink(m.inp("dev", "fresh.json"))
    assert sorted(os.listdir(m.inp("dev"))) == ["old2.json"]


@pytest.mark.allow_stderr(r"resource busy")
def test_max_file_age_skipping_everything_new_makes_no_batch(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": {"path": "dev", "fileAgeBy": "mtime", "maxFileAge": "10 days"}})
    land(data, src_file(tmp_path, "fresh.json"))
    run(data)
    land(data, src_file(tmp_path, "old0.json", age_days=11), src_file(tmp_path, "old1.json", age_days=20))
    assert " backlog=2/" in query_status(data)
    # every file is skipped: no batch, but the skip is recorded
    assert run_lines(data) == ["dev: 0 batches, 0 rows"]
    assert query_status(data) == "dev batch=0 rows=1 backlog=0/0 watermark=- error=-"
    m = mounts.new(data=data)
    assert commits(m) == ["0"] and out_files(m) == ["part-00000-00000.jsonl"]
    os.unlink(m.inp("dev", "old0.json"))
    os.unlink(m.inp("dev", "old1.json"))


def test_max_file_age_first_batch_takes_all(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": {"path": "dev", "fileAgeBy": "mtime", "maxFileAge": "1 day"}})
    land(data, src_file(tmp_path, "a.json", age_days=400), src_file(tmp_path, "b.json"),
         src_file(tmp_path, "c.json", age_days=30))
    assert run_lines(data) == ["dev: 1 batches, 3 rows"]
    # now the newest planned is b (now): a file 2 days old is skipped,
    # one 12 hours old is not
    land(data, src_file(tmp_path, "d.json", age_days=2), src_file(tmp_path, "e.json", age_days=0.5))
    assert run_lines(data) == ["dev: 1 batches, 1 rows"]
    m = mounts.new(data=data)
    assert sorted(out_ids(m)) == ["a.json", "b.json", "c.json", "e.json"]


def test_max_file_age_mtime_capped_at_landing(mounts, tmp_path):
    """fileAgeBy mtime takes a file's mtime capped at its landing time: a
    future mtime (touch -d 2099, allowed on a landed file) cannot age every
    later file out (DESIGN §1)."""
    data = str(tmp_path / "data")
    m = mounts.new(data=data)  # no query yet: nothing plans before the touch
    os.mkdir(m.inp("dev"))
    write_file(m.inp("dev", "future.json"), b'{"id":"future.json","n":1}\n')
    m.wait_landed()
    os.utime(m.inp("dev", "future.json"), (4102444800, 4102444800))  # 2100-01-01
    m.unmount()
    write_config(data, {"dev": {"path": "dev", "fileAgeBy": "mtime", "maxFileAge": "1 day"}})
    assert run_lines(data) == ["dev: 1 batches, 1 rows"]
    land(data, src_file(tmp_path, "later.json", age_days=0.5))
    assert run_lines(data) == ["dev: 1 batches, 1 rows"]
    m = mounts.new(data=data)
    assert sorted(out_ids(m)) == ["future.json", "later.json"]
    report = json.loads(open(m.p("status", "dev.json")).read())
    assert report["skippedByMaxFileAge"] == 0


def test_max_file_age_option_forms(mounts, tmp_path):
    data = str(tmp_path / "data")
    # a duration with a space and a plural unit; changed between starts (allowed)
    write_config(data, {"dev": {"path": "dev", "fileAgeBy": "mtime"}})
    land(data, src_file(tmp_path, "fresh.json"))
    run(data)
    write_config(data, {"dev": {"path": "dev", "fileAgeBy": "mtime", "maxFileAge": "60 Days"}})
    land(data, src_file(tmp_path, "old.json", age_days=30))
    assert run_lines(data) == ["dev: 1 batches, 1 rows"]  # 30 days < 60 days


@pytest.mark.allow_stderr(r"resource busy")
def test_skipped_deletable_unplanned_busy_in_mount(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": {"path": "dev", "fileAgeBy": "mtime", "maxFilesPerTrigger": 1}},
                 trigger={"processingTime": "1 hour"})
    land(data, src_file(tmp_path, "fresh.json"))
    assert run_lines(data) == ["dev: 1 batches, 1 rows"]
    # landing order: old0, old1 (to be skipped), next (batch 1), later (no batch yet)
    land(data, src_file(tmp_path, "old0.json", age_days=30), src_file(tmp_path, "old1.json", age_days=30))
    land(data, src_file(tmp_path, "next.json"))
    land(data, src_file(tmp_path, "later.json"))
    # the mount's first trigger runs at mount time: one batch of one file (the
    # skipped ones do not count against the cap); the next trigger is an hour away
    m = mounts.new(data=data)
    util.wait_for(lambda: "1" in commits(m), 10, "batch 1 to commit")
    time.sleep(0.2)
    assert sources(m, 1) == ["in/dev/next.json"]
    assert out_ids(m) == ["fresh.json", "next.json"]

    util.expect_errno(errno.EBUSY, os.unlink, m.inp("dev", "later.json"))  # not planned yet
    os.unlink(m.inp("dev", "old0.json"))    # skipped
    os.unlink(m.inp("dev", "old1.json"))
    os.unlink(m.inp("dev", "next.json"))    # committed
    assert sorted(os.listdir(m.inp("dev"))) == ["fresh.json", "later.json"]
    assert m.landing()["refused"].get("EBUSY") == 1
    assert " backlog=1/" in query_status(data)


# -- which files a query reads -----------------------------------------------

def test_path_matching(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {
        "dev": {"path": "dev", "schema": "id STRING, date STRING, a STRING, b BIGINT"},
        # a glob: partition columns are filled too (Spark fills them only without one)
        "glob": {"path": "dev/date=*", "schema": "id STRING, date STRING"},
    }, trigger={"processingTime": "1 hour"})
    # hidden names are final here, so they land (and must still not be read)
    m = mounts.new(data=data, opts=["temp=*.tmp"])
    read = ["dev/a.json", "dev/date=2026-10-04/b.json", "dev/a=1/b=2/c.json",
            "dev/a=x/date=2026-10-05/d.json", "dev/_k=v/e.json"]
    unread = ["dev/.hidden.json", "dev/.dir/x.json", "dev/_temporary/0/t.json",
              "dev/_SUCCESS", "dev/_meta.json", "dev/sub/s.json", "dev/a=1/sub/s.json",
              "dev/=v/e.json", "dev/date=2026-10-04/_temporary/t.json",
              "dev/date=2026-10-04/.x.json", "devx/a.json", "other/dev/a.json", "top.json"]
    for rel in read + unread:
        os.makedirs(os.path.dirname(m.inp(rel)), exist_ok=True)
        write_file(m.inp(rel), b'{"id":"%s"}\n' % rel.encode())
    m.wait_landed()
    assert m.landing()["filesLanded"] == len(read) + len(unread)

    # files no query reads are in no backlog and can be deleted at once;
    # the ones a query reads are held
    assert " backlog=5/" in query_status(data, "dev")
    assert " backlog=1/" in query_status(data, "glob")
    for rel in read:
        util.expect_errno(errno.EBUSY, os.unlink, m.inp(rel))
    m.allow(r"resource busy")
    keep = "dev/_SUCCESS"
    for rel in unread:
        if rel != keep:
            os.unlink(m.inp(rel))
    m.unmount()

    assert run_lines(data) == ["dev: 1 batches, 5 rows", "glob: 1 batches, 1 rows"]
    m = mounts.remount(m)
    assert sorted(sources(m, 0)) == sorted("in/" + r for r in read)
    rows = {}
    for rel in out_files(m):
        with open(os.path.join(m.mnt, "out", "dev", rel)) as f:
            for l in f.read().splitlines():
                r = json.loads(l)
                rows[r["id"]] = r
    assert rows == {
        "dev/a.json": {"id": "dev/a.json"},
        "dev/date=2026-10-04/b.json": {"id": "dev/date=2026-10-04/b.json", "date": "2026-10-04"},
        "dev/a=1/b=2/c.json": {"id": "dev/a=1/b=2/c.json", "a": "1", "b": 2},
        "dev/a=x/date=2026-10-05/d.json": {"id": "dev/a=x/date=2026-10-05/d.json",
                                           "a": "x", "date": "2026-10-05"},
        "dev/_k=v/e.json": {"id": "dev/_k=v/e.json"},
    }
    with open(os.path.join(m.mnt, "out", "glob", out_files(m, "glob")[0])) as f:
        assert [json.loads(l) for l in f.read().splitlines()] == [
            {"id": "dev/date=2026-10-04/b.json", "date": "2026-10-04"}]
    # committed now: deletable
    for rel in read:
        os.unlink(m.inp(rel))
    left = [os.path.relpath(os.path.join(dp, n), m.inp())
            for dp, _, ns in os.walk(m.inp()) for n in ns]
    assert left == [keep]


def test_sources_name_odd_file_names(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": {"path": "dev"}})
    names = ['with space.json', 'q"uote.json', 'back\\slash.json', 'caf\u00e9.json',
             'tab\tname.json', 'k=v.json']
    for n in names:
        land(data, src_file(tmp_path, n, ident="x"))
    assert run_lines(data) == ["dev: 1 batches, %d rows" % len(names)]
    m = mounts.new(data=data)
    assert sources(m, 0) == ["in/dev/" + n for n in names]


def test_overlapping_queries_each_read_every_file_once(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {
        "all": {"path": "*"},
        "dev": {"path": "dev", "maxFilesPerTrigger": 2},
        "devglob": {"path": "d*v"},
        "bytes": {"path": "dev", "maxBytesPerTrigger": 1},
    })
    names = []
    for i in range(5):
        names.append("f%d.json" % i)
        land(data, src_file(tmp_path, names[-1]))
    land(data, src_file(tmp_path, "o.json"), to="other")
    assert run_lines(data) == ["all: 1 batches, 6 rows", "bytes: 5 batches, 5 rows",
                               "dev: 3 batches, 5 rows", "devglob: 1 batches, 5 rows"]
    for i in range(5, 7):
        names.append("f%d.json" % i)
        land(data, src_file(tmp_path, names[-1]))
    assert run_lines(data) == ["all: 1 batches, 2 rows", "bytes: 2 batches, 2 rows",
                               "dev: 1 batches, 2 rows", "devglob: 1 batches, 2 rows"]
    m = mounts.new(data=data)
    assert out_ids(m, "all") == names[:5] + ["o.json"] + names[5:]
    for q in ("dev", "devglob", "bytes"):
        assert out_ids(m, q) == names, q
    # every query committed every file: all deletable
    for n in names:
        os.unlink(m.inp("dev", n))


def test_overlapping_queries_in_a_mount(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"a": {"path": "dev"}, "b": {"path": "dev/*"}})
    m = mounts.new(data=data)
    os.mkdir(m.inp("dev"))
    for i in range(6):
        write_file(m.inp("dev", "f%d.json" % i), b'{"id":"f%d"}\n' % i)

    def done():
        return all(sorted(out_ids(m, q)) == ["f%d" % i for i in range(6)] for q in "ab")
    util.wait_for(lambda: os.path.isdir(m.p("out", "a")) and os.path.isdir(m.p("out", "b"))
                  and done(), 15, "both queries to read all six files")
    time.sleep(0.3)
    assert done()  # and nothing twice


def test_query_matching_nothing_commits_nothing(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": {"path": "dev"}, "none": {"path": "nothing/here"},
                        "noglob": {"path": "x*"}})
    land(data, src_file(tmp_path, "a.json"))
    land(data, src_file(tmp_path, "b.json"), to="nothing")
    assert run_lines(data) == ["dev: 1 batches, 1 rows", "noglob: 0 batches, 0 rows",
                               "none: 0 batches, 0 rows"]
    assert query_status(data, "none") == "none batch=- rows=0 backlog=0/0 watermark=- error=-"
    m = mounts.new(data=data)
    for q in ("none", "noglob"):
        assert out_files(m, q) == []
        assert commits(m, q) == []
        off = m.p("checkpoint", q, "offsets")
        assert not os.path.isdir(off) or os.listdir(off) == []
    # nothing/b.json is no query's: deletable
    os.unlink(m.inp("nothing", "b.json"))
