"""The kafka sink (CONNECTORS.md §7, issue 14 item 2), against librdkafka's
3-broker mock cluster (kafka_util) with kcat as the outside reader: Spark's
input columns, or each row whole as JSON; keyColumn; sluice.query and
sluice.batch headers on every record; at-least-once by default; refusals
naming fields; clear lastError for an unknown topic, an oversized record, a
broker error and a fenced producer (exit 1 in `sluice run`, retried in a
mount); and exactly-once for read_committed readers across crashes on
either side of the Kafka commit and of the catalog commit. What the mock
cannot show (aborted transactions invisible to read_committed) runs only
with KAFKA_BOOTSTRAP naming a real broker."""

import json
import os
import re
import subprocess
import time

import pytest

import kafka_util
import util

_missing = kafka_util.missing_reason()
pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(_missing is not None, reason=_missing or "")]

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
FAULT_EXIT = 86


def write_config(data, queries, mode=0o644):
    os.makedirs(data, exist_ok=True)
    path = os.path.join(data, "sluice.json")
    with open(path, "w") as f:
        json.dump({"queries": queries}, f)
    os.chmod(path, mode)


def query(schema, sink, **extra):
    q = {"source": {"format": "json", "path": "ev", "schema": schema, "maxFilesPerTrigger": 1},
         "sink": sink}
    q.update(extra)
    return q


def kafka(kc, **opts):
    s = {"format": "kafka", "kafka.bootstrap.servers": kc.bootstrap}
    s.update(opts)
    return s


def land(tmp_path, data, name, rows, to="ev"):
    p = tmp_path / name
    p.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    r = util.sluice("land", data, str(p), "--to", to)
    assert r.returncode == 0, r.stderr


def run(data, expect=0, env=None):
    e = dict(os.environ)
    e.update(env or {})
    p = util.sluice("run", "--available-now", data, timeout=120, env=e)
    assert p.returncode == expect, (p.returncode, p.stdout, p.stderr)
    return p


def status(data):
    p = util.sluice("status", "--json", data)
    assert p.returncode == 0, p.stderr
    return {q["name"]: q for q in json.loads(p.stdout)["queries"]}


def headers(text):
    """kcat's %h ("k=v,k2=v2") as a dict."""
    return dict(kv.split("=", 1) for kv in text.split(",") if kv)


SEP = "\x1f"


def records(kc, topic, read_committed=False):
    """Every record of topic: dicts of topic, partition, key, value, headers."""
    fmt = SEP.join(["%t", "%p", "%k", "%s", "%h"]) + "\x1e"
    out = kc.consume(topic, fmt=fmt, read_committed=read_committed)
    recs = []
    for r in out.split("\x1e"):
        if not r.strip("\n"):
            continue
        t, p, k, v, h = r.split(SEP)
        recs.append({"topic": t, "partition": int(p), "key": k, "value": v,
                     "headers": headers(h)})
    return recs


@pytest.fixture
def kc():
    with kafka_util.MockCluster(topics={"events": 3, "other": 3, "tx": 3, "ref": 3}) as c:
        yield c


# ---- columns, headers, options ---------------------------------------------

def test_whole_row_json_headers_and_batches(kc, tmp_path):
    """No value column: each row whole, as the JSON sink writes it; every
    record carries sluice.query (the checkpoint id) and sluice.batch."""
    data = str(tmp_path / "data")
    write_config(data, {"q": query("user STRING, n BIGINT, ok BOOLEAN",
                                   kafka(kc, topic="events"))})
    land(tmp_path, data, "a.json", [{"user": "a", "n": 1, "ok": True}, {"user": "b", "n": 2}])
    land(tmp_path, data, "b.json", [{"user": "c\"q", "n": 3}])
    run(data)
    recs = records(kc, "events")
    assert sorted(r["value"] for r in recs) == sorted(
        ['{"user":"a","n":1,"ok":true}', '{"user":"b","n":2}', '{"user":"c\\"q","n":3}'])
    qids = {r["headers"]["sluice.query"] for r in recs}
    assert len(qids) == 1 and UUID.match(qids.pop())
    by_batch = {}
    for r in recs:
        assert set(r["headers"]) == {"sluice.query", "sluice.batch"}
        by_batch.setdefault(r["headers"]["sluice.batch"], []).append(json.loads(r["value"])["n"])
    assert {b: sorted(v) for b, v in by_batch.items()} == {"0": [1, 2], "1": [3]}
    assert all(r["key"] == "" for r in recs)  # no key column: null keys
    st = status(data)["q"]
    assert st["sink"] == "kafka" and st["guarantee"] == "at-least-once"
    assert st["lastError"] is None


