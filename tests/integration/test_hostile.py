"""Hostile input through the engine (DESIGN.md §1 "Source", "Decoding",
"Failures"; issue 5): binary garbage, NUL bytes, invalid UTF-8, a 2 MiB
line, 100,000 nested brackets, numbers that overflow BIGINT and DOUBLE,
wrong types, unbalanced CSV quotes, empty files, a file without a final
newline and CRLF, in json and csv, under PERMISSIVE, DROPMALFORMED and
FAILFAST, with `sluice run --available-now` and in a live mount with
event-driven queries.

What a user relies on: the process never dies (exit codes as DESIGN lists
them; the mount daemon stays up and answers), malformed rows are counted in
numMalformedRows, every good row around the bad ones is in out/ exactly
once, PERMISSIVE keeps the raw line in _corrupt_record when the schema names
it, DROPMALFORMED drops the row, FAILFAST stops the query naming the file
and line and commits nothing of that batch, and switching the mode to
PERMISSIVE (a change the checkpoint survives) lets the query go on."""

import json
import os

import pytest

import util
from util import write_file

pytestmark = pytest.mark.timeout(60)

MiB = 1024 * 1024

# The schema of every query here; csv columns are by position (no header),
# _corrupt_record is not a csv column.
COLS = "id STRING, n BIGINT, x DOUBLE, ok BOOLEAN"
SCHEMA_CR = COLS + ", _corrupt_record STRING"

GOOD, BAD, BLANK = "good", "bad", "blank"


# -- the corpora --------------------------------------------------------------

def garbage(n, seed):
    """n bytes of binary garbage without line endings: not JSON, not UTF-8."""
    raw = util.pattern(n * 2, seed).replace(b"\n", b"").replace(b"\r", b"")
    return b"\xff\x00" + raw[:n]


def deep(n):
    return b"[" * n + b"]" * n


