"""Decoding and the sink, end to end (DESIGN.md §1 "Source", "Decoding",
"Sink"): files are landed with `sluice land`, processed with
`sluice run --available-now`, and their output is read through a mount.

JSON modes (PERMISSIVE, DROPMALFORMED, FAILFAST), CSV (header, RFC 4180
quoting, sep, partition columns from key=value folders), text, TIMESTAMP's
grammar, `.zst` inputs, the CSV sink and partitionBy's Hive escaping."""

import csv
import ctypes
import io
import json
import mmap
import os
import re
import subprocess

import pytest

import util

pytestmark = pytest.mark.timeout(60)


# -- helpers ------------------------------------------------------------------

def write_config(data, queries):
    """queries: {name: (source dict, sink dict or None)}."""
    os.makedirs(data, exist_ok=True)
    doc = {"queries": {}}
    for name, (source, sink) in queries.items():
        q = {"source": source}
        if sink:
            q["sink"] = sink
        doc["queries"][name] = q
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump(doc, f)


def json_source(schema, **extra):
    s = {"format": "json", "path": "dev", "schema": schema}
    s.update(extra)
    return s


def put(tmp_path, name, content):
    """A source file outside the data dir (bytes or str)."""
    p = tmp_path / "src" / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(p)


def land(data, *files, to="dev"):
    p = util.sluice("land", data, *files, "--to", to)
    assert p.returncode == 0, p.stderr
    return p


def run(data, expect=0):
    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.returncode == expect, (p.returncode, p.stdout, p.stderr)
    return p


def run_lines(data, expect=0):
    return sorted(run(data, expect).stdout.splitlines())


def out_files(m, query="dev"):
    """Every file under out/<query>/, relative, sorted."""
    base = os.path.join(m.mnt, "out", query)
    found = []
    for dirpath, _dirs, names in util.walk_out(base):
        for n in names:
            found.append(os.path.relpath(os.path.join(dirpath, n), base))
    return sorted(found)


def by_folder(m, query="dev"):
    """{folder relative to out/<query>: [part names]}."""
    got = {}
    for rel in out_files(m, query):
        got.setdefault(os.path.dirname(rel), []).append(os.path.basename(rel))
    return got


def read_out(m, rel, query="dev"):
    data = util.read_file(os.path.join(m.mnt, "out", query, rel))
    if rel.endswith(".zst"):
        data = subprocess.run(["zstd", "-dc"], input=data, stdout=subprocess.PIPE,
                              check=True, timeout=30).stdout
    return data


def json_rows(m, query="dev", rel=None):
    rows = []
    for f in ([rel] if rel else out_files(m, query)):
        text = read_out(m, f, query).decode("utf-8")
        assert text == "" or text.endswith("\n"), (f, text)
        rows += [json.loads(l) for l in text.splitlines()]
    return rows


def query_status(data, name="dev"):
    p = util.sluice("status", data)
    assert p.returncode == 0, p.stderr
    lines = [l for l in p.stdout.splitlines() if l.startswith(name + " ")]
    assert len(lines) == 1, p.stdout
    return lines[0]


# -- JSON: PERMISSIVE ---------------------------------------------------------

# Each entry: (raw line, row with _corrupt_record, malformed?)
JSON_LINES = [
    (b'{"id":"a","n":1,"ok":true}', {"id": "a", "n": 1, "ok": True}, False),
    # a field that fails to convert is null; the others are kept
    (b'{"id":"b","n":"seven","ok":true}', {"id": "b", "ok": True}, True),
    (b'{"id":"c","n":1.5,"ok":false}', {"id": "c", "ok": False}, True),
    (b'{"id":"d","n":2,"ok":"yes"}', {"id": "d", "n": 2}, True),
    # not a JSON object: every field is null
    (b'[1,2,3]', {}, True),
    (b'not json at all', {}, True),
    (b'{"id":"e","n":3', {}, True),
    (b'"just a string"', {}, True),
    # invalid UTF-8 is not a valid JSON object
    (b'{"id":"f\xff","n":4}', {}, True),
    # fields the schema does not name are syntax-checked only
    (b'{"id":"g","extra":{"deep":[1,{"x":null}]},"n":5}', {"id": "g", "n": 5}, False),
    # duplicate keys: the last wins
    (b'{"id":"h1","n":6,"id":"h2"}', {"id": "h2", "n": 6}, False),
    # JSON null is null, not malformed
    (b'{"id":null,"n":null,"ok":null}', {}, False),
]


def permissive_file(tmp_path):
    body = b""
    for i, (raw, _, _) in enumerate(JSON_LINES):
        body += raw + (b"\r\n" if i % 3 == 0 else b"\n")  # CRLF is accepted
        if i == 4:
            body += b"\n   \n"  # blank lines are skipped
    return put(tmp_path, "mixed.json", body)


def test_json_permissive(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {
        # _corrupt_record holds the raw line of a malformed row
        "withcr": (json_source("id STRING, n BIGINT, ok BOOLEAN, _corrupt_record STRING"), None),
        # without it, a non-object line is a row of nulls
        "plain": (json_source("id STRING, n BIGINT, ok BOOLEAN"), None),
    })
    land(data, permissive_file(tmp_path))
    nbad = sum(1 for _, _, bad in JSON_LINES if bad)
    want_line = "%d batches, %d rows, %d malformed" % (1, len(JSON_LINES), nbad)
    assert run_lines(data) == ["plain: " + want_line, "withcr: " + want_line]

    m = mounts.new(data=data)
    assert out_files(m, "withcr") == ["part-00000-00000.jsonl"]
    got = json_rows(m, "withcr")
    assert len(got) == len(JSON_LINES)
    for (raw, want, bad), row in zip(JSON_LINES, got):
        want = dict(want)
        if bad:
            # the raw line, without its line ending; invalid UTF-8 replaced
            want["_corrupt_record"] = raw.decode("utf-8", "replace")
        assert row == want, raw
    plain = json_rows(m, "plain")
    assert plain == [w for _, w, _ in JSON_LINES]
    assert query_status(data, "plain").startswith("plain batch=0 rows=%d " % len(JSON_LINES))


# -- JSON: DROPMALFORMED ------------------------------------------------------