def test_spark_columns(kc, tmp_path):
    """value, key, topic, partition and headers columns, as Spark's writer;
    other columns are not sent; the topic option overrides the column."""
    data = str(tmp_path / "data")
    schema = "value STRING, key STRING, topic STRING, partition INT, headers STRING, extra BIGINT"
    write_config(data, {"cols": query(schema, kafka(kc)),
                        "fixed": dict(query(schema, kafka(kc, topic=" other ")),
                                      source={"format": "json", "path": "ev2",
                                              "schema": schema})})
    rows = [{"value": "v1", "key": "k1", "topic": "events", "partition": 2,
             "headers": '{"trace":"t-1","empty":""}', "extra": 9},
            {"value": "v2", "key": "k2", "topic": "other", "partition": 1},
            {"value": "v3", "topic": "events"}]
    land(tmp_path, data, "a.json", rows)
    land(tmp_path, data, "b.json", rows, to="ev2")
    run(data)
    ev = records(kc, "events")
    other = records(kc, "other")
    by_value = {(r["topic"], r["value"]): r for r in ev + other}
    # "cols": the topic column; "fixed": every row to the topic option
    assert sorted(k for k in by_value if k[0] == "events") == [("events", "v1"), ("events", "v3")]
    assert sorted(r["value"] for r in other) == ["v1", "v2", "v2", "v3"]
    v1 = by_value[("events", "v1")]
    assert v1["partition"] == 2 and v1["key"] == "k1"
    assert v1["headers"]["trace"] == "t-1" and v1["headers"]["empty"] == ""
    assert v1["headers"]["sluice.batch"] == "0" and "sluice.query" in v1["headers"]
    assert by_value[("events", "v3")]["key"] == ""
    v2 = [r for r in other if r["value"] == "v2"]
    assert {r["partition"] for r in v2} == {1} and {r["key"] for r in v2} == {"k2"}
    # the two queries have their own checkpoint ids
    assert len({r["headers"]["sluice.query"] for r in other}) == 2


def test_bad_headers_and_null_topic(kc, tmp_path):
    """A headers value that is not a JSON object of strings, and a null
    topic without the topic option, fail the batch naming the row."""
    data = str(tmp_path / "data")
    write_config(data, {"q": query("value STRING, topic STRING, headers STRING", kafka(kc))})
    land(tmp_path, data, "a.json", [{"value": "a", "topic": "events", "headers": '{"k": 1}'}])
    run(data, expect=1)
    err = status(data)["q"]["lastError"]
    assert "row 0" in err and "headers column is not a JSON object" in err, err
    data2 = str(tmp_path / "data2")
    write_config(data2, {"q": query("value STRING, topic STRING", kafka(kc))})
    land(tmp_path, data2, "b.json", [{"value": "a", "topic": "events"}, {"value": "b"}])
    run(data2, expect=1)
    err = status(data2)["q"]["lastError"]
    assert "null topic present in the data (row 1)" in err, err


def test_key_column(kc, tmp_path):
    """keyColumn: the named column's text becomes the key (numbers as Spark
    casts them); the value is still the whole row."""
    data = str(tmp_path / "data")
    write_config(data, {"q": query("user STRING, n BIGINT",
                                   kafka(kc, topic="events", keyColumn="n"))})
    land(tmp_path, data, "a.json", [{"user": "a", "n": 41}, {"user": "b", "n": -2}, {"user": "c"}])
    run(data)
    got = sorted((r["key"], r["value"]) for r in records(kc, "events"))
    assert got == [("", '{"user":"c"}'), ("-2", '{"user":"b","n":-2}'),
                   ("41", '{"user":"a","n":41}')]


