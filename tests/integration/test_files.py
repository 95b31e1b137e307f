"""sluice files (issue 16 item 4): each landed file, when it landed, its size,
and per query what the query did with it: waiting, planned in batch N,
committed in batch N, failed in batch N, skipped by maxFileAge or by the
seen set (with the reason), archived or deleted by cleanSource. A skip made
while no batch runs is shown at once, counted in the next progress report
and in the metrics. Read-only: through a live mount and without one."""

import json
import os
import shutil
import time

import pytest

import util

pytestmark = pytest.mark.timeout(120)

SCHEMA = "id BIGINT"
DAY = 86400


def write_config(data, queries):
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump({"queries": queries}, f)


def q(path, **opts):
    src = {"format": "json", "path": path, "schema": SCHEMA}
    src.update(opts.pop("source", {}))
    d = {"source": src}
    d.update(opts)
    return d


def local(tmp_path, name, n=2, mtime=None):
    p = tmp_path / "src" / name
    os.makedirs(p.parent, exist_ok=True)
    p.write_text("".join('{"id": %d}\n' % i for i in range(n)))
    if mtime is not None:
        os.utime(p, (mtime, mtime))
    return str(p)


def land(data, path, to):
    p = util.sluice("land", data, path, "--to", to)
    assert p.returncode == 0, p.stderr


def run(data, env=None, want=0):
    p = util.sluice("run", "--available-now", data, timeout=60,
                    env=dict(os.environ, **(env or {})))
    assert p.returncode == want, (p.returncode, p.stdout, p.stderr)
    return p


def files_json(data, *args):
    p = util.sluice("files", "--json", data, *args)
    assert p.returncode == 0, p.stderr
    out = [json.loads(line) for line in p.stdout.splitlines()]
    for f in out:
        assert set(f) == {"path", "location", "id", "landed", "size", "checksum", "mtime",
                          "queries"}, f
        assert f["checksum"] is None
    return out


def states(data, *args):
    """{(path, query): query entry} from --json."""
    return {(f["path"], x["name"]): x for f in files_json(data, *args) for x in f["queries"]}


def plain(data, *args):
    p = util.sluice("files", data, *args)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def line_of(lines, path, query):
    got = [l for l in lines if l.split()[2:4] == [path, query]]
    assert len(got) == 1, (path, query, lines)
    return got[0]


def metric(text, name, **labels):
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(name + "{"):
            head, val = line.rsplit(" ", 1)
            got = ",".join(sorted(head[len(name) + 1:-1].split(",")))
            if got == want:
                return float(val)
    raise AssertionError("no %s{%s} in metrics" % (name, want))


