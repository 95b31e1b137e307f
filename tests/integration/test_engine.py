"""The engine: `sluice run --available-now` over landed files, committed
output in out/, the checkpoint as Spark lays it out (DESIGN.md §1-2; the
seed lab's first part). Tests that count batches land first, then run."""

import errno
import json
import os
import subprocess

import pytest

import util

pytestmark = pytest.mark.timeout(90)

SCHEMA = "event_id STRING, device STRING, value BIGINT, event_time TIMESTAMP"


def bundle(path, start, n):
    with open(path, "w") as f:
        for i in range(start, start + n):
            f.write(json.dumps({"event_id": "e-%04d" % i, "device": "d%d" % (i % 3),
                                "value": i, "event_time": "2026-10-04T12:%02d:00Z" % (i % 60)})
                    + "\n")
    return path


def write_config(data, source=None, sink=None, name="dev"):
    os.makedirs(data, exist_ok=True)
    src = {"format": "json", "path": "dev", "schema": SCHEMA}
    src.update(source or {})
    q = {"source": src}
    if sink:
        q["sink"] = sink
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump({"queries": {name: q}}, f)


def land(data, *files, to="dev"):
    p = util.sluice("land", data, *files, "--to", to)
    assert p.returncode == 0, p.stderr


def run(data, expect=0):
    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.returncode == expect, (p.returncode, p.stdout, p.stderr)
    return p


def read(m, *parts):
    with open(os.path.join(m.mnt, *parts), "rb") as f:
        return f.read()


def out_rows(m, query="dev"):
    rows = []
    base = os.path.join(m.mnt, "out", query)
    for dirpath, _, names in sorted(util.walk_out(base)):
        for n in sorted(names):
            data = open(os.path.join(dirpath, n), "rb").read()
            if n.endswith(".zst"):
                data = subprocess.run(["zstd", "-dc"], input=data, capture_output=True,
                                      check=True).stdout
            rows += [json.loads(l) for l in data.decode().splitlines() if l]
    return rows


@pytest.fixture
def data(tmp_path):
    d = str(tmp_path / "data")
    write_config(d)
    return d


def test_seed_lab_batches_and_checkpoint(mounts, data, tmp_path):
    b1 = bundle(str(tmp_path / "bundle1.json"), 0, 10)
    land(data, b1)
    p = run(data)
    assert p.stdout.strip() == "dev: 1 batches, 10 rows"

    m = mounts.new(data=data)
    assert util.list_out(os.path.join(m.mnt, "out", "dev")) == ["part-00000-00000.jsonl"]
    assert [r["event_id"] for r in out_rows(m)] == ["e-%04d" % i for i in range(10)]
    # Spark's layout: v1, then JSON lines, no trailing newline
    off = read(m, "checkpoint", "dev", "offsets", "0").decode()
    lines = off.split("\n")
    assert lines[0] == "v1" and not off.endswith("\n")
    meta = json.loads(lines[1])
    assert list(meta) == ["batchWatermarkMs", "batchTimestampMs", "conf"]
    assert meta["batchWatermarkMs"] == 0 and meta["conf"] == {}
    assert json.loads(lines[2]) == {"logOffset": 0}
    assert read(m, "checkpoint", "dev", "commits", "0") == b'v1\n{"nextBatchWatermarkMs":0}'
    src = read(m, "checkpoint", "dev", "sources", "0", "0").decode().split("\n")
    assert src[0] == "v1"
    entry = json.loads(src[1])
    assert entry["path"] == "in/dev/bundle1.json" and entry["batchId"] == 0
    assert isinstance(entry["timestamp"], int)
    md = json.loads(read(m, "checkpoint", "dev", "metadata"))
    assert len(md["id"]) == 36
    m.unmount()

    # a new bundle is a batch of its own; two landed together are one batch
    land(data, bundle(str(tmp_path / "bundle2.json"), 10, 5))
    assert run(data).stdout.strip() == "dev: 1 batches, 5 rows"
    land(data, bundle(str(tmp_path / "bundle3.json"), 15, 5),
         bundle(str(tmp_path / "bundle4.json"), 20, 5))
    assert run(data).stdout.strip() == "dev: 1 batches, 10 rows"
    assert run(data).stdout.strip() == "dev: 0 batches, 0 rows"  # nothing new

    m = mounts.new(data=data)
    assert sorted(os.listdir(os.path.join(m.mnt, "checkpoint", "dev", "commits"))) == \
        ["0", "1", "2"]
    assert json.loads(read(m, "checkpoint", "dev", "offsets", "2").decode()
                      .split("\n")[2]) == {"logOffset": 2}
    src2 = read(m, "checkpoint", "dev", "sources", "0", "2").decode().split("\n")[1:]
    assert sorted(json.loads(l)["path"] for l in src2) == \
        ["in/dev/bundle3.json", "in/dev/bundle4.json"]
    assert len(out_rows(m)) == 25
    status = util.sluice("status", data).stdout.splitlines()
    assert status[1] == "dev batch=2 rows=10 backlog=0/0 watermark=- error=-"