def test_rate_source_to_kafka(kc, tmp_path):
    """The rate source feeds the sink through an aggregation (its own value
    column is BIGINT, which Spark's sink refuses: checked too)."""
    data = str(tmp_path / "data")
    rate = {"format": "rate-micro-batch", "rowsPerBatch": 5}
    write_config(data, {"r": {"source": rate, "sink": kafka(kc, topic="events")}})
    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.returncode == 4 and "queries.r.sink.format: kafka: the value column is BIGINT" \
        in p.stderr, p.stderr
    write_config(data, {"r": {"source": rate,
                              "groupBy": {"window": {"column": "timestamp",
                                                     "duration": "1 second"}},
                              "aggregate": {"n": "count(*)", "top": "max(value)"},
                              "outputMode": "update",
                              "sink": kafka(kc, topic="events", keyColumn="top")}})
    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.returncode == 0, p.stderr
    recs = records(kc, "events")
    assert recs and all(r["key"] == str(json.loads(r["value"])["top"]) for r in recs)
    assert all("sluice.batch" in r["headers"] for r in recs)
    assert sum(json.loads(r["value"])["n"] for r in recs) >= 5


def test_at_least_once_by_default(kc, tmp_path):
    """Without transactional, a crash after the records are produced and
    before the batch's catalog commit produces them again (Spark's
    guarantee, declared as at-least-once)."""
    data = str(tmp_path / "data")
    write_config(data, {"q": query("user STRING, n BIGINT", kafka(kc, topic="events"))})
    land(tmp_path, data, "a.json", [{"user": "a", "n": 1}])
    run(data, expect=FAULT_EXIT, env={"SLUICE_FAULT": "engine.before_commit:1"})
    run(data)
    vals = [r["value"] for r in records(kc, "events")]
    assert vals == ['{"user":"a","n":1}'] * 2
    assert status(data)["q"]["guarantee"] == "at-least-once"


# ---- refusals -----------------------------------------------------------------

@pytest.mark.parametrize("sink,schema,field", [
    ({"topic": "t"}, None, "sink.kafka.bootstrap.servers"),
    ({"kafka.bootstrap.servers": "h:1", "topic": "t", "kafka.key.serializer": "x"}, None,
     "sink.kafka.key.serializer"),
    ({"kafka.bootstrap.servers": "h:1"}, None, "sink.topic"),
    ({"kafka.bootstrap.servers": "h:1", "transactional": True}, "topic STRING, n BIGINT",
     "sink.topic"),
    ({"kafka.bootstrap.servers": "h:1", "topic": "t"}, "value BIGINT", "sink.format"),
    ({"kafka.bootstrap.servers": "h:1", "topic": "t", "keyColumn": "zz"}, None, "sink.keyColumn"),
    ({"kafka.bootstrap.servers": "h:1", "topic": "t", "compression": "zstd"}, None,
     "sink.compression"),
    ({"kafka.bootstrap.servers": "h:1", "topic": "t", "transactional": "yes"}, None,
     "sink.transactional"),
    # librdkafka's own checks, at start too
    ({"kafka.bootstrap.servers": "h:1", "topic": "t", "kafka.lingr.ms": "5"}, None,
     "sink.kafka.lingr.ms"),
    ({"kafka.bootstrap.servers": "h:1", "topic": "t", "kafka.acks": "sometimes"}, None,
     "sink.kafka.acks"),
    ({"kafka.bootstrap.servers": "h:1", "topic": "t", "kafka.sasl.passwrd": "@env:X"}, None,
     "sink.kafka.sasl.passwrd"),
])
def test_refusals_name_the_field(tmp_path, sink, schema, field):
    data = str(tmp_path / "data")
    s = {"format": "kafka"}
    s.update(sink)
    write_config(data, {"q": query(schema or "user STRING, n BIGINT", s)})
    p = util.sluice("run", "--available-now", data, timeout=30)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert "queries.q." + field + ":" in p.stderr, p.stderr