def test_states_through_a_mount(mounts, tmp_path):
    """cp and mv into a live mount: a query with no trigger commits what
    lands, one on an hourly trigger leaves it waiting, cleanSource archives or
    deletes; `sluice files` reads it all while mounted, with aligned
    columns, and the same in --json."""
    data = str(tmp_path / "data")
    write_config(data, {
        "now": q("ev"),
        "hourly": q("ev", trigger={"processingTime": "1 hour"}),
        "arch": q("ar", source={"cleanSource": "archive"}),
        "del": q("dl", source={"cleanSource": "delete"})})
    # the hourly query's first trigger takes this file at mount time; what
    # lands after that waits an hour
    land(data, local(tmp_path, "0.json"), "ev")
    m = mounts.new(data=data)

    def report(name):
        with open(m.p("status", name + ".json")) as f:
            return json.load(f)
    util.wait_for(lambda: report("hourly") and report("now"), 30, "the first batches")
    for d in ("ar", "dl", "misc"):
        os.mkdir(m.inp(d))
    # one landing at a time: a cp lands with the next group commit after its
    # RELEASE, a rename at once, so without the waits the order could vary
    shutil.copy(local(tmp_path, "a.json"), m.inp("ev", "a.json"))
    m.wait_landed()
    stage = m.inp("ev", ".b.json.part")
    shutil.copy(local(tmp_path, "b.json", 3), stage)
    os.rename(stage, m.inp("ev", "b.json"))
    for d, name in (("ar", "c.json"), ("dl", "d.json"), ("misc", "e.json")):
        shutil.copy(local(tmp_path, name), m.inp(d, name))
        m.wait_landed()

    def settled():
        s = states(data)
        return (s[("ev/a.json", "now")]["state"] == "committed"
                and s[("ev/b.json", "now")]["state"] == "committed"
                and s[("ar/c.json", "arch")]["state"] == "archived"
                and s[("dl/d.json", "del")]["state"] == "deleted") and s
    s = util.wait_for(settled, 30, "the queries to commit and clean")
    assert s[("ev/a.json", "hourly")] == {"name": "hourly", "state": "waiting", "batch": None}
    assert s[("ev/b.json", "hourly")]["state"] == "waiting"
    assert s[("ar/c.json", "arch")]["batch"] == 0 and s[("dl/d.json", "del")]["batch"] == 0
    assert s[("ev/0.json", "hourly")] == {"name": "hourly", "state": "committed", "batch": 0}
    assert s[("ev/0.json", "now")]["batch"] == 0
    batches = sorted((s[("ev/a.json", "now")]["batch"], s[("ev/b.json", "now")]["batch"]))
    assert batches[0] == 1
    by_path = {f["path"]: f for f in files_json(data)}
    listed = files_json(data)
    assert [f["path"] for f in listed] == \
        ["ev/0.json", "ev/a.json", "ev/b.json", "ar/c.json", "dl/d.json",
         "misc/e.json"]  # landing order
    assert [f["landed"] for f in listed] == sorted(f["landed"] for f in listed)
    assert by_path["ev/a.json"]["location"] == "in/ev/a.json"
    assert by_path["ev/b.json"]["size"] == os.stat(m.inp("ev", "b.json")).st_size
    assert by_path["ev/b.json"]["id"] == os.stat(m.inp("ev", "b.json")).st_ino
    assert by_path["ar/c.json"]["location"] == "archive/ar/c.json"
    assert os.path.exists(m.p("archive", "ar", "c.json"))
    assert by_path["dl/d.json"]["location"] is None and by_path["dl/d.json"]["mtime"] is None
    assert not os.path.exists(m.inp("dl", "d.json"))
    assert by_path["misc/e.json"]["queries"] == []

    lines = plain(data)
    assert lines[0].split() == ["LANDED", "SIZE", "PATH", "QUERY", "STATE"]
    # aligned: every column starts where its header does
    for col in ("SIZE", "PATH", "QUERY", "STATE"):
        at = lines[0].index(col) + (len(col) if col == "SIZE" else 0)
        for l in lines[1:]:
            if col == "SIZE":
                assert l[at - 1] != " " and l[at] == " ", (col, l)
            else:
                assert l[at - 1] == " " and l[at] != " ", (col, l)
    assert line_of(lines, "ev/a.json", "hourly").endswith("  waiting")
    assert "committed in batch" in line_of(lines, "ev/b.json", "now")
    assert line_of(lines, "ar/c.json", "arch").endswith(
        "archived by cleanSource after batch 0 to archive/ar/c.json")
    assert line_of(lines, "dl/d.json", "del").endswith("deleted by cleanSource after batch 0")
    assert line_of(lines, "misc/e.json", "-").endswith("read by no query")
    m.unmount()
    # the same without the mount
    assert states(data) == s