def test_resent_bundle_duplicates_rows(mounts, data, tmp_path):
    b = bundle(str(tmp_path / "bundle1.json"), 0, 4)
    land(data, b)
    run(data)
    resent = str(tmp_path / "bundle1-resent.json")
    os.rename(b, resent)
    land(data, resent)
    run(data)
    m = mounts.new(data=data)
    ids = [r["event_id"] for r in out_rows(m)]
    assert len(ids) == 8 and len(set(ids)) == 4  # exactly once per file, not per row


def test_max_files_per_trigger_gives_batches(mounts, tmp_path):
    data = str(tmp_path / "capped")
    write_config(data, {"maxFilesPerTrigger": 2})
    files = [bundle(str(tmp_path / ("b%d.json" % i)), i * 3, 3) for i in range(5)]
    land(data, *files)
    assert run(data).stdout.strip() == "dev: 3 batches, 15 rows"
    m = mounts.new(data=data)
    assert sorted(util.list_out(os.path.join(m.mnt, "out", "dev"))) == [
        "part-00000-00000.jsonl", "part-00001-00000.jsonl", "part-00002-00000.jsonl"]


def test_max_bytes_per_trigger_takes_at_least_one_file(tmp_path):
    data = str(tmp_path / "bytes")
    write_config(data, {"maxBytesPerTrigger": "1b"})
    land(data, *[bundle(str(tmp_path / ("b%d.json" % i)), i, 1) for i in range(3)])
    assert run(data).stdout.strip() == "dev: 3 batches, 3 rows"


@pytest.mark.allow_stderr(r".")
def test_failfast_commits_nothing_and_names_file_and_line(mounts, tmp_path):
    data = str(tmp_path / "ff")
    write_config(data, {"mode": "FAILFAST"})
    bad = tmp_path / "bad.json"
    bad.write_text('{"event_id":"a","value":1}\n{"event_id":"b","value":"x"}\n')
    land(data, str(bad))
    p = run(data, expect=1)
    err = util.one_line(p.stderr)
    assert "in/dev/bad.json" in err and "line 2" in err, err
    st = util.sluice("status", data).stdout.splitlines()[1]
    assert st.startswith("dev batch=- rows=0 ") and "error=-" not in st, st
    # the way out: a mode the checkpoint survives, then the same batch re-runs
    write_config(data, {"mode": "PERMISSIVE"})
    assert run(data).stdout.strip() == "dev: 1 batches, 2 rows, 1 malformed"
    m = mounts.new(data=data)
    rows = out_rows(m)
    assert rows[0] == {"event_id": "a", "value": 1}
    assert rows[1] == {"event_id": "b"}  # the field that failed to convert is null
    assert util.sluice("status", data).stdout.splitlines()[1].endswith("error=-")