def test_topic_change_refused(kc, tmp_path):
    """The topic cannot change between starts (CONNECTORS §1): refused naming sink.topic."""
    data = str(tmp_path / "data")
    write_config(data, {"q": query("user STRING", kafka(kc, topic="events"))})
    land(tmp_path, data, "a.json", [{"user": "a"}])
    run(data)
    write_config(data, {"q": query("user STRING", kafka(kc, topic="other"))})
    p = util.sluice("run", "--available-now", data, timeout=30)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert "queries.q.sink.topic" in p.stderr, p.stderr


def test_secret_needs_owned_config(kc, tmp_path):
    """A kafka password makes sluice.json a secret's holder: refused when
    others can write it, naming the field."""
    data = str(tmp_path / "data")
    write_config(data, {"q": query("user STRING", kafka(kc, topic="events", **{
        "kafka.sasl.password": "@env:KPASS"}))}, mode=0o666)
    p = util.sluice("run", "--available-now", data, timeout=30)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert "queries.q.sink.kafka.sasl.password" in p.stderr and "writable" in p.stderr


def test_secret_from_env_and_file_masked(kc, tmp_path):
    """@env: and @file: secrets are resolved for librdkafka and never shown:
    a missing variable names the field; a librdkafka error quoting the
    value shows ***."""
    data = str(tmp_path / "data")
    # an unset variable: the batch fails naming the field and the reference
    write_config(data, {"q": query("user STRING", kafka(kc, topic="events", **{
        "kafka.client.rack": "@env:SLUICE_TEST_UNSET_VAR"}))})
    land(tmp_path, data, "a.json", [{"user": "a"}])
    env = dict(os.environ)
    env.pop("SLUICE_TEST_UNSET_VAR", None)
    p = util.sluice("run", "--available-now", data, timeout=60, env=env)
    assert p.returncode == 1, (p.returncode, p.stderr)
    err = status(data)["q"]["lastError"]
    assert "sink.kafka.client.rack" in err and "SLUICE_TEST_UNSET_VAR" in err
    # a value librdkafka refuses, from a file: the error names the field, masks the value
    secret = tmp_path / "secret"
    secret.write_text("s3cr3t-value\n")
    write_config(data, {"q": query("user STRING", kafka(kc, topic="events", **{
        "kafka.acks": "@file:" + str(secret)}))})
    p = util.sluice("run", "--available-now", data, timeout=60)
    assert p.returncode == 1, (p.returncode, p.stderr)
    err = status(data)["q"]["lastError"]
    assert "sink.kafka.acks" in err and "s3cr3t-value" not in err, err
    assert "s3cr3t-value" not in p.stderr
    # resolved right, the batch goes through
    secret.write_text("all\n")
    run(data)
    assert [r["value"] for r in records(kc, "events")] == ['{"user":"a"}']


# ---- errors ---------------------------------------------------------------

def test_unknown_topic(kc, tmp_path):
    """A topic the cluster does not know: exit 1, lastError names it; once
    it exists the batch goes through once."""
    data = str(tmp_path / "data")
    write_config(data, {"q": query("user STRING", kafka(kc, topic="missing", **{
        "kafka.allow.auto.create.topics": "false",
        "kafka.topic.metadata.propagation.max.ms": "1000",
        "kafka.message.timeout.ms": "5000"}))})
    land(tmp_path, data, "a.json", [{"user": "a"}])
    kc.command("topicerr missing 3")  # UNKNOWN_TOPIC_OR_PART
    t0 = time.monotonic()
    run(data, expect=1)
    assert time.monotonic() - t0 < 30
    err = status(data)["q"]["lastError"]
    assert "batch 0" in err and "missing" in err and "nknown topic" in err, err
    kc.command("topicerr missing 0")
    run(data)
    assert [r["value"] for r in records(kc, "missing")] == ['{"user":"a"}']