# (raw line without its line ending, kind, expected row). A GOOD row is in
# out/ under both PERMISSIVE and DROPMALFORMED; a BAD one is counted in
# numMalformedRows, in PERMISSIVE its fields that converted are kept (the
# row shown) and the raw line goes to _corrupt_record; DROPMALFORMED drops it.
JSON_CORPUS = [
    (b'{"id":"j-first","n":1,"x":1.5,"ok":true}', GOOD, {"id": "j-first", "n": 1, "x": 1.5, "ok": True}),
    (b'', BLANK, None),
    (b'{"id":"j-second","n":2}', GOOD, {"id": "j-second", "n": 2}),
    # binary garbage, with NUL bytes and invalid UTF-8 in it
    (garbage(300, 1), BAD, {}),
    (b'{"id":"j-after-garbage","n":3}', GOOD, {"id": "j-after-garbage", "n": 3}),
    # NUL bytes: raw inside a string (a control character), between tokens,
    # a line of nothing else; escaped as \u0000 it is a valid string
    (b'{"id":"raw\x00nul","n":4}', BAD, {}),
    (b'{"id":"j-tok",\x00"n":4}', BAD, {}),
    (b'\x00\x00\x00\x00', BAD, {}),
    (b'{"id":"j-esc\\u0000nul","n":5}', GOOD, {"id": "j-esc\x00nul", "n": 5}),
    # invalid UTF-8: a stray byte, an overlong '/', a UTF-16 surrogate,
    # a sequence cut short at the end of the line
    (b'{"id":"bad\xffutf8","n":6}', BAD, {}),
    (b'{"id":"\xc0\xaf","n":6}', BAD, {}),
    (b'{"id":"\xed\xa0\x80","n":6}', BAD, {}),
    (b'{"id":"j-cut","n":6}\xe2\x82', BAD, {}),
    (b'{"id":"j-utf8-ok caf\xc3\xa9 \xf0\x9f\x98\x80","n":7}', GOOD,
     {"id": "j-utf8-ok caf\u00e9 \U0001F600", "n": 7}),
    # a 2 MiB line: good (a field the schema does not name), bad (unterminated)
    (b'{"id":"j-big","pad":"' + b"p" * (2 * MiB) + b'","n":8}', GOOD, {"id": "j-big", "n": 8}),
    (b'{"id":"j-big-bad","n":8,"pad":"' + b"q" * (2 * MiB), BAD, {}),
    (b'{"id":"j-big-value","n":9,"x":' + b"1" * (2 * MiB) + b'}', BAD, {"id": "j-big-value", "n": 9}),
    # 100,000 nested brackets: not an object, unclosed, and inside a field the
    # schema does not name (decode.h: nesting is valid up to SL_JSCAN_MAX_DEPTH,
    # 2048, jansson's limit, which RFC 8259 section 9 allows); 1,000 is fine
    (deep(100000), BAD, {}),
    (b"{" * 100000, BAD, {}),
    (b'[' * 100000, BAD, {}),
    (b'{"id":"j-deep","n":12,"d":' + deep(100000) + b'}', BAD, {}),
    (b'{"id":"j-deep-ok","n":12,"d":' + deep(1000) + b'}', GOOD, {"id": "j-deep-ok", "n": 12}),
    # numbers that overflow BIGINT and DOUBLE: the field is null
    (b'{"id":"j-ovf1","n":9223372036854775808,"x":1.5}', BAD, {"id": "j-ovf1", "x": 1.5}),
    (b'{"id":"j-ovf2","n":-9223372036854775809}', BAD, {"id": "j-ovf2"}),
    (b'{"id":"j-ovf3","n":123456789012345678901234567890}', BAD, {"id": "j-ovf3"}),
    (b'{"id":"j-ovf4","x":1e400}', BAD, {"id": "j-ovf4"}),
    (b'{"id":"j-ovf5","x":-1.8e308,"n":1}', BAD, {"id": "j-ovf5", "n": 1}),
    # the edges themselves are values
    (b'{"id":"j-max","n":9223372036854775807,"x":1.7976931348623157e308}', GOOD,
     {"id": "j-max", "n": 9223372036854775807, "x": 1.7976931348623157e308}),
    (b'{"id":"j-min","n":-9223372036854775808,"x":-5e-324}', GOOD,
     {"id": "j-min", "n": -9223372036854775808, "x": -5e-324}),
    # out of range where the schema does not look: syntax-checked only
    (b'{"id":"j-unnamed-huge","big":1e99999,"n":10}', GOOD, {"id": "j-unnamed-huge", "n": 10}),
    # wrong types
    (b'{"id":"j-wt1","n":"7"}', BAD, {"id": "j-wt1"}),
    (b'{"id":"j-wt2","n":7.0}', BAD, {"id": "j-wt2"}),
    (b'{"id":"j-wt3","n":[7],"ok":true}', BAD, {"id": "j-wt3", "ok": True}),
    (b'{"id":"j-wt4","x":"1.5"}', BAD, {"id": "j-wt4"}),
    (b'{"id":"j-wt5","ok":"true"}', BAD, {"id": "j-wt5"}),
    (b'{"id":"j-wt6","ok":1}', BAD, {"id": "j-wt6"}),
    (b'{"id":"j-wt7","n":{"v":7}}', BAD, {"id": "j-wt7"}),
    # a number, a boolean and a structure into STRING are their JSON text
    (b'{"id":42,"x":2}', GOOD, {"id": "42", "x": 2.0}),
    (b'{"id":[1, {"a" : null}],"ok":false}', GOOD, {"id": '[1,{"a":null}]', "ok": False}),
    (b'"j-a string"', BAD, {}),
    (b'[{"id":"j-in-array"}]', BAD, {}),
    (b'{"id":"j-two"}{"id":"j-objects"}', BAD, {}),
    (b'{"id":"j-trailing-comma",}', BAD, {}),
    (b'   ', BLANK, None),
    (b'{"id":"j-last","n":11}', GOOD, {"id": "j-last", "n": 11}),
]