def test_zstd_in_and_out(mounts, tmp_path):
    data = str(tmp_path / "z")
    write_config(data, sink={"format": "json", "compression": "zstd"})
    plain = bundle(str(tmp_path / "b.json"), 0, 6)
    subprocess.run(["zstd", "-q", plain, "-o", plain + ".zst"], check=True)
    land(data, plain + ".zst")
    assert run(data).stdout.strip() == "dev: 1 batches, 6 rows"
    m = mounts.new(data=data)
    part = os.path.join(m.mnt, "out", "dev", "part-00000-00000.jsonl.zst")
    p = subprocess.run("zstdcat '%s' | jq -c .event_id" % part, shell=True,
                       capture_output=True, text=True, check=True)
    assert p.stdout.split() == ['"e-%04d"' % i for i in range(6)]


def test_out_and_checkpoint_are_read_only(mounts, data, tmp_path):
    land(data, bundle(str(tmp_path / "b.json"), 0, 1))
    run(data)
    m = mounts.new(data=data)
    part = os.path.join(m.mnt, "out", "dev", "part-00000-00000.jsonl")
    util.expect_errno(30, os.open, part, os.O_WRONLY)  # EROFS
    util.expect_errno(30, os.unlink, part)
    util.expect_errno(30, os.mkdir, os.path.join(m.mnt, "out", "dev", "x"))
    util.expect_errno(30, os.open, os.path.join(m.mnt, "checkpoint", "dev", "commits", "0"),
                      os.O_WRONLY)


def test_batch_ids_continue_across_runs_and_mounts(mounts, data, tmp_path):
    land(data, bundle(str(tmp_path / "a.json"), 0, 2))
    run(data)
    m = mounts.new(data=data)
    m.unmount()
    land(data, bundle(str(tmp_path / "b.json"), 2, 2))
    run(data)
    m = mounts.remount(m)
    assert sorted(util.list_out(os.path.join(m.mnt, "out", "dev"))) == \
        ["part-00000-00000.jsonl", "part-00001-00000.jsonl"]


def test_progress_reports(mounts, tmp_path):
    data = str(tmp_path / "prog")
    write_config(data, {"schema": "event_id STRING NOT NULL, device STRING, value BIGINT, "
                                  "event_time TIMESTAMP"})
    m = mounts.new(data=data)
    # before the first batch: null, and an empty .jsonl
    assert read(m, "status", "dev.json") == b"null\n"
    assert read(m, "status", "dev.jsonl") == b""
    m.unmount()
    land(data, bundle(str(tmp_path / "a.json"), 0, 3))
    nulls = tmp_path / "b.json"
    nulls.write_text('{"device":"x","value":1}\n')  # event_id is NOT NULL: counted
    land(data, str(nulls))
    run(data)
    land(data, bundle(str(tmp_path / "c.json"), 3, 2))
    run(data)
    m = mounts.remount(m)
    last = json.loads(read(m, "status", "dev.json"))
    assert list(last)[:10] == ["id", "runId", "name", "timestamp", "batchId", "numInputRows",
                               "inputRowsPerSecond", "processedRowsPerSecond", "durationMs",
                               "stateOperators"]
    md = json.loads(read(m, "checkpoint", "dev", "metadata"))
    assert last["id"] == md["id"] and last["name"] == "dev" and last["batchId"] == 1
    assert last["timestamp"].endswith("Z") and last["numInputRows"] == 2
    assert set(last["durationMs"]) >= {"latestOffset", "walCommit", "addBatch",
                                       "commitOffsets", "triggerExecution"}
    src = last["sources"][0]
    assert src["description"] == "FileStreamSource[in/dev]"
    assert src["startOffset"] == {"logOffset": 0} and src["endOffset"] == {"logOffset": 1}
    assert last["sink"] == {"description": "FileSink[out/dev]", "numOutputRows": 2,
                            "guarantee": "exactly-once"}
    assert last["backlog"] == {"files": 0, "bytes": 0}
    lines = read(m, "status", "dev.jsonl").decode().splitlines()
    assert [json.loads(l)["batchId"] for l in lines] == [0, 1]
    first = json.loads(lines[0])
    assert first["sources"][0]["startOffset"] is None
    assert first["numInputRows"] == 4 and first["nullCounts"] == {"event_id": 1}
    assert first["inputRowsPerSecond"] == 0.0