def test_oversized_record(kc, tmp_path):
    """A record over message.max.bytes: exit 1, lastError says so and names
    the row; nothing of the batch commits."""
    data = str(tmp_path / "data")
    write_config(data, {"q": query("value STRING", kafka(kc, topic="events", **{
        "kafka.message.max.bytes": "2000"}))})
    land(tmp_path, data, "a.json", [{"value": "small"}, {"value": "x" * 5000}])
    run(data, expect=1)
    err = status(data)["q"]["lastError"]
    assert "batch 0" in err and "larger than message.max.bytes" in err and "row 1" in err, err
    assert status(data)["q"]["batch"] is None


def test_broker_error(kc, tmp_path):
    """Produce requests refused by the brokers (authorization failed): exit
    1 naming the broker's error; the retry after it clears commits."""
    data = str(tmp_path / "data")
    write_config(data, {"q": query("user STRING", kafka(kc, topic="events", **{
        "kafka.message.timeout.ms": "5000", "kafka.retries": "0"}))})
    land(tmp_path, data, "a.json", [{"user": "a"}])
    kc.command("err 0 " + " ".join(["29"] * 10))  # TOPIC_AUTHORIZATION_FAILED
    run(data, expect=1)
    err = status(data)["q"]["lastError"]
    assert "batch 0" in err and "events" in err and "uthoriz" in err, err
    kc.command("err 0 0")  # drains nothing: what is left fails more requests
    for _ in range(10):
        p = util.sluice("run", "--available-now", data, timeout=120)
        if p.returncode == 0:
            break
    assert p.returncode == 0, p.stderr
    assert status(data)["q"]["lastError"] is None


def test_brokers_down(kc, tmp_path):
    """All brokers down: the metadata request or the delivery fails; lastError says so."""
    data = str(tmp_path / "data")
    write_config(data, {"q": query("user STRING", kafka(kc, topic="events", **{
        "kafka.message.timeout.ms": "2000"}))})
    land(tmp_path, data, "a.json", [{"user": "a"}])
    for b in (1, 2, 3):
        kc.command("down %d" % b)
    run(data, expect=1)
    err = status(data)["q"]["lastError"]
    assert "batch 0" in err and "'events'" in err, err
    assert "transport failure" in err or "timed out" in err, err
    for b in (1, 2, 3):
        kc.command("up %d" % b)
    run(data)
    assert [r["value"] for r in records(kc, "events")] == ['{"user":"a"}']


def test_fenced_producer(kc, tmp_path):
    """The broker fences the producer at the transaction's commit: exit 1,
    lastError says fenced; the next start fences back in and the batch is
    produced once for read_committed readers."""
    data = str(tmp_path / "data")
    write_config(data, {"q": query("user STRING", kafka(kc, topic="tx", transactional=True))})
    land(tmp_path, data, "a.json", [{"user": "a"}])
    kc.command("err 26 90")  # EndTxn: PRODUCER_FENCED
    run(data, expect=1)
    err = status(data)["q"]["lastError"]
    assert "batch 0" in err and "fenced" in err.lower(), err
    run(data)
    recs = records(kc, "tx", read_committed=True)
    assert [r["value"] for r in recs] == ['{"user":"a"}']


# ---- exactly once across crashes -------------------------------------------

MIN = 60
T0 = 1_700_000_000


def iso(s):
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(s))


def pipeline(kc, topic):
    """landing -> dropDuplicates -> 10-minute windows per user -> kafka (transactional)."""
    return {"source": {"format": "json", "path": "ev", "maxFilesPerTrigger": 1,
                       "schema": "event_id STRING, user STRING, amount BIGINT, "
                                 "event_time TIMESTAMP"},
            "watermark": {"column": "event_time", "delay": "10 minutes"},
            "dropDuplicates": ["event_id", "event_time"],
            "groupBy": {"window": {"column": "event_time", "duration": "10 minutes"},
                        "columns": ["user"]},
            "aggregate": {"n": "count(*)", "total": "sum(amount)"},
            "outputMode": "append",
            "sink": kafka(kc, topic=topic, keyColumn="user", transactional=True)}