CSV_CORPUS = [
    (b'c-first,1,1.5,true', GOOD, {"id": "c-first", "n": 1, "x": 1.5, "ok": True}),
    (b'', BLANK, None),
    (b'c-second,2,,', GOOD, {"id": "c-second", "n": 2}),
    (garbage(300, 2), BAD, None),
    (b'c-after-garbage,3,3,false', GOOD, {"id": "c-after-garbage", "n": 3, "x": 3.0, "ok": False}),
    # NUL bytes: valid UTF-8, so a STRING may hold one; a number may not
    (b'c-nul\x00inside,4,,', GOOD, {"id": "c-nul\x00inside", "n": 4}),
    (b'c-nul-num,4\x00,,', BAD, {"id": "c-nul-num"}),
    # invalid UTF-8
    (b'c-bad\xffutf8,5,,', BAD, None),
    (b'c-overlong\xc0\xaf,5,,', BAD, None),
    (b'"c-utf8-ok caf\xc3\xa9",5,,', GOOD, {"id": "c-utf8-ok caf\u00e9", "n": 5}),
    # a 2 MiB line: a 2 MiB quoted value; 2 MiB of one field
    (b'"c-big' + b"b" * (2 * MiB) + b'",6,,', GOOD, {"id": "c-big" + "b" * (2 * MiB), "n": 6}),
    (b"z" * (2 * MiB), BAD, None),
    # 100,000 nested brackets are just text in a STRING
    (deep(100000) + b',7,,', GOOD, {"id": deep(100000).decode(), "n": 7}),
    (b'{' * 100000, BAD, None),
    # numbers that overflow BIGINT and DOUBLE
    (b'c-ovf1,9223372036854775808,1.5,true', BAD, {"id": "c-ovf1", "x": 1.5, "ok": True}),
    (b'c-ovf2,-9223372036854775809,,', BAD, {"id": "c-ovf2"}),
    (b'c-ovf3,8,1e400,', BAD, {"id": "c-ovf3", "n": 8}),
    (b'c-ovf4,8,-1.8e308,true', BAD, {"id": "c-ovf4", "n": 8, "ok": True}),
    (b'c-max,9223372036854775807,1.7976931348623157e308,', GOOD,
     {"id": "c-max", "n": 9223372036854775807, "x": 1.7976931348623157e308}),
    # wrong types
    (b'c-wt1,seven,,', BAD, {"id": "c-wt1"}),
    (b'c-wt2,1.0,,', BAD, {"id": "c-wt2"}),
    (b'c-wt3,9,abc,', BAD, {"id": "c-wt3", "n": 9}),
    (b'c-wt4,9,,yes', BAD, {"id": "c-wt4", "n": 9}),
    # unbalanced quotes (no multi-line fields: each physical line is a record)
    (b'"c-unterminated,10,,', BAD, None),
    (b'"c-escaped""quote,10,,', BAD, None),
    (b'"c-after"close,10,,', BAD, None),
    (b'c-inner"quote,10,,', GOOD, {"id": 'c-inner"quote', "n": 10}),
    (b'"c-ok ""quoted"", with comma",11,,', GOOD, {"id": 'c-ok "quoted", with comma', "n": 11}),
    # wrong field counts
    (b'c-short,12', BAD, {"id": "c-short", "n": 12}),
    (b'c-long,12,1,true,extra', BAD, {"id": "c-long", "n": 12, "x": 1.0, "ok": True}),
    (b'c-last,13,,', GOOD, {"id": "c-last", "n": 13}),
]


def corpus_bytes(corpus, crlf_every=3, final_newline=False):
    """The corpus as one file: CRLF on every crlf_every-th line, LF on the
    others, and no line ending after the last line unless final_newline."""
    out = b""
    for i, (raw, _, _) in enumerate(corpus):
        out += raw
        if i < len(corpus) - 1 or final_newline:
            out += b"\r\n" if i % crlf_every == 0 else b"\n"
    return out


def first_bad_line(corpus):
    return next(i for i, (_, kind, _) in enumerate(corpus) if kind == BAD) + 1


def records(corpus):
    return [(raw, kind, row) for raw, kind, row in corpus if kind != BLANK]


def n_bad(corpus):
    return sum(1 for _, kind, _ in corpus if kind == BAD)


# Small files around the hostile one: landed before it, after it.
JSON_BEFORE = [(b'{"id":"j-before-%d","n":%d}' % (i, i), GOOD, {"id": "j-before-%d" % i, "n": i})
               for i in range(3)]
JSON_AFTER = [(b'{"id":"j-after-%d","n":%d}' % (i, i), GOOD, {"id": "j-after-%d" % i, "n": i})
              for i in range(3)]
