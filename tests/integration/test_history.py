"""What the catalog keeps per processed file (issue 16 item 5): settled
records in compressed history segments kept `fileHistory`, the seen set by a
keyed 128-bit digest with Spark's purge, long source logs compressed; and
catalog format 2: a format 1 data dir is migrated at start (its history and
seen set carried over), a newer format is refused naming both versions."""

import json
import os
import re
import shutil
import subprocess
import time

import pytest

import util

pytestmark = pytest.mark.timeout(180)

HERE = os.path.dirname(os.path.abspath(__file__))
V1 = os.path.join(HERE, "fixtures", "catalog-v1")
FORMAT_KEY = "666f726d6174"  # "format" in mdb_dump's hex


def write_config(data, src, **query):
    os.makedirs(data, exist_ok=True)
    q = {"source": dict({"format": "json", "path": "dev", "schema": "id BIGINT"}, **src),
         "sink": {"format": "json"}}
    q.update(query)
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump({"queries": {"q": q}}, f)


def local(tmp_path, name, ident):
    p = tmp_path / "src" / name
    os.makedirs(p.parent, exist_ok=True)
    p.write_text('{"id": %d}\n' % ident)
    return str(p)


def land(data, *paths, to="dev"):
    p = util.sluice("land", data, *paths, "--to", to)
    assert p.returncode == 0, p.stderr


def run(data, want=0):
    p = util.sluice("run", "--available-now", data, timeout=120)
    assert p.returncode == want, (p.returncode, p.stdout, p.stderr)
    return p


def listing(data):
    """[(path, state text)] of `sluice files --json` for query q, in landing order."""
    p = util.sluice("files", "--json", data)
    assert p.returncode == 0, p.stderr
    out = []
    for line in p.stdout.splitlines():
        f = json.loads(line)
        for x in f["queries"]:
            out.append((f["path"], x["state"], x.get("batch"), x.get("reason")))
    return out


def catalog_format(data):
    p = subprocess.run(["mdb_dump", "-s", "meta", os.path.join(data, "catalog")],
                       capture_output=True, text=True, check=True)
    lines = [l.strip() for l in p.stdout.splitlines()]
    v = lines[lines.index(FORMAT_KEY) + 1]
    return int.from_bytes(bytes.fromhex(v), "little")


def set_format(data, fmt):
    dump = ("VERSION=3\nformat=bytevalue\ndatabase=meta\ntype=btree\nHEADER=END\n"
            " %s\n %s\nDATA=END\n" % (FORMAT_KEY, fmt.to_bytes(8, "little").hex()))
    subprocess.run(["mdb_load", "-s", "meta", os.path.join(data, "catalog")],
                   input=dump, text=True, check=True, capture_output=True)


def v1_data_dir(tmp_path):
    """The fixture: a data dir written by sluice with catalog format 1 (the
    commit before format 2), loaded from its mdb_dump. Query q (cleanSource
    delete) read dev/a.json and dev/b.json in batch 0, then a resent dev/a.json
    was skipped by the seen set."""
    data = str(tmp_path / "data")
    os.makedirs(os.path.join(data, "catalog"))
    shutil.copy(os.path.join(V1, "sluice.json"), data)
    subprocess.run(["mdb_load", "-f", os.path.join(V1, "catalog.dump"),
                    os.path.join(data, "catalog")], check=True, capture_output=True)
    return data


V1_LISTING = [("dev/a.json", "deleted", 0, None), ("dev/b.json", "deleted", 0, None),
              ("dev/a.json", "skipped", None, "alreadySeen")]


def test_format_1_data_dir_is_migrated_at_start(tmp_path):
    data = v1_data_dir(tmp_path)
    assert catalog_format(data) == 1
    # read-only tools read a format 1 catalog as it is, and change nothing
    assert listing(data) == V1_LISTING
    assert catalog_format(data) == 1
    run(data)
    assert catalog_format(data) == 2
    # the history came across (now from segments)
    assert listing(data) == V1_LISTING
    # and the seen set: b.json was read by format 1, its resend is skipped;
    # c.json is new
    land(data, local(tmp_path, "dev/b.json", 3), local(tmp_path, "dev/c.json", 4))
    run(data)
    assert listing(data) == V1_LISTING + [("dev/b.json", "skipped", None, "alreadySeen"),
                                          ("dev/c.json", "deleted", 1, None)]
    rows = util.sluice("status", "--json", data)
    assert rows.returncode == 0, rows.stderr
    assert json.loads(rows.stdout)["queries"][0]["batch"] == 1
    chk = util.sluice("check", data)
    assert chk.returncode == 0, chk.stdout + chk.stderr
    # a second start finds format 2 and changes nothing
    run(data)
    assert catalog_format(data) == 2


def test_newer_format_is_refused_naming_both_versions(tmp_path):
    data = v1_data_dir(tmp_path)
    run(data)
    before = listing(data)
    set_format(data, 3)
    mnt = str(tmp_path / "mnt")
    os.makedirs(mnt)
    for args in (["run", "--available-now", data], ["files", data], ["status", data],
                 ["check", data], ["land", data, local(tmp_path, "x.json", 9)],
                 ["mount", "-f", data, mnt]):
        p = util.sluice(*args, timeout=30)
        assert p.returncode == 4, (args, p.returncode, p.stderr)
        assert "catalog format 3" in p.stderr and "formats 1 to 2" in p.stderr, p.stderr
    assert not os.path.ismount(mnt)
    assert catalog_format(data) == 3  # never rewritten
    set_format(data, 2)
    assert listing(data) == before