def land_events(tmp_path, data, files=10, seed=7):
    import random
    rnd = random.Random(seed)
    sent = []
    for b in range(files):
        rows = []
        for i in range(30):
            ev = {"event_id": "e%d-%d" % (b, i), "user": "u%d" % rnd.randrange(4),
                  "amount": rnd.randrange(100),
                  "event_time": iso(T0 + b * 6 * MIN + rnd.randrange(6 * MIN))}
            rows.append(ev)
        # duplicates of earlier events (same id and time), dropped by dropDuplicates
        rows += sent[-5:]
        sent += rows[:30]
        land(tmp_path, data, "f%02d.json" % b, rows)


def window_rows(recs):
    """The records' (window, user) -> (n, total), failing on any repeat."""
    out = {}
    for r in recs:
        v = json.loads(r["value"])
        k = (v["window"]["start"], v["user"])
        assert k not in out, "window %r written twice" % (k,)
        assert r["key"] == v["user"]
        out[k] = (v["n"], v["total"])
    return out


def test_exactly_once_across_crashes(kc, tmp_path):
    """The pipeline crashed (the process dies as by kill -9) on either side
    of the Kafka commit and of the catalog commit, over and over, then run
    to the end: read_committed sees every window once, as a run without
    crashes wrote it; every record is tagged; no batch is produced twice."""
    ref = str(tmp_path / "ref")
    write_config(ref, {"w": pipeline(kc, "ref")})
    land_events(tmp_path, ref)
    run(ref)
    want = window_rows(records(kc, "ref", read_committed=True))
    assert len(want) > 10

    data = str(tmp_path / "data")
    write_config(data, {"w": pipeline(kc, "tx")})
    land_events(tmp_path, data)
    # each fault at its first pass in a run, in turn, until a run finishes:
    # every run but those dying before the catalog commit commits a batch
    names = ["kafka.before_commit", "kafka.after_commit", "engine.after_commit",
             "engine.before_commit"]
    crashes = dict.fromkeys(names, 0)
    for i in range(80):
        name = names[i % len(names)]
        p = util.sluice("run", "--available-now", data, timeout=120,
                        env=dict(os.environ, SLUICE_FAULT=name + ":1"))
        assert p.returncode in (0, FAULT_EXIT), (name, p.returncode, p.stderr)
        if p.returncode == 0:
            break
        crashes[name] += 1
    assert p.returncode == 0
    run(data)
    assert all(n >= 2 for n in crashes.values()), crashes
    recs = records(kc, "tx", read_committed=True)
    assert window_rows(recs) == want
    qids = {r["headers"].get("sluice.query") for r in recs}
    assert len(qids) == 1 and UUID.match(qids.pop())
    # each batch's records are one production: the windows a batch closed,
    # as many as the run without crashes wrote in that batch
    ref_batches = {}
    for r in records(kc, "ref", read_committed=True):
        ref_batches.setdefault(r["headers"]["sluice.batch"], set()).add(r["value"])
    got_batches = {}
    for r in recs:
        got_batches.setdefault(r["headers"]["sluice.batch"], []).append(r["value"])
    assert {b: sorted(v) for b, v in got_batches.items()} == \
        {b: sorted(v) for b, v in ref_batches.items()}
    st = status(data)["w"]
    assert st["guarantee"] == "exactly-once" and st["lastError"] is None


def test_replay_of_committed_batch_not_produced(kc, tmp_path):
    """Killed between the Kafka commit and the catalog commit: the replay's
    read_committed scan finds the batch's records and commits without
    producing (the topic's end offsets do not move)."""
    data = str(tmp_path / "data")
    write_config(data, {"q": query("user STRING", kafka(kc, topic="tx", transactional=True))})
    land(tmp_path, data, "a.json", [{"user": "a"}, {"user": "b"}])
    run(data, expect=FAULT_EXIT, env={"SLUICE_FAULT": "kafka.after_commit:1"})
    before = records(kc, "tx", read_committed=True)
    assert len(before) == 2
    run(data)
    assert records(kc, "tx") == before
    assert status(data)["q"]["batch"] == 0