def test_json_dropmalformed(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": (json_source("id STRING, n BIGINT, ok BOOLEAN",
                                            mode="DROPMALFORMED"), None)})
    land(data, permissive_file(tmp_path))
    # a second file in which every line is bad: no rows, so no part of its own
    land(data, put(tmp_path, "allbad.json", b"nope\n[]\n"))
    p = run(data)
    assert p.stdout.startswith("dev: 1 batches, "), p.stdout
    m = mounts.new(data=data)
    assert out_files(m) == ["part-00000-00000.jsonl"]
    assert json_rows(m) == [w for _, w, bad in JSON_LINES if not bad]


def test_json_dropmalformed_batch_of_only_bad_rows_has_no_part(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": (json_source("id STRING", mode="DROPMALFORMED"), None)})
    land(data, put(tmp_path, "allbad.json", b"nope\n[]\n"))
    run(data)
    m = mounts.new(data=data)
    assert out_files(m) == []  # one part per partition folder, none without rows
    # the batch committed all the same
    assert os.listdir(os.path.join(m.mnt, "checkpoint", "dev", "commits")) == ["0"]
    assert query_status(data).startswith("dev batch=0 ")


# -- JSON: FAILFAST -----------------------------------------------------------

@pytest.mark.allow_stderr(r".")
def test_json_failfast_then_permissive_reruns_the_batch(mounts, tmp_path):
    data = str(tmp_path / "data")
    schema = "id STRING, n BIGINT"
    write_config(data, {"dev": (json_source(schema, mode="FAILFAST"), None)})
    good = put(tmp_path, "a-good.json", b'{"id":"g1","n":1}\n{"id":"g2","n":2}\n')
    # the bad line is physical line 4 (a blank line counts as a line)
    bad = put(tmp_path, "b-bad.json",
              b'{"id":"b1","n":1}\n\n{"id":"b2","n":2}\n{"id":"b3","n":"x"}\n{"id":"b4","n":4}\n')
    land(data, good)
    land(data, bad, to="dev/date=2026-10-04")

    for _ in range(2):  # it stops the same way each time
        p = run(data, expect=1)
        err = util.one_line(p.stderr)
        assert "in/dev/date=2026-10-04/b-bad.json" in err, err
        assert "line 4" in err, err
        assert "dev" in err, err
        st = query_status(data)
        assert st.startswith("dev batch=- rows=0 "), st
        assert "error=-" not in st and "b-bad.json" in st, st

    m = mounts.new(data=data)
    m.allow(r".")
    # nothing of that batch committed: no output, no commits/0
    assert out_files(m) == []
    ck = os.path.join(m.mnt, "checkpoint", "dev")
    assert os.listdir(os.path.join(ck, "offsets")) == ["0"]
    assert not os.path.exists(os.path.join(ck, "commits", "0"))
    m.unmount()

    # the way out: a mode the checkpoint survives; the same batch 0 re-runs
    write_config(data, {"dev": (json_source(schema, mode="PERMISSIVE"), None)})
    assert run_lines(data) == ["dev: 1 batches, 6 rows, 1 malformed"]
    assert query_status(data).endswith(" error=-")
    m = mounts.remount(m)
    assert out_files(m) == ["part-00000-00000.jsonl"]
    ids = [r.get("id") for r in json_rows(m)]
    assert ids == ["g1", "g2", "b1", "b2", "b3", "b4"]
    src = util.read_file(os.path.join(ck, "sources", "0", "0")).decode().split("\n")
    assert sorted(json.loads(l)["path"] for l in src[1:]) == \
        ["in/dev/a-good.json", "in/dev/date=2026-10-04/b-bad.json"]
    assert sorted(os.listdir(os.path.join(ck, "commits"))) == ["0"]


# -- CSV ----------------------------------------------------------------------

def csv_source(schema, **extra):
    s = {"format": "csv", "path": "dev", "schema": schema}
    s.update(extra)
    return s


def test_csv_header_and_quoting(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": (csv_source("id BIGINT, name STRING, note STRING",
                                           header=True), None)})
    body = (b'id,name,note\r\n'
            b'1,"Smith, John",plain\r\n'
            b'2,"say ""hi""","a,b,""c"""\n'
            b'3,"",unquoted "inner" quotes\n'
            b'4,,"x"\n'
            b'\n'
            b'5,caf\xc3\xa9,"  spaced  "\n')
    land(data, put(tmp_path, "people.csv", body))
    assert run_lines(data) == ["dev: 1 batches, 5 rows"]
    m = mounts.new(data=data)
    rows = json_rows(m)
    assert rows[0] == {"id": 1, "name": "Smith, John", "note": "plain"}
    assert rows[1] == {"id": 2, "name": 'say "hi"', "note": 'a,b,"c"'}
    assert rows[2]["id"] == 3 and rows[2]["name"] == ""  # a quoted empty string
    assert rows[3] == {"id": 4, "note": "x"}             # an empty field is null
    assert rows[4] == {"id": 5, "name": "caf\u00e9", "note": "  spaced  "}
    assert len(rows) == 5


def test_csv_without_header_custom_sep_and_malformed(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {
        "semi": (csv_source("a STRING, b BIGINT, c STRING", sep=";"), None),
        "tabs": (dict(csv_source("a STRING, b BIGINT, c STRING", sep="\\t"),
                      path="tabs"), None),
    })
    land(data, put(tmp_path, "s.csv",
                   b'x,y;1;"semi;colon"\n'
                   b'z;not-a-number;w\n'
                   b'only;2\n'))
    land(data, put(tmp_path, "t.tsv", b'a,b;c\t7\t"tab\there"\n'), to="tabs")
    lines = run_lines(data)
    assert lines == ["semi: 1 batches, 3 rows, 2 malformed", "tabs: 1 batches, 1 rows"]
    m = mounts.new(data=data)
    rows = json_rows(m, "semi")
    assert rows[0] == {"a": "x,y", "b": 1, "c": "semi;colon"}  # ',' is no separator here
    assert rows[1] == {"a": "z", "c": "w"}                      # b failed to convert
    assert rows[2]["a"] == "only" and "c" not in rows[2]       # too few fields: malformed
    assert json_rows(m, "tabs") == [{"a": "a,b;c", "b": 7, "c": "tab\there"}]