def sources_paths(m, k):
    lines = read(m, "checkpoint", "dev", "sources", "0", str(k)).decode().split("\n")[1:]
    return [json.loads(l)["path"] for l in lines]


def test_latest_first_takes_the_newest(mounts, tmp_path):
    data = str(tmp_path / "lf")
    write_config(data, {"latestFirst": True, "maxFilesPerTrigger": 1})
    for name in ("a", "b", "c"):
        land(data, bundle(str(tmp_path / (name + ".json")), 0, 1))
    assert run(data).stdout.strip() == "dev: 3 batches, 3 rows"
    m = mounts.new(data=data)
    assert [sources_paths(m, k) for k in range(3)] == \
        [["in/dev/c.json"], ["in/dev/b.json"], ["in/dev/a.json"]]


@pytest.mark.allow_stderr(r".")
def test_relanded_seen_path_is_skipped_and_deletable(mounts, data, tmp_path):
    a = bundle(str(tmp_path / "a.json"), 0, 2)
    land(data, a)
    assert run(data).stdout.strip() == "dev: 1 batches, 2 rows"
    m = mounts.new(data=data)
    os.unlink(os.path.join(m.inp("dev"), "a.json"))  # committed: deletable
    m.unmount()
    land(data, a)  # the same path again, e.g. a resend after cleanup
    assert run(data).stdout.strip() == "dev: 0 batches, 0 rows"
    m = mounts.remount(m)
    last = json.loads(read(m, "status", "dev.json"))
    assert last["batchId"] == 0  # no new batch
    os.unlink(os.path.join(m.inp("dev"), "a.json"))  # skipped: deletable too


def test_file_name_only_keys_the_seen_set_by_name(tmp_path):
    data = str(tmp_path / "fno")
    write_config(data, {"fileNameOnly": True})
    x1 = bundle(str(tmp_path / "x.json"), 0, 1)
    land(data, x1, to="dev/date=1")
    land(data, x1, to="dev/date=2")
    assert run(data).stdout.strip() == "dev: 1 batches, 1 rows"


def test_clean_source_delete_and_archive(mounts, tmp_path):
    d1 = str(tmp_path / "del")
    write_config(d1, {"cleanSource": "delete"})
    land(d1, bundle(str(tmp_path / "a.json"), 0, 2), bundle(str(tmp_path / "b.json"), 2, 2))
    run(d1)
    m = mounts.new(data=d1)
    assert os.listdir(m.inp("dev")) == []
    assert len(out_rows(m)) == 4
    assert m.landing()["filesLanded"] == 2  # landed files stay counted
    m.unmount()

    d2 = str(tmp_path / "arc")
    write_config(d2, {"cleanSource": "archive", "maxFileAge": "0"})
    a = bundle(str(tmp_path / "a.json"), 0, 1)
    land(d2, a, to="dev/date=1")
    run(d2)
    m = mounts.new(data=d2)
    assert os.listdir(m.inp("dev", "date=1")) == []
    arch = os.path.join(m.mnt, "archive", "dev", "date=1")
    assert os.listdir(arch) == ["a.json"]
    assert open(os.path.join(arch, "a.json"), "rb").read() == open(a, "rb").read()
    m.unmount()
    # a newer file moves the seen set's purge past a.json (maxFileAge 0)...
    land(d2, bundle(str(tmp_path / "b.json"), 3, 1), to="dev/date=2")
    assert run(d2).stdout.strip() == "dev: 1 batches, 1 rows"
    # ...so the same name lands and runs again: the archived one keeps its
    # name, the newcomer is suffixed
    a2 = bundle(str(tmp_path / "a.json"), 5, 1)
    land(d2, a2, to="dev/date=1")
    assert run(d2).stdout.strip() == "dev: 1 batches, 1 rows"
    m = mounts.remount(m)
    names = sorted(os.listdir(arch))
    assert names[0] == "a.json" and names[1].startswith("a.json~"), names
    # archive/ can be emptied: unlink and rmdir of empty folders
    for n in names:
        os.unlink(os.path.join(arch, n))
    os.rmdir(arch)
    util.expect_errno(30, os.mkdir, os.path.join(m.mnt, "archive", "x"))  # EROFS