def test_real_broker_aborted_batch_invisible(tmp_path):
    """Needs a real broker (KAFKA_BOOTSTRAP): the mock shows aborted
    transactions to read_committed readers. Killed before the Kafka commit,
    the batch's open transaction is aborted by the next start's fencing and
    read_committed sees the batch exactly once."""
    bootstrap = kafka_util.real_broker()
    if not bootstrap:
        pytest.skip("skipped: no broker")
    topic = "sluice-test-%d-%d" % (os.getpid(), int(time.time()))
    data = str(tmp_path / "data")
    write_config(data, {"q": query("user STRING", {
        "format": "kafka", "kafka.bootstrap.servers": bootstrap, "topic": topic,
        "transactional": True})})
    land(tmp_path, data, "a.json", [{"user": "a"}, {"user": "b"}])
    run(data, expect=FAULT_EXIT, env={"SLUICE_FAULT": "kafka.before_commit:1"})
    run(data)
    p = subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e",
                        "-q", "-X", "isolation.level=read_committed", "-f", "%s\\n"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.decode().split()) == ['{"user":"a"}', '{"user":"b"}']


# ---- in a mount ---------------------------------------------------------------

@util.fuse_test_marker()
def test_mount_retries_then_delivers_once(kc, mounts, tmp_path):
    """In a mount a Kafka error is the query's lastError and the batch is
    retried with backoff until it goes through, once; the progress report's
    sink names the guarantee."""
    data = str(tmp_path / "data")
    write_config(data, {"q": query("user STRING", kafka(kc, topic="tx", transactional=True))})
    kc.command("topicerr tx 3")  # UNKNOWN_TOPIC_OR_PART
    m = mounts.new(data=data)
    m.allow(r"retrying in|unknown topic|kafka")
    os.mkdir(m.inp("ev"))
    with open(m.inp("ev", "a.json"), "w") as f:
        f.write('{"user":"a"}\n{"user":"b"}\n')

    def last_error():
        with open(os.path.join(m.mnt, "status", "q.json")) as f:
            return (json.load(f) or {}).get("lastError") or ""
    util.wait_for(lambda: "nknown topic" in last_error(), 30, "the error in status")
    assert "batch 0" in last_error() and "'tx'" in last_error(), last_error()
    time.sleep(1.5)  # a retry or two, still failing
    kc.command("topicerr tx 0")
    util.wait_for(lambda: "q batch=0" in util.sluice("status", data).stdout, 60,
                  "the batch committed")
    with open(os.path.join(m.mnt, "status", "q.json")) as f:
        st = json.load(f)
    text = json.dumps(st)
    assert "KafkaSink[tx, exactly-once]" in text, text
    assert not st.get("lastError")
    m.unmount()
    recs = records(kc, "tx", read_committed=True)
    assert sorted(r["value"] for r in recs) == ['{"user":"a"}', '{"user":"b"}']


@util.fuse_test_marker()
def test_unmount_aborts_open_transaction(kc, mounts, tmp_path):
    """An unmount while a transactional batch waits on the brokers aborts
    its transaction, promptly; the next start produces the batch, and
    read_committed sees it once."""
    data = str(tmp_path / "data")
    write_config(data, {"q": query("user STRING", kafka(kc, topic="tx", transactional=True))})
    kc.command("slow 0 4000 3")  # Produce answered 4 s late
    m = mounts.new(data=data)
    m.allow(r"kafka|abandoned|retrying in")
    os.mkdir(m.inp("ev"))
    with open(m.inp("ev", "a.json"), "w") as f:
        f.write('{"user":"a"}\n{"user":"b"}\n')
    time.sleep(1.5)  # the batch is producing, its acknowledgements delayed
    t0 = time.monotonic()
    m.unmount()
    assert time.monotonic() - t0 < 10
    assert "aborted the transaction of batch 0" in m.stderr(), m.stderr()
    assert "q batch=-" in util.sluice("status", data).stdout
    run(data)
    recs = records(kc, "tx", read_committed=True)
    assert sorted(r["value"] for r in recs) == ['{"user":"a"}', '{"user":"b"}']