def test_csv_partition_column_from_folder(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": (csv_source("id BIGINT, name STRING, date DATE",
                                           header=True), None)})
    land(data, put(tmp_path, "d1.csv", b"id,name\n1,one\n2,two\n"), to="dev/date=2026-10-04")
    land(data, put(tmp_path, "d2.csv", b"id,name\n3,three\n"), to="dev/date=2026-10-05")
    land(data, put(tmp_path, "top.csv", b"id,name\n4,four\n"), to="dev")
    assert run_lines(data) == ["dev: 1 batches, 4 rows"]
    m = mounts.new(data=data)
    rows = sorted(json_rows(m), key=lambda r: r["id"])
    assert rows == [
        {"id": 1, "name": "one", "date": "2026-10-04"},
        {"id": 2, "name": "two", "date": "2026-10-04"},
        {"id": 3, "name": "three", "date": "2026-10-05"},
        {"id": 4, "name": "four"},  # no date= folder: null
    ]


def test_json_partition_columns_at_any_depth(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": (json_source("id STRING, region STRING, day BIGINT"), None)})
    land(data, put(tmp_path, "x.json", b'{"id":"x"}\n'), to="dev/region=eu/day=4")
    # a value in the file for a partition column is overridden by the folder
    land(data, put(tmp_path, "y.json", b'{"id":"y","region":"file"}\n'), to="dev/region=us")
    run(data)
    m = mounts.new(data=data)
    assert sorted(json_rows(m), key=lambda r: r["id"]) == [
        {"id": "x", "region": "eu", "day": 4}, {"id": "y", "region": "us"}]


# -- text ---------------------------------------------------------------------

def test_text_value_column(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": ({"format": "text", "path": "dev"}, None)})
    body = (b'first line\r\n'
            b'{"looks":"like json"}\n'
            b'  spaces and "quotes", commas\n'
            b'caf\xc3\xa9 \xe2\x82\xac\n'
            b'no newline at the end')
    land(data, put(tmp_path, "log.txt", body))
    assert run_lines(data) == ["dev: 1 batches, 5 rows"]
    m = mounts.new(data=data)
    assert json_rows(m) == [{"value": v} for v in [
        "first line", '{"looks":"like json"}', '  spaces and "quotes", commas',
        "caf\u00e9 \u20ac", "no newline at the end"]]


# -- TIMESTAMP ----------------------------------------------------------------

TIMESTAMPS = [
    ('"2026-10-04T12:00:00Z"', "2026-10-04T12:00:00.000Z"),
    ('"2026-10-04 12:00"', "2026-10-04T12:00:00.000Z"),          # no seconds, no zone: UTC
    ('"2026-10-04T12:00:07"', "2026-10-04T12:00:07.000Z"),
    ('"2026-10-04T14:30:15.123456+02:00"', "2026-10-04T12:30:15.123Z"),
    ('"2026-10-04T12:00:00-0130"', "2026-10-04T13:30:00.000Z"),
    ('"2026-10-04T00:30:00+01:00"', "2026-10-03T23:30:00.000Z"),  # crosses midnight
    ('"2026-10-04T12:00:00.5Z"', "2026-10-04T12:00:00.500Z"),
    ('"2026-10-04T12:00:00.9999Z"', "2026-10-04T12:00:00.999Z"),  # truncated, not rounded
    ('"2024-02-29T23:59:59.001-00:00"', "2024-02-29T23:59:59.001Z"),
    ('"1969-12-31T23:59:59.5Z"', "1969-12-31T23:59:59.500Z"),     # before the epoch
    ("1791115200", "2026-10-04T12:00:00.000Z"),                  # epoch seconds
    ("0", "1970-01-01T00:00:00.000Z"),
    ("-1", "1969-12-31T23:59:59.000Z"),
]

BAD_TIMESTAMPS = ['"2026-10-04T25:00:00Z"', '"2026-02-30T12:00:00Z"', '"yesterday"',
                  '"2026/10/04 12:00"', "true", "{}"]


def test_timestamps_written_as_utc_millis(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": (json_source("i BIGINT, t TIMESTAMP"), None)})
    lines = ['{"i":%d,"t":%s}' % (i, v) for i, (v, _) in enumerate(TIMESTAMPS)]
    base = len(TIMESTAMPS)
    lines += ['{"i":%d,"t":%s}' % (base + i, v) for i, v in enumerate(BAD_TIMESTAMPS)]
    land(data, put(tmp_path, "ts.json", "\n".join(lines) + "\n"))
    assert run_lines(data) == ["dev: 1 batches, %d rows, %d malformed"
                               % (len(lines), len(BAD_TIMESTAMPS))]
    m = mounts.new(data=data)
    rows = json_rows(m)
    got = {r["i"]: r.get("t") for r in rows}
    for i, (v, want) in enumerate(TIMESTAMPS):
        assert got[i] == want, v
    for i, v in enumerate(BAD_TIMESTAMPS):
        assert got[base + i] is None, v  # PERMISSIVE: the field is null


def test_timestamps_in_csv_source_and_sink(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": (csv_source("t TIMESTAMP, n BIGINT"), {"format": "csv"})})
    land(data, put(tmp_path, "t.csv",
                   b'2026-10-04 14:00:00+02:00,1\n"2026-10-04T12:00:00.25Z",2\n'))
    run(data)
    m = mounts.new(data=data)
    assert read_out(m, "part-00000-00000.csv") == \
        b"t,n\n2026-10-04T12:00:00.000Z,1\n2026-10-04T12:00:00.250Z,2\n"


# -- .zst inputs --------------------------------------------------------------

def zstd_file(path, *chunks):
    """One zstd frame per chunk, concatenated (a valid .zst stream)."""
    with open(path, "wb") as f:
        for c in chunks:
            f.write(subprocess.run(["zstd", "-q", "-c"], input=c, stdout=subprocess.PIPE,
                                   check=True, timeout=30).stdout)
    return path


def test_zst_inputs_json_and_csv(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {
        "j": (json_source("id STRING, n BIGINT"), None),
        "c": (dict(csv_source("id STRING, n BIGINT", header=True), path="c"), None),
    })
    os.makedirs(tmp_path / "src", exist_ok=True)
    big = b"".join(b'{"id":"r%05d","n":%d}\n' % (i, i) for i in range(20000))
    land(data, zstd_file(str(tmp_path / "src" / "big.json.zst"), big[:100000], big[100000:]))
    land(data, zstd_file(str(tmp_path / "src" / "t.csv.zst"), b'id,n\n"a,b",1\nc,2\n'), to="c")
    assert run_lines(data) == ["c: 1 batches, 2 rows", "j: 1 batches, 20000 rows"]
    m = mounts.new(data=data)
    rows = json_rows(m, "j")
    assert len(rows) == 20000
    assert rows[0] == {"id": "r00000", "n": 0} and rows[-1] == {"id": "r19999", "n": 19999}
    assert json_rows(m, "c") == [{"id": "a,b", "n": 1}, {"id": "c", "n": 2}]


# -- CSV sink -----------------------------------------------------------------

def test_csv_sink_header_and_quoting(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": (json_source("id BIGINT, name STRING, ok BOOLEAN, t TIMESTAMP"),
                                {"format": "csv"})})
    src_rows = [
        {"id": 1, "name": "plain", "ok": True, "t": "2026-10-04T12:00:00Z"},
        {"id": 2, "name": "Smith, John", "ok": False},
        {"id": 3, "name": 'say "hi"'},
        {"id": 4, "name": "two\nlines"},
        {"id": 5},
        {"id": 6, "name": " padded "},
        {"id": 7, "name": "caf\u00e9"},
    ]
    land(data, put(tmp_path, "r.json", "".join(json.dumps(r) + "\n" for r in src_rows)))
    assert run_lines(data) == ["dev: 1 batches, 7 rows"]
    m = mounts.new(data=data)
    assert out_files(m) == ["part-00000-00000.csv"]
    raw = read_out(m, "part-00000-00000.csv").decode("utf-8")
    assert raw.startswith("id,name,ok,t\n")
    assert '"Smith, John"' in raw and '"say ""hi"""' in raw and '"two\nlines"' in raw
    assert "\n5,,,\n" in raw  # nulls are empty fields
    got = list(csv.reader(io.StringIO(raw, newline="")))
    assert got[0] == ["id", "name", "ok", "t"]
    assert got[1:] == [
        ["1", "plain", "true", "2026-10-04T12:00:00.000Z"],
        ["2", "Smith, John", "false", ""],
        ["3", 'say "hi"', "", ""],
        ["4", "two\nlines", "", ""],
        ["5", "", "", ""],
        ["6", " padded ", "", ""],
        ["7", "caf\u00e9", "", ""],
    ]


def test_csv_sink_zstd_one_part_per_batch(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": (json_source("id BIGINT", maxFilesPerTrigger=1),
                                {"format": "csv", "compression": "zstd"})})
    land(data, put(tmp_path, "a.json", b'{"id":1}\n'), put(tmp_path, "b.json", b'{"id":2}\n'))
    assert run_lines(data) == ["dev: 2 batches, 2 rows"]
    m = mounts.new(data=data)
    assert out_files(m) == ["part-00000-00000.csv.zst", "part-00001-00000.csv.zst"]
    assert read_out(m, "part-00001-00000.csv.zst") == b"id\n2\n"  # each part has its header


