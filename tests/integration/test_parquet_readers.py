"""Parquet files of core/sinks/parquet.c read by two independent readers.

For each case of tests/unit/parquet-gen and both codecs, the file is read by
DuckDB (@duckdb/node-api: rows, parquet_schema, parquet_metadata, queries
that prune on statistics) and by hyparquet (a strict JS reader), and every
row is compared with the rows parquet-gen printed. The npm packages come
from util.npm_modules(); the tests skip when node, npm or the install is
unavailable.

parquet-gen is found in $SLUICE_BUILD_DIR/tests/unit, else two levels above
$SLUICE_BIN (build/tools/sluice), else in build/.
"""

import json
import math
import os
import re
import subprocess

import pytest

import util

HERE = os.path.dirname(os.path.abspath(__file__))
CODECS = ["zstd", "none"]


def build_dir():
    if os.environ.get("SLUICE_BUILD_DIR"):
        return os.environ["SLUICE_BUILD_DIR"]
    return os.path.dirname(os.path.dirname(os.path.abspath(util.sluice_bin())))


def parquet_gen():
    return os.path.join(build_dir(), "tests", "unit", "parquet-gen")


def gen_cases():
    gen = parquet_gen()
    if not os.access(gen, os.X_OK):
        return []
    p = subprocess.run([gen, "--list"], stdout=subprocess.PIPE, timeout=30, check=True, text=True)
    return p.stdout.split()


CASES = gen_cases() or ["parquet-gen-missing"]


@pytest.fixture(scope="session")
def node_modules():
    mods = util.npm_modules()
    if mods is None:
        pytest.skip(util.npm_missing())
    return mods