def test_file_history_keeps_settled_records_for_its_window(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"cleanSource": "delete", "fileHistory": "2 s"})
    land(data, local(tmp_path, "dev/a.json", 1), local(tmp_path, "dev/b.json", 2))
    run(data)
    land(data, local(tmp_path, "dev/a.json", 3))
    run(data)  # the resend: skipped by the seen set, settled at once
    assert listing(data) == [("dev/a.json", "deleted", 0, None),
                             ("dev/b.json", "deleted", 0, None),
                             ("dev/a.json", "skipped", None, "alreadySeen")]
    time.sleep(2.5)
    land(data, local(tmp_path, "dev/c.json", 4))
    run(data)  # its commit drops the history older than 2 s
    # the deleted files' records went with the window; the skipped resend is
    # still landed (a skip never deletes), so its record stays
    assert listing(data) == [("dev/a.json", "skipped", None, "alreadySeen"),
                             ("dev/c.json", "deleted", 1, None)]


def test_default_file_history_keeps_records(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"cleanSource": "delete", "maxFilesPerTrigger": 1})
    paths = [local(tmp_path, "dev/f%02d.json" % i, i) for i in range(12)]
    land(data, *paths)
    run(data)
    got = listing(data)
    assert got == [("dev/f%02d.json" % i, "deleted", i, None) for i in range(12)]


def test_seen_set_purge_follows_max_file_age(tmp_path):
    """Spark's purge: a seen entry older than the newest planned minus
    maxFileAge is gone, so the same path is read again; a younger one is not."""
    data = str(tmp_path / "data")
    write_config(data, {"cleanSource": "delete", "maxFileAge": "1 s"})
    land(data, local(tmp_path, "dev/a.json", 1))
    run(data)
    time.sleep(1.5)
    land(data, local(tmp_path, "dev/b.json", 2))
    run(data)  # plans b: the purge threshold passes a's entry
    land(data, local(tmp_path, "dev/a.json", 3), local(tmp_path, "dev/b.json", 4))
    run(data)
    got = listing(data)
    assert got[-2:] == [("dev/a.json", "deleted", 2, None),
                        ("dev/b.json", "skipped", None, "alreadySeen")], got


def test_long_source_log_reads_whole_through_the_mount(mounts, tmp_path):
    """sources/0/K of a batch of many files is stored compressed: through the
    mount its size and bytes are the text Spark writes."""
    m = mounts.new(start=False)
    write_config(str(m.data), {})
    names = ["part-%04d-with-a-long-name-to-make-the-log-long.json" % i for i in range(300)]
    srcs = [local(tmp_path, "dev/" + n, i) for i, n in enumerate(names)]
    land(str(m.data), *srcs)
    m.start()
    util.wait_for(lambda: os.path.exists(os.path.join(m.mnt, "checkpoint", "q", "commits", "0")),
                  timeout=60, what="batch 0's commit")
    p = os.path.join(m.mnt, "checkpoint", "q", "sources", "0", "0")
    with open(p, "rb") as f:
        text = f.read()
    assert os.stat(p).st_size == len(text) > 4096
    assert [e.stat().st_size for e in os.scandir(os.path.dirname(p)) if e.name == "0"] == [len(text)]
    lines = text.decode().split("\n")
    assert lines[0] == "v1"
    got = sorted(json.loads(l)["path"].rsplit("/", 1)[1] for l in lines[1:])
    assert got == sorted(names)


def qseen_entries(data):
    p = subprocess.run(["mdb_stat", "-s", "qseen", os.path.join(data, "catalog")],
                       capture_output=True, text=True, check=True)
    return int(re.search(r"Entries: (\d+)", p.stdout).group(1))


def test_purged_seen_entries_leave_the_catalog(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"cleanSource": "delete", "maxFileAge": "1 s"})
    land(data, *[local(tmp_path, "dev/old%d.json" % i, i) for i in range(5)])
    run(data)
    assert qseen_entries(data) == 5
    time.sleep(1.5)
    land(data, local(tmp_path, "dev/new.json", 9))
    run(data)  # the purge passes the five older entries; the sweep deletes them
    assert qseen_entries(data) == 1


def test_removed_file_record_moves_to_history_then_expires(mounts, tmp_path):
    """Without cleanSource a user removes a committed file: its record moves
    into the history at a later commit, and leaves after fileHistory."""
    m = mounts.new(start=False)
    write_config(str(m.data), {"fileHistory": "1 s"})
    m.start()
    dev = os.path.join(m.mnt, "in", "dev")
    os.makedirs(dev)

    def commit(n, name):
        shutil.copy(local(tmp_path, name, n), os.path.join(dev, name))
        util.wait_for(lambda: os.path.exists(
            os.path.join(m.mnt, "checkpoint", "q", "commits", str(n))),
            timeout=60, what="commit %d" % n)

    commit(0, "a.json")
    os.unlink(os.path.join(dev, "a.json"))
    removed = ("a.json", "committed", 0)
    got = lambda: [(os.path.basename(f[0]), f[1], f[2]) for f in listing(str(m.data))]
    assert removed in got()
    commit(1, "b.json")  # its commit's sweep moves a.json's record into the history
    assert removed in got()
    time.sleep(1.5)
    commit(2, "c.json")  # and this one drops it
    assert got() == [("b.json", "committed", 1), ("c.json", "committed", 2)]