# -- partitionBy --------------------------------------------------------------

def test_partition_by_hive_escaping(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": (json_source("id BIGINT, k STRING, v STRING"),
                                {"format": "json", "partitionBy": ["k"]})})
    src_rows = [
        {"id": 1, "k": "plain", "v": "a"},
        {"id": 2, "k": "with space", "v": "b"},
        {"id": 3, "k": "a/b", "v": "c"},
        {"id": 4, "v": "d"},                       # null
        {"id": 5, "k": "plain", "v": "e"},
        {"id": 6, "k": "x=y:z%", "v": "f"},
        {"id": 7, "k": "", "v": "g"},              # empty: also the default partition
        {"id": 8, "k": "caf\u00e9", "v": "h"},
    ]
    land(data, put(tmp_path, "r.json", "".join(json.dumps(r) + "\n" for r in src_rows)))
    assert run_lines(data) == ["dev: 1 batches, 8 rows"]
    m = mounts.new(data=data)
    parts = by_folder(m)
    assert sorted(parts) == sorted([
        "k=plain", "k=with space", "k=a%2Fb", "k=__HIVE_DEFAULT_PARTITION__",
        "k=x%3Dy%3Az%25", "k=caf\u00e9"])
    # one part per partition folder per batch, each with its own part number
    assert all(len(v) == 1 for v in parts.values()), parts
    names = [v[0] for v in parts.values()]
    assert all(re.fullmatch(r"part-00000-\d{5}\.jsonl", n) for n in names), names
    assert len(set(names)) == len(names), names

    def rows_in(folder):
        return json_rows(m, rel=folder + "/" + parts[folder][0])
    # the partition column leaves the rows; rows keep their order
    assert rows_in("k=plain") == [{"id": 1, "v": "a"}, {"id": 5, "v": "e"}]
    assert rows_in("k=a%2Fb") == [{"id": 3, "v": "c"}]
    assert rows_in("k=with space") == [{"id": 2, "v": "b"}]
    assert rows_in("k=x%3Dy%3Az%25") == [{"id": 6, "v": "f"}]
    assert rows_in("k=__HIVE_DEFAULT_PARTITION__") == [{"id": 4, "v": "d"}, {"id": 7, "v": "g"}]
    # the folders are listed as folders through the mount
    assert os.path.isdir(os.path.join(m.mnt, "out", "dev", "k=a%2Fb"))


def test_partition_by_two_columns_across_batches(mounts, tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": (json_source("id BIGINT, day DATE, n BIGINT",
                                            maxFilesPerTrigger=1),
                                {"format": "csv", "partitionBy": ["day", "n"]})})
    land(data, put(tmp_path, "a.json",
                   b'{"id":1,"day":"2026-10-04","n":1}\n{"id":2,"day":"2026-10-04"}\n'))
    land(data, put(tmp_path, "b.json", b'{"id":3,"day":"2026-10-04","n":1}\n'))
    assert run_lines(data) == ["dev: 2 batches, 3 rows"]
    m = mounts.new(data=data)
    parts = by_folder(m)
    assert sorted(parts) == ["day=2026-10-04/n=1", "day=2026-10-04/n=__HIVE_DEFAULT_PARTITION__"]
    a = parts["day=2026-10-04/n=1"]
    assert len(a) == 2 and a[0].startswith("part-00000-") and a[1] == "part-00001-00000.csv"
    assert len(parts["day=2026-10-04/n=__HIVE_DEFAULT_PARTITION__"]) == 1
    assert read_out(m, "day=2026-10-04/n=1/part-00001-00000.csv") == b"id\n3\n"