CSV_BEFORE = [(b'c-before-%d,%d,,' % (i, i), GOOD, {"id": "c-before-%d" % i, "n": i}) for i in range(3)]
CSV_AFTER = [(b'c-after-%d,%d,,' % (i, i), GOOD, {"id": "c-after-%d" % i, "n": i}) for i in range(3)]


# -- helpers ------------------------------------------------------------------

def query(fmt, path, mode, corrupt=True, **extra):
    src = {"format": fmt, "path": path, "schema": SCHEMA_CR if corrupt else COLS, "mode": mode}
    src.update(extra.pop("source", {}))
    q = {"source": src}
    q.update(extra)
    return q


def write_config(data, queries):
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump({"queries": queries}, f)


def put(tmp_path, name, content):
    p = tmp_path / "src" / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(content)
    return str(p)


def land(data, *files, to):
    p = util.sluice("land", data, *files, "--to", to)
    assert p.returncode == 0, p.stderr


def run(data, expect):
    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.returncode == expect, (p.returncode, p.stdout, p.stderr[-2000:])
    return p


def run_summary(p):
    """{query: line} from `sluice run`'s stdout."""
    got = {}
    for line in p.stdout.splitlines():
        name, _, rest = line.partition(": ")
        got[name] = rest
    return got


def status_line(data, name):
    p = util.sluice("status", data)
    assert p.returncode == 0, p.stderr
    lines = [l for l in p.stdout.splitlines() if l.startswith(name + " ")]
    assert len(lines) == 1, p.stdout
    return lines[0]