def test_clean_source_in_a_mount_forgets_cached_names(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"cleanSource": "delete"})
    m = mounts.new(data=data)
    os.mkdir(m.inp("dev"))
    with open(m.inp("dev", "a.json"), "w") as f:
        f.write('{"event_id":"a"}\n')
    os.stat(m.inp("dev", "a.json"))  # the kernel caches the landed entry
    util.wait_for(lambda: not os.path.exists(m.inp("dev", "a.json")), 10,
                  "the cleaned name to go")
    assert os.listdir(m.inp("dev")) == []


def test_interrupted_clean_is_redone(mounts, tmp_path):
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    data = str(tmp_path / "data")
    write_config(data, {"cleanSource": "delete", "maxFilesPerTrigger": 1})
    land(data, *[bundle(str(tmp_path / ("b%d.json" % i)), i, 1) for i in range(3)])
    env = dict(os.environ, SLUICE_FAULT="engine.during_clean:1")
    p = subprocess.run([util.sluice_bin(), "run", "--available-now", data], env=env,
                       capture_output=True, timeout=60)
    assert p.returncode == 86
    assert run(data).returncode == 0
    m = mounts.new(data=data)
    assert os.listdir(m.inp("dev")) == []
    assert len(out_rows(m)) == 3


def test_checkpoint_keeps_the_last_100_batches(mounts, tmp_path):
    data = str(tmp_path / "ret")
    write_config(data, {"maxFilesPerTrigger": 1})
    files = []
    for i in range(103):
        p = tmp_path / ("f%03d.json" % i)
        p.write_text('{"event_id":"%d"}\n' % i)
        files.append(str(p))
    land(data, *files)
    assert run(data).stdout.strip() == "dev: 103 batches, 103 rows"
    m = mounts.new(data=data)
    ck = os.path.join(m.mnt, "checkpoint", "dev")
    for d in ("offsets", "commits", os.path.join("sources", "0")):
        names = sorted(int(n) for n in os.listdir(os.path.join(ck, d)))
        assert names == list(range(3, 103)), (d, names[:3], names[-3:])
    assert len(read(m, "status", "dev.jsonl").decode().splitlines()) == 100
    assert len(util.list_out(os.path.join(m.mnt, "out", "dev"))) == 103  # out/ keeps all


def test_every_mutation_outside_in_is_erofs(mounts, data, tmp_path):
    """DESIGN §1 / issue 5: out/, checkpoint/, status/ and archive/ refuse
    every mutation with EROFS, whatever the call."""
    land(data, bundle(str(tmp_path / "b.json"), 0, 1))
    run(data)
    m = mounts.new(data=data)
    part = os.path.join(m.mnt, "out", "dev", "part-00000-00000.jsonl")
    commit = os.path.join(m.mnt, "checkpoint", "dev", "commits", "0")
    status = os.path.join(m.mnt, "status", "dev.json")
    for f in (part, commit, status):
        calls = [
            (os.unlink, f), (os.rename, f, f + ".x"), (os.chmod, f, 0o600),
            (os.truncate, f, 0), (os.utime, f, (1, 1)), (os.link, f, f + ".l"),
            (os.symlink, "x", f + ".s"), (os.open, f, os.O_WRONLY | os.O_TRUNC),
            (os.mkdir, f + ".d"), (os.mknod, f + ".n"),
        ]
        for call in calls:
            util.expect_errno(errno.EROFS, *call)
    for d in (os.path.join(m.mnt, "out", "dev"), os.path.join(m.mnt, "checkpoint", "dev"),
              os.path.join(m.mnt, "archive")):
        util.expect_errno(errno.EROFS, os.rmdir, d)
        util.expect_errno(errno.EROFS, os.chmod, d, 0o700)
        util.expect_errno(errno.EROFS, os.rename, d, d + ".x")
    # nothing moves from in/ into them either
    util.expect_errno(errno.EROFS, os.rename, os.path.join(m.mnt, "in", "dev", "b.json"),
                      os.path.join(m.mnt, "out", "dev", "b.json"))