def test_partition_values_read_back_unescaped(mounts, tmp_path):
    """What partitionBy writes reads back: Hive-escaped folder values are
    unescaped, __HIVE_DEFAULT_PARTITION__ and a value that does not convert are null."""
    data = str(tmp_path / "data")
    write_config(data, {"dev": (json_source("id STRING, k STRING, n BIGINT"), None)})
    land(data, put(tmp_path, "1.json", b'{"id":"1"}\n'), to="dev/k=a%2Fb/n=7")
    land(data, put(tmp_path, "2.json", b'{"id":"2"}\n'), to="dev/k=__HIVE_DEFAULT_PARTITION__")
    land(data, put(tmp_path, "3.json", b'{"id":"3"}\n'), to="dev/n=abc")
    land(data, put(tmp_path, "4.json", b'{"id":"4"}\n'), to="dev/k=x%3Dy%3Az/n=-2")
    # a byte-order mark at the start of a file is not part of the first line
    land(data, put(tmp_path, "5.json", b'\xef\xbb\xbf{"id":"5"}\n'), to="dev/k=with space")
    assert run_lines(data) == ["dev: 1 batches, 5 rows"]
    m = mounts.new(data=data)
    assert sorted(json_rows(m), key=lambda r: r["id"]) == [
        {"id": "1", "k": "a/b", "n": 7}, {"id": "2"}, {"id": "3"},
        {"id": "4", "k": "x=y:z", "n": -2}, {"id": "5", "k": "with space"}]


# -- a .zst input that does not decompress -------------------------------------

def corrupt_zst_run(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": (json_source("id STRING"), None)})
    land(data, put(tmp_path, "good.json", b'{"id":"g"}\n'))
    land(data, put(tmp_path, "bad.json.zst", b"this is not a zstd frame\n"))
    p = run(data, expect=1)
    return data, util.one_line(p.stderr)


@pytest.mark.allow_stderr(r".")
def test_corrupt_zst_input_stops_the_query(mounts, tmp_path):
    data, err = corrupt_zst_run(tmp_path)
    assert "in/dev/bad.json.zst" in err and "dev" in err, err
    st = query_status(data)
    assert st.startswith("dev batch=- ") and "bad.json.zst" in st, st
    m = mounts.new(data=data)
    m.allow(r"bad\.json\.zst")
    assert out_files(m) == []
    assert not os.path.exists(os.path.join(m.mnt, "checkpoint", "dev", "commits", "0"))


def test_corrupt_zst_error_blames_the_file_not_the_catalog(tmp_path):
    _, err = corrupt_zst_run(tmp_path)
    assert "catalog" not in err, err


def test_partition_by_typed_values(mounts, tmp_path):
    """Values print as Spark casts them to strings: TIMESTAMP `2026-10-04 12:00:00`
    (fraction only when non-zero), Java doubles, true/false; then escaped."""
    data = str(tmp_path / "data")
    write_config(data, {"dev": (json_source("id STRING, t TIMESTAMP, d DOUBLE, b BOOLEAN"),
                                {"format": "json", "partitionBy": ["t", "d", "b"]})})
    land(data, put(tmp_path, "p.json",
                   b'{"id":"1","t":"2026-10-04T14:00:00.5+02:00","d":0.5,"b":true}\n'
                   b'{"id":"2","t":"2026-10-04T12:00:00Z","d":1e10,"b":false}\n'))
    run(data)
    m = mounts.new(data=data)
    parts = by_folder(m)
    assert sorted(parts) == ["t=2026-10-04 12%3A00%3A00.5/d=0.5/b=true",
                             "t=2026-10-04 12%3A00%3A00/d=1.0E10/b=false"]
    assert json_rows(m, rel="t=2026-10-04 12%3A00%3A00/d=1.0E10/b=false/"
                     + parts["t=2026-10-04 12%3A00%3A00/d=1.0E10/b=false"][0]) == [{"id": "2"}]


@pytest.mark.parametrize("partition_by,what", [
    (["zz"], "partitionBy[0]"),
    (["id", "n"], "partitionBy"),
    (["n", "n"], "partitionBy[1]"),
    ("n", "partitionBy"),
])
def test_partition_by_refused_at_load(tmp_path, partition_by, what):
    data = str(tmp_path / "data")
    write_config(data, {"dev": (json_source("id STRING, n BIGINT"),
                                {"format": "json", "partitionBy": partition_by})})
    p = util.sluice("run", "--available-now", data)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert "queries.dev.sink." + what in util.one_line(p.stderr)


@pytest.mark.allow_stderr(r".")
def test_csv_failfast_line_counts_header_and_blank_lines(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"dev": (csv_source("id STRING, n BIGINT", header=True,
                                           mode="FAILFAST"), None)})
    land(data, put(tmp_path, "c.csv", b"id,n\r\na,1\r\n\r\nb,x\r\nc,3\r\n"))
    p = run(data, expect=1)
    err = util.one_line(p.stderr)
    assert "in/dev/c.csv" in err and "line 4" in err, err


# -- big files: decoded in two halves on two threads ----------------------------

def big_json(n, bad=()):
    """n JSON lines of ~100 bytes (over 16 MiB for n >= 170,000); the lines
    whose 1-based numbers are in bad are broken."""
    out = []
    for i in range(1, n + 1):
        if i in bad:
            out.append('{"id": %d, "pad": "%s"' % (i, "x" * 70))  # unterminated
        else:
            out.append('{"id": %d, "pad": "%s"}' % (i, "x" * 70))
    return "\n".join(out) + "\n"


def check_big_json_out(m, n, bad):
    """out/dev's one part holds big_json(n, bad)'s rows in order, the bad
    lines as _corrupt_record rows where they were."""
    ids, corrupt = [], []
    with open(os.path.join(m.mnt, "out", "dev", "part-00000-00000.jsonl")) as f:
        for i, line in enumerate(f, 1):
            r = json.loads(line)
            if "_corrupt_record" in r:
                corrupt.append(i)
            else:
                ids.append(r["id"])
    assert corrupt == sorted(bad)
    assert ids == [i for i in range(1, n + 1) if i not in bad]


def test_big_file_failfast_names_the_line_in_its_second_half(tmp_path):
    data = str(tmp_path / "data")
    n = 200000
    write_config(data, {"dev": (json_source("id BIGINT, pad STRING", mode="FAILFAST"), None)})
    land(data, put(tmp_path, "big.json", big_json(n, bad={n - 5})))
    assert os.path.getsize(str(tmp_path / "src" / "big.json")) > 16 << 20
    p = run(data, expect=1)
    assert "'in/dev/big.json' line %d:" % (n - 5) in p.stderr, p.stderr