def cat(path):
    """The bytes of a file in the mount, through cat(1) (zstdcat for .zst)."""
    tool = ["zstdcat"] if path.endswith(".zst") else ["cat"]
    p = util.run(tool + [path], timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


def out_parts(m, q):
    base = os.path.join(m.mnt, "out", q)
    if not os.path.isdir(base):
        return []
    return sorted(os.path.join(base, n) for n in util.list_out(base))


def out_rows(m, q):
    """Every row of out/<q>/ in part order (cat/zstdcat, then json)."""
    rows = []
    for part in out_parts(m, q):
        text = cat(part)
        assert text == b"" or text.endswith(b"\n"), part
        rows += [json.loads(l) for l in text.decode("utf-8").splitlines()]
    return rows


def jq_good_ids(m, q):
    """Through jq: the id of every row of out/<q>/ without a _corrupt_record."""
    parts = out_parts(m, q)
    assert parts
    p = util.run(["jq", "-c", 'select(has("_corrupt_record") | not) | .id'] + parts, timeout=60)
    assert p.returncode == 0, p.stderr
    return [json.loads(l) for l in p.stdout.decode().splitlines()]


def read_json(path):
    with open(path, "rb") as f:
        return json.loads(f.read())


def reports(m, q):
    with open(os.path.join(m.mnt, "status", q + ".jsonl"), "rb") as f:
        return [json.loads(l) for l in f.read().decode().splitlines()]


def same_text(got, raw):
    """_corrupt_record holds the raw line; invalid UTF-8 may only be replaced
    by U+FFFD (how many per bad sequence is not a contract)."""
    want = raw.decode("utf-8", "ignore")
    if raw.decode("utf-8", "replace") == want:  # valid UTF-8: exactly the line
        return got == want
    return "\ufffd" in got and got.replace("\ufffd", "") == want


def check_permissive(rows, recs, corrupt=True):
    """rows are the output of recs (records in order) under PERMISSIVE."""
    assert len(rows) == len(recs), (len(rows), len(recs))
    for row, (raw, kind, want) in zip(rows, recs):
        if kind == GOOD:
            assert row == want, raw[:80]
            continue
        cr = row.pop("_corrupt_record", None)
        if corrupt:
            assert cr is not None and same_text(cr, raw), (raw[:80], (cr or "")[:80])
        else:
            assert cr is None
        if want is not None:  # None: a csv line that does not split (not asserted)
            assert row == want, raw[:80]


def check_good_once(ids, recs):
    """Every good row's id is in ids exactly once, and nothing else is."""
    want = [row["id"] for _, kind, row in recs if kind == GOOD]
    assert len(set(want)) == len(want)
    assert sorted(ids) == sorted(want)


def check_dropmalformed(rows, recs):
    assert rows == [row for _, kind, row in recs if kind == GOOD]


def mount_alive(m):
    """The daemon is running and answers."""
    assert m.proc.poll() is None, "sluice mount died:\n" + m.stderr()[-3000:]
    assert set(os.listdir(m.mnt)) >= util.LAYOUT
    util.read_landing(m.mnt)


# -- sluice run: json and csv in all three modes --------------------------------

def hostile_dir(tmp_path, fmt, queries):
    """A data dir with `queries`, the before/hostile/after files landed in
    that order (plus an empty file and a file of blank lines)."""
    data = str(tmp_path / ("data-" + fmt))
    write_config(data, queries)
    corpus, before, after, ext = (JSON_CORPUS, JSON_BEFORE, JSON_AFTER, "json") if fmt == "json" \
        else (CSV_CORPUS, CSV_BEFORE, CSV_AFTER, "csv")
    to = "j" if fmt == "json" else "c"
    land(data, put(tmp_path, "a-before." + ext, corpus_bytes(before, final_newline=True)), to=to)
    land(data, put(tmp_path, "b-empty." + ext, b""), to=to)
    land(data, put(tmp_path, "c-hostile." + ext, corpus_bytes(corpus)), to=to)
    land(data, put(tmp_path, "d-blank." + ext, b"\n\r\n\n"), to=to)
    land(data, put(tmp_path, "e-after." + ext, corpus_bytes(after, crlf_every=1)), to=to)
    return data, records(before) + records(corpus) + records(after)


@pytest.mark.parametrize("fmt", ["json", "csv"])
@pytest.mark.allow_stderr(r".")
def test_run_all_modes(mounts, tmp_path, fmt):
    to = "j" if fmt == "json" else "c"
    corpus = JSON_CORPUS if fmt == "json" else CSV_CORPUS
    data, recs = hostile_dir(tmp_path, fmt, {
        "perm": query(fmt, to, "PERMISSIVE"),
        "plain": query(fmt, to, "PERMISSIVE", corrupt=False),
        "drop": query(fmt, to, "DROPMALFORMED", sink={"format": "json", "compression": "zstd"}),
        "fail": query(fmt, to, "FAILFAST"),
    })
    nbad = n_bad(corpus)
    p = run(data, expect=1)  # a query failed: exit 1, the others ran
    summary = run_summary(p)
    rows_line = "1 batches, %d rows, %d malformed" % (len(recs), nbad)
    assert summary["perm"] == rows_line, p.stdout
    assert summary["plain"] == rows_line, p.stdout
    assert summary["drop"] == rows_line, p.stdout
    assert summary["fail"] == "0 batches, 0 rows", p.stdout
    # FAILFAST: one line naming the query, the file and the physical line
    err = util.one_line(p.stderr)
    assert "'fail'" in err and "in/%s/c-hostile.%s" % (to, fmt) in err, err
    assert "line %d:" % first_bad_line(corpus) in err, err
    st = status_line(data, "fail")
    assert st.startswith("fail batch=- rows=0 "), st
    assert "c-hostile.%s' line %d:" % (fmt, first_bad_line(corpus)) in st, st

    m = mounts.new(data=data)
    m.allow(r".")
    # PERMISSIVE: every record once, the raw line of each bad one kept
    check_permissive(out_rows(m, "perm"), recs)
    check_permissive(out_rows(m, "plain"), recs, corrupt=False)
    # DROPMALFORMED: exactly the good rows, in order (zstd parts, zstdcat)
    assert [os.path.basename(x) for x in out_parts(m, "drop")] == ["part-00000-00000.jsonl.zst"]
    check_dropmalformed(out_rows(m, "drop"), recs)
    for q in ("perm", "plain", "drop"):
        last = read_json(os.path.join(m.mnt, "status", q + ".json"))
        assert last["batchId"] == 0 and last["numInputRows"] == len(recs), (q, last)
        assert last["numMalformedRows"] == nbad, (q, last)
        assert last["sink"]["numOutputRows"] == len(recs) - (nbad if q == "drop" else 0), last
        assert "lastError" not in last
    # jq reads PERMISSIVE's output too: the good rows, each exactly once
    check_good_once(jq_good_ids(m, "perm"), recs)
    # FAILFAST committed nothing of its batch
    assert out_parts(m, "fail") == []
    ck = os.path.join(m.mnt, "checkpoint", "fail")
    assert os.listdir(os.path.join(ck, "offsets")) == ["0"]
    assert os.listdir(os.path.join(ck, "commits")) == []
    # no report yet, but why the query stopped
    assert list(read_json(os.path.join(m.mnt, "status", "fail.json"))) == ["lastError"]
    mount_alive(m)
    m.unmount()

    # the way out: PERMISSIVE, an allowed change; batch 0 re-runs over the same files
    write_config(data, {
        "perm": query(fmt, to, "PERMISSIVE"),
        "plain": query(fmt, to, "PERMISSIVE", corrupt=False),
        "drop": query(fmt, to, "DROPMALFORMED", sink={"format": "json", "compression": "zstd"}),
        "fail": query(fmt, to, "PERMISSIVE"),
    })
    p = run(data, expect=0)
    assert p.stderr == ""
    summary = run_summary(p)
    assert summary == {"perm": "0 batches, 0 rows", "plain": "0 batches, 0 rows",
                       "drop": "0 batches, 0 rows", "fail": rows_line}, p.stdout
    assert status_line(data, "fail").endswith(" error=-")
    m = mounts.remount(m)
    check_permissive(out_rows(m, "fail"), recs)
    assert os.listdir(os.path.join(m.mnt, "checkpoint", "fail", "commits")) == ["0"]
    assert read_json(os.path.join(m.mnt, "status", "fail.json"))["numMalformedRows"] == nbad
    # and nothing ran twice
    check_permissive(out_rows(m, "perm"), recs)
    check_dropmalformed(out_rows(m, "drop"), recs)
    mount_alive(m)
    assert util.sluice("check", data).returncode == 3  # mounted: in use
    m.unmount()
    p = util.sluice("check", data)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("fmt", ["json", "csv"])
@pytest.mark.allow_stderr(r".")
def test_failfast_batch_per_file(mounts, tmp_path, fmt):
    """One file per batch: the batches before the bad file commit, the bad
    file's batch commits nothing and stops the query; later files wait."""
    to = "j" if fmt == "json" else "c"
    corpus = JSON_CORPUS if fmt == "json" else CSV_CORPUS
    data, recs = hostile_dir(tmp_path, fmt, {
        "fail": query(fmt, to, "FAILFAST", source={"maxFilesPerTrigger": 1})})
    for _ in range(2):  # it stops the same way each time
        p = run(data, expect=1)
        err = util.one_line(p.stderr)
        assert "in/%s/c-hostile.%s" % (to, fmt) in err, err
        assert "line %d:" % first_bad_line(corpus) in err, err
    assert status_line(data, "fail").startswith("fail batch=1 rows=0 ")  # a-before, b-empty
    m = mounts.new(data=data)
    m.allow(r".")
    assert [os.path.basename(x) for x in out_parts(m, "fail")] == ["part-00000-00000.jsonl"]
    ck = os.path.join(m.mnt, "checkpoint", "fail")
    assert sorted(os.listdir(os.path.join(ck, "commits"))) == ["0", "1"]
    assert sorted(os.listdir(os.path.join(ck, "offsets"))) == ["0", "1", "2"]
    # the files after it are still held: not deletable
    util.expect_errno(16, os.unlink, m.inp(to, "e-after." + fmt))  # EBUSY
    m.unmount()

    write_config(data, {"fail": query(fmt, to, "PERMISSIVE", source={"maxFilesPerTrigger": 1})})
    p = run(data, expect=0)
    assert run_summary(p)["fail"] == "3 batches, %d rows, %d malformed" % (
        len(records(corpus)) + 3, n_bad(corpus))
    m = mounts.remount(m)
    check_permissive(out_rows(m, "fail"), recs)
    assert sorted(os.listdir(os.path.join(m.mnt, "checkpoint", "fail", "commits"))) == \
        ["0", "1", "2", "3", "4"]
    os.unlink(m.inp(to, "e-after." + fmt))  # committed: deletable now


@pytest.mark.allow_stderr(r".")
def test_failfast_last_error_in_status_json(mounts, tmp_path):
    """DESIGN §1: status/<q>.json has `lastError` when the query stopped."""
    data = str(tmp_path / "data")
    write_config(data, {"fail": query("json", "j", "FAILFAST")})
    land(data, put(tmp_path, "good.json", corpus_bytes(JSON_BEFORE)), to="j")
    run(data, expect=0)
    land(data, put(tmp_path, "hostile.json", corpus_bytes(JSON_CORPUS)), to="j")
    run(data, expect=1)
    m = mounts.new(data=data)
    m.allow(r".")
    last = read_json(os.path.join(m.mnt, "status", "fail.json"))
    assert last["batchId"] == 0
    err = last.get("lastError") or ""
    assert "in/j/hostile.json" in err and "line %d" % first_bad_line(JSON_CORPUS) in err, last


@pytest.mark.allow_stderr(r".")
def test_run_survives_each_hostile_file_alone(mounts, tmp_path):
    """Each hostile record in a file of its own (so it is also the last line,
    without a newline), among good files, in one batch per format."""
    data = str(tmp_path / "data")
    write_config(data, {
        "jp": query("json", "j", "PERMISSIVE"),
        "jd": query("json", "j", "DROPMALFORMED"),
        "cp": query("csv", "c", "PERMISSIVE"),
        "cd": query("csv", "c", "DROPMALFORMED"),
    })
    jrecs, crecs = [], []
    jfiles, cfiles = [], []
    for i, rec in enumerate(records(JSON_CORPUS)):
        jfiles.append(put(tmp_path, "j/%03d.json" % i, rec[0]))
        jrecs.append(rec)
    for i, rec in enumerate(records(CSV_CORPUS)):
        cfiles.append(put(tmp_path, "c/%03d.csv" % i, rec[0]))
        crecs.append(rec)
    land(data, *jfiles, to="j")
    land(data, *cfiles, to="c")
    p = run(data, expect=0)
    s = run_summary(p)
    assert s["jp"] == s["jd"] == "1 batches, %d rows, %d malformed" % (len(jrecs), n_bad(JSON_CORPUS))
    assert s["cp"] == s["cd"] == "1 batches, %d rows, %d malformed" % (len(crecs), n_bad(CSV_CORPUS))
    m = mounts.new(data=data)
    # one batch over many files: the planned order is the landing order
    check_permissive(out_rows(m, "jp"), jrecs)
    check_dropmalformed(out_rows(m, "jd"), jrecs)
    check_permissive(out_rows(m, "cp"), crecs)
    check_dropmalformed(out_rows(m, "cd"), crecs)
    mount_alive(m)


# -- a live mount with event-driven queries ---------------------------------------

def wait_inputs(m, q, n, timeout=30):
    """Waits until the committed reports of q add up to n input rows."""
    def done():
        rs = reports(m, q)
        return sum(r["numInputRows"] for r in rs) >= n and rs
    return util.wait_for(done, timeout, "%d input rows in %s's reports" % (n, q), interval=0.1)


@pytest.mark.timeout(90)
@pytest.mark.allow_stderr(r"stopped|line \d+|retrying")
def test_live_mount_event_driven(mounts, tmp_path):
    data = str(tmp_path / "data")
    queries = {
        "jp": query("json", "j", "PERMISSIVE"),
        "jd": query("json", "j", "DROPMALFORMED"),
        "jf": query("json", "j", "FAILFAST"),
        "cp": query("csv", "c", "PERMISSIVE"),
        "cd": query("csv", "c", "DROPMALFORMED"),
    }
    write_config(data, queries)
    m = mounts.new(data=data)
    os.mkdir(m.inp("j"))
    os.mkdir(m.inp("c"))
    # good files first: every query commits a batch
    write_file(m.inp("j", "a-before.json"), corpus_bytes(JSON_BEFORE, final_newline=True))
    write_file(m.inp("c", "a-before.csv"), corpus_bytes(CSV_BEFORE, final_newline=True))
    wait_inputs(m, "jf", len(JSON_BEFORE))
    # then the hostile files, through cp, with empty and blank files among them
    for name, body in [("b-empty.json", b""), ("c-hostile.json", corpus_bytes(JSON_CORPUS)),
                       ("d-blank.json", b"\n\r\n")]:
        path = put(tmp_path, name, body)
        util.run(["cp", path, m.inp("j", name)], check=True)
    for name, body in [("b-empty.csv", b""), ("c-hostile.csv", corpus_bytes(CSV_CORPUS)),
                       ("d-blank.csv", b"\r\n")]:
        write_file(m.inp("c", name), body)
    util.wait_for(lambda: "error=-" not in status_line(data, "jf"), 20, "jf to stop")
    # and good files after them, which the event-driven queries take too
    write_file(m.inp("j", "e-after.json"), corpus_bytes(JSON_AFTER, crlf_every=1))
    write_file(m.inp("c", "e-after.csv"), corpus_bytes(CSV_AFTER, crlf_every=1))

    jrecs = records(JSON_BEFORE) + records(JSON_CORPUS) + records(JSON_AFTER)
    crecs = records(CSV_BEFORE) + records(CSV_CORPUS) + records(CSV_AFTER)
    for q, recs, corpus in (("jp", jrecs, JSON_CORPUS), ("jd", jrecs, JSON_CORPUS),
                            ("cp", crecs, CSV_CORPUS), ("cd", crecs, CSV_CORPUS)):
        rs = wait_inputs(m, q, len(recs))
        assert sum(r["numInputRows"] for r in rs) == len(recs), (q, rs)
        assert sum(r["numMalformedRows"] for r in rs) == n_bad(corpus), q
        last = read_json(os.path.join(m.mnt, "status", q + ".json"))
        assert last == rs[-1]
        rows = out_rows(m, q)
        if q.endswith("p"):
            # batches follow landings, and two landings may plan in either
            # order: compare as sets of rows, each exactly once
            assert len(rows) == len(recs)
            check_good_once([r["id"] for r in rows if "_corrupt_record" not in r and "id" in r],
                            recs)
            bad_rows = [r for r in rows if "_corrupt_record" in r]
            assert len(bad_rows) == n_bad(corpus)
        else:
            assert len(rows) == len(recs) - n_bad(corpus)
            check_good_once([r["id"] for r in rows], recs)
    mount_alive(m)

    # FAILFAST: stopped at the hostile file's first bad line, nothing of that batch committed
    st = status_line(data, "jf")
    assert "in/j/c-hostile.json' line %d:" % first_bad_line(JSON_CORPUS) in st, st
    # batch 0 took a-before.json; b-empty.json may have made a batch of its own
    committed = sorted(os.listdir(os.path.join(m.mnt, "checkpoint", "jf", "commits")))
    assert committed in (["0"], ["0", "1"]), committed
    assert st.startswith("jf batch=%s " % committed[-1]), st
    assert [os.path.basename(x) for x in out_parts(m, "jf")] == ["part-00000-00000.jsonl"]
    assert out_rows(m, "jf") == [row for _, _, row in JSON_BEFORE]
    assert "query 'jf' stopped" in m.stderr()
    # landing goes on while it is stopped
    write_file(m.inp("j", "f-late.json"), b'{"id":"j-late","n":1}\n')
    m.wait_landed()
    mount_alive(m)

    # the way out: mode PERMISSIVE and a remount; jf goes on from batch 1
    m.unmount()
    queries["jf"] = query("json", "j", "PERMISSIVE")
    write_config(data, queries)
    m = mounts.remount(m)
    late = [(b'{"id":"j-late","n":1}', GOOD, {"id": "j-late", "n": 1})]
    wait_inputs(m, "jf", len(jrecs) + 1)
    rows = out_rows(m, "jf")
    assert len(rows) == len(jrecs) + 1
    check_good_once([r["id"] for r in rows if "_corrupt_record" not in r and "id" in r],
                    jrecs + late)
    assert sum(r["numMalformedRows"] for r in reports(m, "jf")) == n_bad(JSON_CORPUS)
    util.wait_for(lambda: status_line(data, "jf").endswith(" error=-"), 10, "jf's error to clear")
    mount_alive(m)