def test_planned_failed_committed_without_a_mount(tmp_path):
    """A fault point between offsets/0 and the commit leaves batch 0 planned;
    the next run commits it. A FAILFAST file shows as failed in its batch
    with the error, as `sluice status` shows it."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    data = str(tmp_path / "data")
    write_config(data, {"q": q("ev"), "ff": q("bad", source={"mode": "FAILFAST"})})
    land(data, local(tmp_path, "a.json"), "ev")
    land(data, local(tmp_path, "b.json"), "ev")
    run(data, env={"SLUICE_FAULT": "engine.after_offsets:1"}, want=86)
    s = states(data, "--query", "q")
    assert s[("ev/a.json", "q")] == {"name": "q", "state": "planned", "batch": 0}
    assert s[("ev/b.json", "q")]["state"] == "planned"
    assert "planned in batch 0" in line_of(plain(data, "--query", "q"), "ev/a.json", "q")
    run(data, want=0)
    s = states(data, "--query", "q")
    assert s[("ev/a.json", "q")] == {"name": "q", "state": "committed", "batch": 0}
    assert s[("ev/b.json", "q")] == {"name": "q", "state": "committed", "batch": 0}

    bad = tmp_path / "src" / "bad.json"
    bad.write_text('{"id": 1}\nnot json\n')
    land(data, str(bad), "bad")
    land(data, local(tmp_path, "later.json"), "ev")
    run(data, want=1)
    s = states(data)
    f = s[("bad/bad.json", "ff")]
    assert f["state"] == "failed" and f["batch"] == 0
    assert "'in/bad/bad.json' line 2" in f["error"]
    assert f["error"] in util.sluice("status", data).stdout
    assert s[("ev/later.json", "q")] == {"name": "q", "state": "committed", "batch": 1}
    assert "failed in batch 0: " in line_of(plain(data), "bad/bad.json", "ff")


def test_max_file_age_skip_while_no_batch_runs(mounts, tmp_path):
    """The seed's trap: a file older than the newest planned minus maxFileAge
    lands while the query is idle. Planning skips it and no batch runs; it
    is visible at once here and in status/metrics, counted in the next
    progress report, and can be deleted."""
    data = str(tmp_path / "data")
    write_config(data, {"q": q("ev", source={"maxFileAge": "1 hour", "fileAgeBy": "mtime"})})
    m = mounts.new(data=data)
    os.mkdir(m.inp("ev"))
    shutil.copy(local(tmp_path, "new.json"), m.inp("ev", "new.json"))
    util.wait_for(lambda: states(data).get(("ev/new.json", "q"), {}).get("state") == "committed",
                  30, "batch 0")
    report = json.load(open(m.p("status", "q.json")))
    assert report["batchId"] == 0 and report["skippedByMaxFileAge"] == 0
    # two days old by its mtime, set before the rename lands it
    old = time.time() - 2 * DAY
    stage = m.inp("ev", ".old.json")
    shutil.copy(local(tmp_path, "old.json"), stage)
    os.utime(stage, (old, old))
    os.rename(stage, m.inp("ev", "old.json"))
    s = util.wait_for(lambda: states(data).get(("ev/old.json", "q"), {}).get("state") == "skipped"
                      and states(data), 30, "the skip")
    x = s[("ev/old.json", "q")]
    assert x["reason"] == "maxFileAge" and x["batch"] is None
    assert x["ageClock"] < x["threshold"] and x["ageClock"].startswith(
        time.strftime("%Y-%m-%d", time.gmtime(old)))
    line = line_of(plain(data), "ev/old.json", "q")
    assert "skipped by maxFileAge: age " in line and "newest planned minus maxFileAge" in line
    # no batch ran: the report is still batch 0's, the metrics count it already
    time.sleep(0.5)
    assert json.load(open(m.p("status", "q.json")))["batchId"] == 0
    with open(m.p("status", "metrics")) as f:
        text = f.read()
    assert metric(text, "sluice_query_skipped_files_total", query="q", reason="max_file_age") == 1
    assert metric(text, "sluice_query_skipped_files_total", query="q", reason="already_seen") == 0
    assert metric(text, "sluice_query_backlog_files", query="q") == 0
    # skipped files are deletable, and stay listed as skipped
    os.unlink(m.inp("ev", "old.json"))
    f = {f["path"]: f for f in files_json(data)}["ev/old.json"]
    assert f["location"] is None and f["queries"][0]["state"] == "skipped"
    # the next batch's report counts the skip, once
    shutil.copy(local(tmp_path, "next.json"), m.inp("ev", "next.json"))
    util.wait_for(lambda: json.load(open(m.p("status", "q.json")))["batchId"] == 1, 30, "batch 1")
    assert json.load(open(m.p("status", "q.json")))["skippedByMaxFileAge"] == 1
    assert states(data)[("ev/next.json", "q")]["batch"] == 1
    shutil.copy(local(tmp_path, "third.json"), m.inp("ev", "third.json"))
    util.wait_for(lambda: json.load(open(m.p("status", "q.json")))["batchId"] == 2, 30, "batch 2")
    assert json.load(open(m.p("status", "q.json")))["skippedByMaxFileAge"] == 0
    m.unmount()
    p = util.sluice("status", "--prometheus", data)
    assert metric(p.stdout, "sluice_query_skipped_files_total", query="q",
                  reason="max_file_age") == 1


def test_seen_set_skip(tmp_path):
    """fileNameOnly: a file whose name was read before is skipped as seen,
    with the name that was seen, and counted in the metrics."""
    data = str(tmp_path / "data")
    write_config(data, {"q": q("ev", source={"fileNameOnly": True})})
    land(data, local(tmp_path, "x.json"), "ev")
    run(data)
    land(data, local(tmp_path, "x.json", 5), "ev/day=2")
    land(data, local(tmp_path, "y.json"), "ev/day=2")
    run(data)
    s = states(data)
    x = s[("ev/day=2/x.json", "q")]
    assert x == {"name": "q", "state": "skipped", "batch": None, "reason": "alreadySeen",
                 "seenKey": "x.json"}
    assert s[("ev/day=2/y.json", "q")] == {"name": "q", "state": "committed", "batch": 1}
    assert line_of(plain(data), "ev/day=2/x.json", "q").endswith(
        "skipped by the seen set: name 'x.json' already seen")
    p = util.sluice("status", "--prometheus", data)
    assert metric(p.stdout, "sluice_query_skipped_files_total", query="q",
                  reason="already_seen") == 1


def test_filters_glob_and_query(tmp_path):
    """PATH|GLOB on the in/-relative path (a folder selects what is under it,
    a leading in/ is dropped); --query keeps the files it reads and only its
    state."""
    data = str(tmp_path / "data")
    write_config(data, {"a": q("ev"), "b": q("ev/*.json"), "c": q("other")})
    for to, name in (("ev", "1.json"), ("ev", "2.csv"), ("ev/k=v", "3.json"),
                     ("other", "4.json"), ("misc", "5.json")):
        land(data, local(tmp_path, name), to)
    run(data)
    paths = lambda *a: [f["path"] for f in files_json(data, *a)]
    assert paths() == ["ev/1.json", "ev/2.csv", "ev/k=v/3.json", "other/4.json", "misc/5.json"]
    assert paths("ev") == ["ev/1.json", "ev/2.csv", "ev/k=v/3.json"]
    assert paths("in/ev/") == paths("ev")
    assert paths("ev/*.json") == ["ev/1.json"]
    assert paths("*/*.json") == ["ev/1.json", "other/4.json", "misc/5.json"]
    assert paths("ev/k=*/3.json") == ["ev/k=v/3.json"]
    assert paths("nothing") == [] and plain(data, "nothing") == []
    assert paths("--query", "b") == ["ev/1.json"]
    assert paths("--query", "a", "*/*.json") == ["ev/1.json"]
    got = files_json(data, "--query", "b")
    assert [x["name"] for x in got[0]["queries"]] == ["b"]
    assert [x["name"] for x in files_json(data, "ev/1.json")[0]["queries"]] == ["a", "b"]
    lines = plain(data, "--query", "c")
    assert len(lines) == 2 and line_of(lines, "other/4.json", "c").endswith("committed in batch 0")


def test_errors_and_new_data_dirs(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"q": q("ev")})
    land(data, local(tmp_path, "a.json"), "ev")
    p = util.sluice("files", "--query", "nope", data)
    assert p.returncode == 2 and "unknown query 'nope'" in util.one_line(p.stderr)
    assert util.sluice("files").returncode == 2
    assert util.sluice("files", data, "a", "b").returncode == 2
    assert util.sluice("files", "--bogus", data).returncode == 2
    assert util.sluice("files", data, "../x").returncode == 2
    h = util.sluice("files", "--help")
    assert h.returncode == 0 and h.stdout.startswith("usage: sluice files")
    # not a data dir: exit 4, and nothing written there
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine\n")
    p = util.sluice("files", str(other))
    assert p.returncode == 4 and "not a sluice data dir" in util.one_line(p.stderr)
    assert os.listdir(other) == ["notes.txt"]
    # a missing data dir is new (DESIGN): nothing listed, nothing created
    missing = tmp_path / "missing"
    p = util.sluice("files", str(missing))
    assert (p.returncode, p.stdout) == (0, "") and not missing.exists()
    p = util.sluice("files", "--json", str(missing))
    assert (p.returncode, p.stdout) == (0, "")
    # only sluice.json, never run: its files are none yet
    fresh = str(tmp_path / "fresh")
    write_config(fresh, {"q": q("ev")})
    assert util.sluice("files", fresh).stdout == ""
    # landed, never run: waiting
    assert states(data)[("ev/a.json", "q")] == {"name": "q", "state": "waiting", "batch": None}
    # an invalid config: 4
    with open(os.path.join(data, "sluice.json"), "w") as f:
        f.write("{")
    assert util.sluice("files", data).returncode == 4