def norm(v):
    """One form for expected and read values: integers (also from digit strings) as int."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, str) and re.fullmatch(r"-?\d+", v):
        return int(v)
    if isinstance(v, float):
        return int(v) if v.is_integer() and abs(v) < 2**53 else v
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    return v


def same(a, b):
    a, b = norm(a), norm(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        return a == b
    return a == b and type(a) is type(b)


def compare_rows(reader, got, want):
    assert len(got) == len(want), "%s read %d rows, want %d" % (reader, len(got), len(want))
    for i, (g, w) in enumerate(zip(got, want)):
        assert list(g.keys()) == list(w.keys()), "%s row %d columns %r" % (reader, i, list(g))
        for k in w:
            assert same(g[k], w[k]), "%s row %d column %r: %r, want %r" % (reader, i, k, g[k], w[k])


def node(args, timeout=120):
    p = util.run(["node"] + args, timeout=timeout)
    assert p.returncode == 0, "node %s failed:\n%s" % (args[0], p.stderr)
    return json.loads(p.stdout)


DUCK_TYPES = {
    "s": "VARCHAR", "n": "BIGINT", "i": "INTEGER", "d": "DOUBLE", "ok": "BOOLEAN",
    "ts": "TIMESTAMP WITH TIME ZONE", "day": "DATE",
    "window": 'STRUCT("start" TIMESTAMP WITH TIME ZONE, "end" TIMESTAMP WITH TIME ZONE)',
    "big": "BIGINT", "int": "INTEGER", "dbl": "DOUBLE", "dbl2": "DOUBLE", "id": "BIGINT",
    "user": "VARCHAR", "empty": "VARCHAR",
}


def expected_stats(rows, col):
    """(null_count, min, max) of a flat column over rows; min/max None if no value."""
    vals = [r[col] for r in rows]
    nulls = sum(v is None for v in vals)
    vals = [v for v in vals if v is not None and v != "NaN"]
    if not vals:
        return nulls, None, None
    if isinstance(vals[0], str) and col in ("d", "dbl", "dbl2"):
        vals = [float(v.replace("Infinity", "inf")) if isinstance(v, str) else v for v in vals]
    if isinstance(vals[0], str):
        key = lambda s: s.encode()  # noqa: E731  unsigned bytewise order
        return nulls, min(vals, key=key), max(vals, key=key)
    vals = [float(v.replace("Infinity", "inf")) if isinstance(v, str) else v for v in vals]
    return nulls, min(vals), max(vals)


def check_metadata(case, codec, duck, want):
    meta = duck["metadata"]
    assert duck["file"][0]["created_by"].startswith("sluice version ")
    assert int(duck["file"][0]["num_rows"]) == len(want)
    orders = duck["file"][0]["column_orders"]
    assert orders and all("TYPE_ORDER" in o for o in orders)
    for col, t in zip(duck["columns"], duck["types"]):
        assert DUCK_TYPES.get(col, t) == t, "column %r type %s" % (col, t)
    codec_name = "ZSTD" if codec == "zstd" else "UNCOMPRESSED"
    for m in meta:
        assert m["compression"] == codec_name
        assert m["file_path"] if "file_path" in m and m["file_path"] else True
        assert int(m["num_values"]) == int(m["row_group_num_rows"])
        if m["dictionary_page_offset"] is not None:
            assert 4 <= int(m["dictionary_page_offset"]) < int(m["data_page_offset"])
            assert "RLE_DICTIONARY" in m["encodings"]
    # the chunks tile each row group, the row groups the file
    by_rg = {}
    for m in meta:
        by_rg.setdefault(int(m["row_group_id"]), []).append(m)
    pos = 4
    first_row = 0
    for g in sorted(by_rg):
        for m in by_rg[g]:
            start = int(m["dictionary_page_offset"] or m["data_page_offset"])
            assert start == pos, "rg %d %s starts at %d, want %d" % (g, m["path_in_schema"], start, pos)
            pos += int(m["total_compressed_size"])
        # statistics of flat columns against the expected rows of this row group
        n = int(by_rg[g][0]["row_group_num_rows"])
        rows = want[first_row:first_row + n]
        first_row += n
        for m in by_rg[g]:
            path = m["path_in_schema"]
            if "," in path:
                col = path.split(",")[0].strip()
                nulls = sum(r[col] is None for r in rows)
                assert int(m["stats_null_count"]) == nulls, "rg %d %s null_count" % (g, path)
                continue
            nulls, lo, hi = expected_stats(rows, path)
            assert int(m["stats_null_count"]) == nulls, "rg %d %s null_count" % (g, path)
            if lo is None:
                assert m["stats_min_value"] is None and m["stats_max_value"] is None
                continue
            smin, smax = m["stats_min_value"], m["stats_max_value"]
            if m["type"] == "DOUBLE":
                # DuckDB shows an infinite bound as NULL (its own files too)
                shown = [None if math.isinf(float(v)) else float(v) for v in (lo, hi)]
                got = [None if v is None else float(v) for v in (smin, smax)]
                assert got == shown, "rg %d %s min/max" % (g, path)
                continue
            assert smin is not None and smax is not None, "rg %d %s: no min/max" % (g, path)
            if m["type"] in ("INT64", "INT32") and path not in ("ts", "day"):
                assert (int(smin), int(smax)) == (lo, hi), "rg %d %s min/max" % (g, path)
            elif m["type"] == "BYTE_ARRAY":
                assert (smin, smax) == (lo, hi), "rg %d %s min/max" % (g, path)
            elif m["type"] == "BOOLEAN":
                assert (smin, smax) == (str(lo).lower(), str(hi).lower())
    assert len(by_rg) == 0 or pos + 8 + int(duck["file"][0]["footer_size"]) == \
        int(duck["file"][0]["file_size_bytes"])


def stats_queries(want, cols):
    """Filter queries whose answers depend on correct statistics, with their expected counts."""
    qs = []
    for col in cols:
        vals = [r[col] for r in want if isinstance(r[col], int) and not isinstance(r[col], bool)]
        if vals:
            mid = sorted(vals)[len(vals) // 2]
            qs.append(('SELECT count(*) FROM read_parquet({f}) WHERE "%s" > %d' % (col, mid),
                       sum(v > mid for v in vals)))
            qs.append(('SELECT count(*) FROM read_parquet({f}) WHERE "%s" = %d' % (col, vals[-1]),
                       vals.count(vals[-1])))
        qs.append(('SELECT count(*) FROM read_parquet({f}) WHERE "%s" IS NULL' % col,
                   sum(r[col] is None for r in want)))
    strs = [r.get("s") for r in want if isinstance(r.get("s"), str)]
    if strs:
        qs.append(("SELECT count(*) FROM read_parquet({f}) WHERE s = '%s'" % strs[-1].replace("'", "''"),
                   strs.count(strs[-1])))
    return qs


@pytest.mark.timeout(180)
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("case", CASES)
def test_parquet_readers(node_modules, tmp_path, case, codec):
    if case == "parquet-gen-missing":
        pytest.fail("parquet-gen not found at %s: build it or set SLUICE_BUILD_DIR" % parquet_gen())
    out = str(tmp_path / ("%s-%s.parquet" % (case, codec)))
    p = util.run([parquet_gen(), out, case, codec])
    assert p.returncode == 0, p.stderr
    want = [json.loads(line) for line in p.stdout.splitlines()]

    cols = list(want[0].keys()) if want else []
    flat = [c for c in cols if c not in ("window",)]
    queries = stats_queries(want, [c for c in flat if c in ("n", "i", "big", "int", "id", "s")])
    duck = node([os.path.join(HERE, "parquet_read_duckdb.cjs"), node_modules, out,
                 json.dumps([q for q, _ in queries])])
    compare_rows("duckdb", duck["rows"], want)
    check_metadata(case, codec, duck, want)
    for (q, n), got in zip(queries, duck["queries"]):
        assert int(got) == n, "%s: %s, want %d" % (q, got, n)
    if case == "dict-fallback":
        encs = [m["encodings"] for m in duck["metadata"] if m["path_in_schema"] == "s"]
        assert any("RLE_DICTIONARY" in e and "PLAIN" in e for e in encs)
    if case == "empty":
        assert duck["rows"] == [] and len(duck["types"]) == 8

    hy = node([os.path.join(HERE, "parquet_read_hyparquet.mjs"), node_modules, out])
    compare_rows("hyparquet", hy["rows"], want)
    assert int(hy["num_rows"]) == len(want)
    assert hy["created_by"].startswith("sluice version ")
    if case == "rowgroups":
        assert hy["row_groups"] > 2
    assert not any(math.isnan(x) for x in [])  # keep math import honest