def test_big_file_rows_in_order_and_counted(mounts, tmp_path):
    data = str(tmp_path / "data")
    n = 200000
    bad = {3, n // 2 + 7, n - 1}
    write_config(data, {"dev": (json_source("id BIGINT, pad STRING, _corrupt_record STRING"),
                                None)})
    land(data, put(tmp_path, "big.json", big_json(n, bad=bad)))
    assert run(data).stdout == "dev: 1 batches, %d rows, 3 malformed\n" % n
    m = mounts.new(data=data)
    check_big_json_out(m, n, bad)
    st = json.loads(open(os.path.join(m.mnt, "status", "dev.json")).read())
    assert st["numInputRows"] == n and st["numMalformedRows"] == 3


@pytest.mark.parametrize("mode", ["PERMISSIVE", "DROPMALFORMED"])
def test_aggregation_reads_only_its_columns(mounts, tmp_path, mode):
    """An aggregating query over a wide schema (a big file: both decoding
    threads, their batches joined) keeps only the columns it reads; the
    unused ones change nothing: a STRING holding anything is skipped, a
    BIGINT holding a string still makes its line malformed, and the groups
    are those of the whole rows."""
    n = 200000
    pad = "x" * 60
    lines, groups, malformed = [], {}, 0
    for i in range(n):
        g = "g%d" % (i % 7)
        extra = '"u\\u00e9%d \\ud83d\\ude00"' % i if i % 3 else '{"deep":[%d,{"k":"%s"}]}' % (i, pad)
        bad = i % 10007 == 5
        other = '"oops"' if bad else str(i)
        lines.append('{"pad":"%s","extra":%s,"g":"%s","other":%s,"v":%d}' % (pad, extra, g, other, i))
        malformed += bad
        if bad and mode == "DROPMALFORMED":
            continue
        n0, s0 = groups.get(g, (0, 0))
        groups[g] = (n0 + 1, s0 + i)
    data = str(tmp_path / "data")
    os.makedirs(data)
    schema = "pad STRING, extra STRING, g STRING, other BIGINT, v BIGINT, _corrupt_record STRING"
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump({"queries": {"dev": {"source": json_source(schema, mode=mode),
                                       "groupBy": {"columns": ["g"]},
                                       "aggregate": {"n": "count(*)", "s": "sum(v)"},
                                       "outputMode": "complete"}}}, f)
    land(data, put(tmp_path, "wide.json", "\n".join(lines) + "\n"))
    assert os.path.getsize(str(tmp_path / "src" / "wide.json")) > 16 << 20
    p = run(data)
    assert p.stdout == "dev: 1 batches, %d rows, %d malformed\n" % (n, malformed), p.stdout
    got = {r["g"]: (r["n"], r["s"]) for r in json_rows(mounts.new(data=data))}
    assert got == groups


# a test build's knob: a mapped input is decoded (and its pages dropped)
# 4 KiB at a time instead of 8 MiB, so that the pieces have thousands of cuts
PLAIN_PIECES = {"SLUICE_FAULT_SIZE": "decode.piece:4096"}
# and the rows the second thread decodes go into the batch past room left for
# the first half's: as estimated, or too little room for one half (the file
# is then decoded again, the second half appended)
ROOMS = {
    "rooms-estimated": "",
    "first-half-outgrows": ",decode.side_first:1000",
    "second-half-outgrows": ",decode.side_second:1000",
}


@pytest.mark.parametrize("rooms", sorted(ROOMS))
def test_big_file_in_pieces_rows_in_order_and_counted(mounts, tmp_path, rooms):
    """A big plain file is decoded a piece at a time per thread, each piece's
    pages given back: the rows, their order and the counts are the whole
    file's, however small the pieces, and whether or not a half outgrew the
    rows left for it."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    n = 200000
    bad = {1, 3, 40000, n // 2 + 7, n - 1, n}
    data = str(tmp_path / "data")
    write_config(data, {"dev": (json_source("id BIGINT, pad STRING, _corrupt_record STRING"),
                                None)})
    land(data, put(tmp_path, "big.json", big_json(n, bad=bad)))
    p = run_env(data, {"SLUICE_FAULT_SIZE": PLAIN_PIECES["SLUICE_FAULT_SIZE"] + ROOMS[rooms]})
    assert p.stdout == "dev: 1 batches, %d rows, %d malformed\n" % (n, len(bad)), p.stdout
    check_big_json_out(mounts.new(data=data), n, bad)


@pytest.mark.parametrize("rooms", sorted(ROOMS))
@pytest.mark.parametrize("line", [3, 100000, 199990])
def test_big_file_in_pieces_failfast_names_the_line(tmp_path, line, rooms):
    """FAILFAST names the line in the whole file wherever the piece it is in
    (also when a half outgrew its rows and the file was decoded again)."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    n = 200000
    data = str(tmp_path / "data")
    write_config(data, {"dev": (json_source("id BIGINT, pad STRING", mode="FAILFAST"), None)})
    land(data, put(tmp_path, "big.json", big_json(n, bad={line})))
    p = run_env(data, {"SLUICE_FAULT_SIZE": PLAIN_PIECES["SLUICE_FAULT_SIZE"] + ROOMS[rooms]},
                expect=1)
    assert "'in/dev/big.json' line %d:" % line in p.stderr, p.stderr


def resident_bytes(path):
    """Bytes of path's pages in the page cache (mincore(2) of a mapping)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    with open(path, "rb") as f:
        n = os.fstat(f.fileno()).st_size
        m = mmap.mmap(f.fileno(), n, flags=mmap.MAP_PRIVATE,
                      prot=mmap.PROT_READ | mmap.PROT_WRITE)
        try:
            pages = (n + mmap.PAGESIZE - 1) // mmap.PAGESIZE
            vec = (ctypes.c_ubyte * pages)()
            addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
            assert libc.mincore(addr, n, vec) == 0, os.strerror(ctypes.get_errno())
            del addr
            return sum(v & 1 for v in vec) * mmap.PAGESIZE
        finally:
            m.close()


def landed_blob(data, size):
    """The blob file of data's one landed file of size bytes."""
    found = [os.path.join(d, n) for d, _, names in os.walk(os.path.join(data, "blobs"))
             for n in names if os.path.getsize(os.path.join(d, n)) == size]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("name,cached", [("big.json", False), ("big.json", True),
                                         ("big.json.zst", False), ("big.json.zst", True)])
def test_big_file_read_cold_leaves_the_page_cache(mounts, tmp_path, name, cached):
    """A big file that was out of the page cache when its batch began is read
    once: its pages leave the cache as it is decoded (both halves of a plain
    file; a .zst once decompressed), and its rows are all there. One that was
    cached stays cached for the next reader."""
    n = 200000
    data = str(tmp_path / "data")
    write_config(data, {"dev": (json_source("id BIGINT, pad STRING"), None)})
    text = big_json(n).encode()
    if name.endswith(".zst"):
        # random pads, so that the compressed file is big too (~10 MB)
        text = "".join('{"id": %d, "pad": "%s"}\n' % (i, os.urandom(35).hex())
                       for i in range(1, n + 1)).encode()
        text = subprocess.run(["zstd", "-q", "-c"], input=text, stdout=subprocess.PIPE,
                              check=True).stdout
        assert len(text) > 8 << 20
    src = put(tmp_path, name, text)
    size = os.path.getsize(src)
    land(data, src)
    blob = landed_blob(data, size)
    with open(blob, "rb") as f:
        if cached:
            while f.read(1 << 20):
                pass
        else:
            os.fsync(f.fileno())
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    whole = -(-size // mmap.PAGESIZE) * mmap.PAGESIZE
    before = resident_bytes(blob)
    if cached:
        assert before == whole
    elif before > size // 10:
        pytest.skip("this file system keeps the file in memory (%d of %d bytes)" % (before, size))
    assert run(data).stdout == "dev: 1 batches, %d rows\n" % n
    after = resident_bytes(blob)
    assert after == (whole if cached else 0), (after, size)
    check_big_json_out(mounts.new(data=data), n, ())


def test_big_file_pieces_never_start_at_a_bom(tmp_path):
    """A line that starts with a byte-order mark in the middle of a file is
    malformed, however the file is cut into pieces."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    n = 200000
    lines = ['{"id": %d, "pad": "%s"}' % (i, "x" * 70) for i in range(1, n + 1)]
    boms = set(range(5, n + 1, 7))
    for i in boms:
        lines[i - 1] = "\ufeff" + lines[i - 1]
    for k, env in enumerate(({}, PLAIN_PIECES)):
        data = str(tmp_path / ("data%d" % k))
        write_config(data, {"dev": (json_source("id BIGINT, pad STRING", mode="DROPMALFORMED"),
                                    None)})
        land(data, put(tmp_path, "big%d.json" % k, "\n".join(lines) + "\n"))
        p = run_env(data, env)
        assert p.stdout == "dev: 1 batches, %d rows, %d malformed\n" % (n, len(boms)), p.stdout


@pytest.mark.parametrize("sink_format", ["json", "csv"])
def test_big_output_streamed_in_slices(mounts, tmp_path, sink_format):
    """An output of 100,000 rows is formatted and written 32,768 rows at a
    time: one part, rows in order, a CSV header once; compressed, one zstd
    frame. A compressed part that ends up under 64 KiB is kept inline (no
    blob) as a small one always was."""
    n = 100000
    rows = "".join('{"id": %d, "pad": "%s"}\n' % (i, "x" * 70) for i in range(n))
    same = '{"id": 7, "pad": "same"}\n' * n
    for name, text, comp in (("plain", rows, "none"), ("zst", rows, "zstd"),
                             ("small", same, "zstd")):
        data = str(tmp_path / name)
        write_config(data, {"dev": (json_source("id BIGINT, pad STRING"),
                                    {"format": sink_format, "compression": comp})})
        land(data, put(tmp_path, name + ".json", text))
        assert run(data).stdout == "dev: 1 batches, %d rows\n" % n
        m = mounts.new(data=data)
        ext = ".jsonl" if sink_format == "json" else ".csv"
        part = "part-00000-00000" + ext + (".zst" if comp == "zstd" else "")
        assert out_files(m) == [part]
        body = read_out(m, part).decode()
        if sink_format == "csv":
            assert body.startswith("id,pad\n") and body.count("id,pad") == 1
            got = [tuple(r) for r in csv.reader(io.StringIO(body))][1:]
            got = [(int(i), p) for i, p in got]
        else:
            got = [(r["id"], r["pad"]) for r in map(json.loads, body.splitlines())]
        if name == "small":
            assert got == [(7, "same")] * n
        else:
            assert got == [(i, "x" * 70) for i in range(n)]
        if comp == "zstd":
            copy = tmp_path / (name + ".part.zst")
            copy.write_bytes(util.read_file(os.path.join(m.mnt, "out", "dev", part)))
            listing = subprocess.run(["zstd", "-lv", str(copy)], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, timeout=30).stdout.decode()
            assert "Zstandard Frames: 1\n" in listing and "Check: XXH64" in listing, listing
        part_size = os.stat(os.path.join(m.mnt, "out", "dev", part)).st_size
        assert (part_size > 65536) == (name != "small")
        m.unmount()
        # the input is a blob; the output one only when over 64 KiB
        size = os.path.getsize(str(tmp_path / "src" / (name + ".json")))
        want = (size > 65536) + (part_size > 65536)
        assert util.count_files(os.path.join(data, "blobs")) == want
        p = util.sluice("check", data)
        assert p.returncode == 0, p.stdout + p.stderr


def zstd_sized(path, text):
    """text compressed into path by the zstd CLI from a file: unlike
    zstd_file's frames (from a pipe), its frame records the content size."""
    plain = path[:-len(".zst")]
    with open(plain, "w") as f:
        f.write(text)
    subprocess.run(["zstd", "-q", "-f", plain, "-o", path], check=True, timeout=60)
    return path


# a test build's knob: decompress 4 KiB of input at a time and decode every
# piece that arrived, so that the pieces have hundreds of boundaries
SMALL_PIECES = {"SLUICE_FAULT_SIZE": "zst.feed:4096,zst.piece:4096"}


def run_env(data, env, expect=0):
    p = util.sluice("run", "--available-now", data, timeout=60, env=dict(os.environ, **env))
    assert p.returncode == expect, (p.returncode, p.stdout, p.stderr)
    return p


@pytest.mark.parametrize("how", ["sized", "pieces", "pipe", "two-frames"])
def test_big_zst_decoded_while_decompressed(mounts, tmp_path, how):
    """A .zst whose frames say how big it is (16 MiB+) is decompressed on one
    thread while the other decodes what has arrived; the rows, their order
    and the counts are those of the plain file, also cut in hundreds of
    pieces. Without sizes (a pipe) it is decompressed whole first; two
    concatenated frames are summed."""
    if how == "pieces" and not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    n = 300000
    bad = {2, 50000, n // 2 + 3, n - 2}
    text = big_json(n, bad=bad)
    data = str(tmp_path / "data")
    write_config(data, {"dev": (json_source("id BIGINT, pad STRING, _corrupt_record STRING"),
                                None)})
    src = tmp_path / "src"
    src.mkdir()
    if how == "two-frames":
        cut = text.index("\n", len(text) // 3) + 1
        a = zstd_sized(str(src / "a.json.zst"), text[:cut])
        b = zstd_sized(str(src / "b.json.zst"), text[cut:])
        path = str(src / "big.json.zst")
        with open(path, "wb") as f:
            f.write(open(a, "rb").read() + open(b, "rb").read())
    elif how == "pipe":
        path = zstd_file(str(src / "big.json.zst"), text.encode())
    else:
        path = zstd_sized(str(src / "big.json.zst"), text)
    land(data, path)
    p = run_env(data, SMALL_PIECES if how == "pieces" else {})
    assert p.stdout == "dev: 1 batches, %d rows, %d malformed\n" % (n, len(bad))
    check_big_json_out(mounts.new(data=data), n, bad)


@pytest.mark.parametrize("pieces", [False, True])
@pytest.mark.parametrize("line", [3, 100000, 299990])
def test_big_zst_failfast_names_the_line(tmp_path, line, pieces):
    """FAILFAST in a big .zst names the line in the whole file, whether it
    is in an early piece, in the middle or in the second thread's tail."""
    if pieces and not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    p = run_zst(tmp_path, "data", "FAILFAST", big_json(300000, bad={line}),
                SMALL_PIECES if pieces else {}, expect=1)
    assert "'in/dev/big.json.zst' line %d:" % line in p.stderr, p.stderr


def run_zst(tmp_path, name, mode, text, env, expect=0):
    """text as one sized big.json.zst landed in a new data dir tmp_path/name
    (query dev, schema id BIGINT, pad STRING, mode unless None), run once
    with env."""
    data = str(tmp_path / name)
    extra = {"mode": mode} if mode else {}
    write_config(data, {"dev": (json_source("id BIGINT, pad STRING", **extra), None)})
    src = tmp_path / ("src-" + name)
    src.mkdir()
    land(data, zstd_sized(str(src / "big.json.zst"), text))
    return run_env(data, env, expect=expect)


# a test build's knob: 10 pieces of at most 4 KiB decoded while the file is
# decompressed, then a wait for all of it: the rest is decoded by this
# thread (in pieces of 64 KiB) up to the cut, by the second thread after it
HOLD_PIECES = {"SLUICE_FAULT_SIZE":
               "zst.feed:4096,zst.piece:4096,zst.hold_after:10,decode.piece:65536"}


@pytest.mark.parametrize("line", [300, 50000, 200000, 290000])
def test_big_zst_failfast_after_the_whole_arrived(tmp_path, line):
    """The decompressed pages go as they are decoded; a FAILFAST line is
    still numbered in the whole file. With the knob the parts are the same
    in every run: ten pieces decoded while decompressing (about 440 lines:
    300), then this thread's part up to the middle of the rest (50000, in
    a later 64 KiB piece of it), then the second thread's (200000 and
    290000). Zeroing the lines counted before any one part fails its case
    (tried by hand for each)."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    n = 300000
    p = run_zst(tmp_path, "data", "FAILFAST", big_json(n, bad={line}), HOLD_PIECES, expect=1)
    assert "'in/dev/big.json.zst' line %d:" % line in p.stderr, p.stderr
    # and without the bad line, every row is read
    p = run_zst(tmp_path, "data2", None, big_json(n), HOLD_PIECES)
    assert p.stdout == "dev: 1 batches, %d rows\n" % n, p.stdout


def test_big_zst_truncated_stops_the_query(tmp_path):
    """A big .zst cut short (its header still says the full size) is not
    valid zstd: the query stops and names the file; nothing commits."""
    data = str(tmp_path / "data")
    write_config(data, {"dev": (json_source("id BIGINT, pad STRING"), None)})
    src = tmp_path / "src"
    src.mkdir()
    path = zstd_sized(str(src / "big.json.zst"), big_json(300000))
    raw = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(raw[:len(raw) * 2 // 3])
    land(data, path)
    p = run(data, expect=1)
    assert "cannot decompress 'in/dev/big.json.zst': not valid zstd data" in p.stderr, p.stderr
    assert query_status(data).startswith("dev batch=- ")


def test_big_zst_pieces_never_start_at_a_bom(tmp_path):
    """A byte-order mark only starts a file: a line that begins with one in
    the middle is malformed JSON. Pieces are never cut before such a line,
    so it stays malformed however the file is cut."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    n = 300000
    lines = ['{"id": %d, "pad": "%s"}' % (i, "x" * 70) for i in range(1, n + 1)]
    boms = set(range(5, n + 1, 7))
    for i in boms:
        lines[i - 1] = "\ufeff" + lines[i - 1]
    src = tmp_path / "src"
    src.mkdir()
    path = zstd_sized(str(src / "big.json.zst"), "\n".join(lines) + "\n")
    # the third: 200 pieces of at most 4 KiB cut while decompressing (each
    # cut's line end has a 1 in 7 chance of coming before a BOM line),
    # without which the decompressor outruns the cuts and few are made
    held = {"SLUICE_FAULT_SIZE": "zst.feed:4096,zst.piece:4096,zst.hold_after:200"}
    for k, env in enumerate(({}, SMALL_PIECES, held)):
        data = str(tmp_path / ("data%d" % k))
        write_config(data, {"dev": (json_source("id BIGINT, pad STRING", mode="DROPMALFORMED"),
                                    None)})
        land(data, path)
        p = run_env(data, env)
        assert p.stdout == "dev: 1 batches, %d rows, %d malformed\n" % (n, len(boms)), p.stdout
