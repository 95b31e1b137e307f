"""The kafka source (CONNECTORS §7, SPARK-CONNECTORS §1) against librdkafka's
mock cluster in a helper process (kafka_util.MockCluster), with kcat as the
producer: Spark's strategies, startingOffsets forms, the maxOffsetsPerTrigger
split, min+maxTriggerDelay, refusals of kafka.* keys, the schema and
headers, valueFormat json through the operators, offsets/N and sources/0/0
as Spark writes them, progress metrics, status backlog, secrets, and every
record exactly once in out/ across kill -9; failOnDataLoss on the mock's
trim of a partition's oldest records. The claims the mock cannot show (a
partition added to a running topic, records deleted by the admin tools)
run only against a real broker named by KAFKA_BOOTSTRAP."""

import base64
import json
import os
import random
import shutil
import subprocess
import time

import pytest

import kafka_util
import util

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(kafka_util.missing_reason() is not None,
                                 reason=str(kafka_util.missing_reason()))]


@pytest.fixture
def clusters():
    """Mock clusters started by the test, stopped at teardown."""
    started = []

    def start(topics, brokers=3):
        kc = kafka_util.MockCluster(topics=topics, brokers=brokers).__enter__()
        started.append(kc)
        return kc
    yield start
    for kc in started:
        kc.stop()


def write_config(data, queries, mode=0o600):
    os.makedirs(data, exist_ok=True)
    path = os.path.join(data, "sluice.json")
    with open(path, "w") as f:
        json.dump({"queries": queries}, f)
    os.chmod(path, mode)


def kafka(kc, **opts):
    src = {"format": "kafka", "kafka.bootstrap.servers": kc.bootstrap}
    src.update(opts)
    return src


def run(data, expect=0, env=None, timeout=120):
    p = util.sluice("run", "--available-now", data, timeout=timeout, env=env)
    assert p.returncode == expect, (p.returncode, p.stdout, p.stderr)
    return p


def produce(kc, topic, values, partition=None, key=None, headers=()):
    args = ["-P", "-t", topic, "-X", "acks=all"]
    if partition is not None:
        args += ["-p", str(partition)]
    if key is not None:
        args += ["-k", key]
    for h in headers:
        args += ["-H", h]
    kc.kcat(*args, input="".join(v + "\n" for v in values).encode())


def out_rows(mnt, name):
    base = os.path.join(mnt, "out", name)
    if not os.path.isdir(base):
        return []
    rows = []
    for n in sorted(util.list_out(base)):
        with open(os.path.join(base, n), "rb") as f:
            rows += [json.loads(l) for l in f.read().splitlines()]
    return rows


def read(mnt, *path, mode="r"):
    with open(os.path.join(mnt, *path), mode) as f:
        return f.read()


def offsets_of(mnt, q, n):
    """offsets/N's source line, parsed, and its raw text."""
    text = read(mnt, "checkpoint", q, "offsets", str(n))
    lines = text.split("\n")
    assert lines[0] == "v1" and json.loads(lines[1])["conf"] == {}, text
    return json.loads(lines[2]), lines[2]


def reports(mnt, q):
    return [json.loads(l) for l in read(mnt, "status", q + ".jsonl").splitlines()]


def status(data, name):
    p = util.sluice("status", "--json", data)
    assert p.returncode == 0, p.stderr
    for q in json.loads(p.stdout)["queries"]:
        if q["name"] == name:
            return q
    raise AssertionError("no query %s in %s" % (name, p.stdout))


def b64(s):
    return base64.b64encode(s.encode()).decode()


# -- schema, strategies, offsets ---------------------------------------------------

def test_subscribe_earliest_gives_sparks_columns_and_offsets(mounts, tmp_path, clusters):
    kc = clusters({"events": 3})
    produce(kc, "events", ["a0", "a1", "a2"], partition=0, key="k")
    produce(kc, "events", ["b0"], partition=2)
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribe="events",
                                               startingOffsets="earliest")}})
    p = run(data)
    assert "k: 1 batches, 4 rows" in p.stdout, p.stdout
    m = mounts.new(data=data)
    rows = out_rows(m.mnt, "k")
    assert [(r["partition"], r["offset"]) for r in rows] == [(0, 0), (0, 1), (0, 2), (2, 0)]
    r0 = rows[0]
    # Spark's columns in order; BINARY key and value as base64; a null key left out
    assert list(r0) == ["key", "value", "topic", "partition", "offset", "timestamp",
                        "timestampType"]
    assert (r0["key"], r0["value"], r0["topic"], r0["timestampType"]) == \
        (b64("k"), b64("a0"), "events", 0)
    assert "key" not in rows[3] and rows[3]["value"] == b64("b0")
    assert r0["timestamp"].endswith("Z")
    # offsets/0 holds Spark's JSON: the next offset of every partition
    off, raw = offsets_of(m.mnt, "k", 0)
    assert raw == '{"events":{"0":3,"1":0,"2":1}}'
    # sources/0/0: KafkaSourceInitialOffsetWriter's bytes
    assert read(m.mnt, "checkpoint", "k", "sources", "0", "0", mode="rb") == \
        b'\x00v1\n{"events":{"0":0,"1":0,"2":0}}'
    rep = reports(m.mnt, "k")[0]["sources"][0]
    assert rep["description"] == "KafkaV2[Subscribe[events]]"
    assert rep["startOffset"] is None and rep["endOffset"] == off
    assert rep["metrics"] == {"avgOffsetsBehindLatest": "0.0",
                              "maxOffsetsBehindLatest": "0",
                              "minOffsetsBehindLatest": "0"}
    m.unmount()
    # nothing new: no batch; new records: a batch from where it stopped
    p = run(data)
    assert "k: 0 batches" in p.stdout, p.stdout
    produce(kc, "events", ["a3"], partition=0)
    run(data)
    m = mounts.new(data=data)
    assert [(r["partition"], r["offset"]) for r in out_rows(m.mnt, "k")][-1] == (0, 3)
    assert offsets_of(m.mnt, "k", 1)[1] == '{"events":{"0":4,"1":0,"2":1}}'
    assert reports(m.mnt, "k")[-1]["sources"][0]["startOffset"] == off
    m.unmount()


def test_starting_latest_skips_what_was_there(mounts, tmp_path, clusters):
    """The default, latest: resolved once, at the first planning, and kept in
    sources/0/0 even without a batch, so records produced before the next
    start are read."""
    kc = clusters({"t": 2})
    produce(kc, "t", ["old"], partition=0)
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribe="t")}})
    assert "k: 0 batches" in run(data).stdout
    produce(kc, "t", ["new0"], partition=0)
    produce(kc, "t", ["new1"], partition=1)
    assert "k: 1 batches, 2 rows" in run(data).stdout
    m = mounts.new(data=data)
    assert sorted(base64.b64decode(r["value"]).decode() for r in out_rows(m.mnt, "k")) == \
        ["new0", "new1"]
    assert read(m.mnt, "checkpoint", "k", "sources", "0", "0", mode="rb") == \
        b'\x00v1\n{"t":{"0":1,"1":0}}'
    m.unmount()


def test_starting_offsets_json_and_assign(mounts, tmp_path, clusters):
    """assign reads only its partitions; JSON startingOffsets: a number, -2
    (earliest) and -1 (latest) per partition."""
    kc = clusters({"t": 3})
    for part in range(3):
        produce(kc, "t", ["p%d-%d" % (part, i) for i in range(4)], partition=part)
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(
        kc, assign={"t": [0, 1, 2]},
        startingOffsets={"t": {"0": 2, "1": -2, "2": -1}})}})
    run(data)
    m = mounts.new(data=data)
    got = sorted(base64.b64decode(r["value"]).decode() for r in out_rows(m.mnt, "k"))
    assert got == ["p0-2", "p0-3", "p1-0", "p1-1", "p1-2", "p1-3"]
    assert read(m.mnt, "status", "k.json") and \
        reports(m.mnt, "k")[0]["sources"][0]["description"] == "KafkaV2[Assign[t-0, t-1, t-2]]"
    m.unmount()
    data2 = str(tmp_path / "data2")
    write_config(data2, {"k": {"source": kafka(kc, assign='{"t":[1]}',
                                                startingOffsets="earliest",
                                                valueFormat="string")}})
    run(data2)
    m = mounts.new(data=data2)
    assert [r["value"] for r in out_rows(m.mnt, "k")] == ["p1-%d" % i for i in range(4)]
    assert offsets_of(m.mnt, "k", 0)[1] == '{"t":{"1":4}}'
    m.unmount()


def test_starting_offsets_json_must_name_every_partition(tmp_path, clusters):
    """Spark's assert: specific offsets name every partition the strategy reads."""
    kc = clusters({"t": 2})
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribe="t",
                                               startingOffsets={"t": {"0": -2}})}})
    p = util.sluice("run", "--available-now", data)
    assert p.returncode != 0
    assert "queries.k.source.startingOffsets: if startingOffsets contains specific offsets, " \
        "you must specify all TopicPartitions: t-1 is missing" in p.stderr, p.stderr


def test_subscribe_pattern_matches_whole_names(mounts, tmp_path, clusters):
    kc = clusters({"ev-a": 1, "ev-b": 1, "xev-c": 1})
    for t in ("ev-a", "ev-b", "xev-c"):
        produce(kc, t, [t])
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribePattern="ev-.*",
                                               startingOffsets="earliest",
                                               valueFormat="string")}})
    run(data)
    m = mounts.new(data=data)
    assert sorted(r["value"] for r in out_rows(m.mnt, "k")) == ["ev-a", "ev-b"]
    assert reports(m.mnt, "k")[0]["sources"][0]["description"] == \
        "KafkaV2[SubscribePattern[ev-.*]]"
    m.unmount()


def test_new_topic_of_a_pattern_is_read_from_earliest(mounts, tmp_path, clusters):
    """Partitions that appear while a query runs start at their earliest
    offset, whatever startingOffsets says (Spark's rule): the mock cannot add
    partitions to a topic, but a new topic matching subscribePattern brings
    new partitions too (the mock creates it, 4 partitions, on first use)."""
    kc = clusters({"ev-a": 1})
    produce(kc, "ev-a", ["before"])
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribePattern="ev-.*",
                                               valueFormat="string")}})
    m = mounts.new(data=data)
    util.wait_for(lambda: os.path.exists(m.p("checkpoint", "k", "sources", "0", "0")), 20,
                  "the initial offsets")
    produce(kc, "ev-a", ["after"])
    produce(kc, "ev-new", ["n0", "n1"], partition=2)
    util.wait_for(lambda: sorted(r["value"] for r in out_rows(m.mnt, "k")) ==
                  ["after", "n0", "n1"], 30, "the new topic's records")
    last = offsets_of(m.mnt, "k", len(reports(m.mnt, "k")) - 1)[0]
    assert last["ev-new"] == {"0": 0, "1": 0, "2": 2, "3": 0}
    m.unmount()


def test_offsets_that_move_without_records_make_a_batch_of_none(mounts, tmp_path, clusters):
    """New empty partitions change the offsets without a record: Spark runs a
    batch of no rows that logs them, so the next batch starts there."""
    kc = clusters({"ev-a": 1})
    produce(kc, "ev-a", ["a"])
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribePattern="ev-.*",
                                               startingOffsets="earliest")}})
    m = mounts.new(data=data)
    util.wait_for(lambda: len(out_rows(m.mnt, "k")) == 1, 20, "the first record")
    kc.kcat("-L", "-t", "ev-empty")  # the mock creates the topic, 4 empty partitions
    util.wait_for(lambda: len(reports(m.mnt, "k")) == 2, 20, "a batch of no rows")
    rep = reports(m.mnt, "k")[1]
    assert rep["numInputRows"] == 0
    assert rep["sources"][0]["endOffset"] == {"ev-a": {"0": 1},
                                              "ev-empty": {"0": 0, "1": 0, "2": 0, "3": 0}}
    time.sleep(0.5)
    assert len(reports(m.mnt, "k")) == 2, "the batch of no rows repeated"
    m.unmount()


def test_strategy_change_between_starts_is_refused(tmp_path, clusters):
    kc = clusters({"t": 1, "u": 1})
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribe="t")}})
    run(data)
    write_config(data, {"k": {"source": kafka(kc, subscribe="t,u")}})
    p = run(data, expect=4)
    assert "queries.k.source.subscribe" in p.stderr, p.stderr
    write_config(data, {"k": {"source": kafka(kc, assign={"t": [0]})}})
    p = run(data, expect=4)
    assert "queries.k.source.assign" in p.stderr, p.stderr


# -- admission control -------------------------------------------------------------

def test_max_offsets_per_trigger_split_as_spark(mounts, tmp_path, clusters):
    """Spark's test vector: partitions holding 101, 11 and 1 records, limit 10:
    the first batch takes 8, 1 and 1 ("don't starve small partitions")."""
    kc = clusters({"t": 3})
    produce(kc, "t", ["x%d" % i for i in range(101)], partition=0)
    produce(kc, "t", ["y%d" % i for i in range(11)], partition=1)
    produce(kc, "t", ["z0"], partition=2)
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribe="t", startingOffsets="earliest",
                                               maxOffsetsPerTrigger=10)}})
    p = run(data)
    assert "113 rows" in p.stdout, p.stdout
    m = mounts.new(data=data)
    assert offsets_of(m.mnt, "k", 0)[0] == {"t": {"0": 8, "1": 1, "2": 1}}
    assert offsets_of(m.mnt, "k", 1)[0] == {"t": {"0": 17, "1": 2, "2": 1}}
    reps = reports(m.mnt, "k")
    assert reps[0]["numInputRows"] == 10
    # Spark's reportLatestOffset: the latest offsets the batch was planned against
    assert reps[0]["sources"][0]["latestOffset"] == {"t": {"0": 101, "1": 11, "2": 1}}
    # behind latest after batch 0: 93, 10 and 0 offsets
    assert reps[0]["sources"][0]["metrics"] == {"avgOffsetsBehindLatest": "34.333333333333336",
                                                "maxOffsetsBehindLatest": "93",
                                                "minOffsetsBehindLatest": "0"}
    rows = out_rows(m.mnt, "k")
    assert len(rows) == 113 and len({(r["partition"], r["offset"]) for r in rows}) == 113
    m.unmount()


@pytest.mark.allow_stderr(r"trigger once is deprecated")
def test_trigger_once_takes_everything_in_one_batch(mounts, tmp_path, clusters):
    """Spark's Trigger.Once ignores maxOffsetsPerTrigger: one batch."""
    kc = clusters({"t": 1})
    produce(kc, "t", ["r%d" % i for i in range(30)])
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribe="t", startingOffsets="earliest",
                                               maxOffsetsPerTrigger=10),
                              "trigger": {"once": True}}})
    m = mounts.new(data=data)
    util.wait_for(lambda: len(out_rows(m.mnt, "k")) == 30, 20, "30 rows")
    assert [r["numInputRows"] for r in reports(m.mnt, "k")] == [30]
    m.unmount()


def test_min_offsets_waits_for_max_trigger_delay(mounts, tmp_path, clusters):
    """minOffsetsPerTrigger holds a batch back until enough records are there,
    or until maxTriggerDelay has passed since the last batch."""
    kc = clusters({"t": 1})
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribe="t", startingOffsets="earliest",
                                               minOffsetsPerTrigger=5,
                                               maxTriggerDelay="4s",
                                               valueFormat="string")}})
    produce(kc, "t", ["a"])
    m = mounts.new(data=data)
    # the first asking always fires
    util.wait_for(lambda: len(out_rows(m.mnt, "k")) == 1, 20, "the first batch")
    t0 = time.monotonic()
    produce(kc, "t", ["b", "c"])
    time.sleep(1.5)
    assert len(out_rows(m.mnt, "k")) == 1, "2 < minOffsetsPerTrigger made a batch early"
    util.wait_for(lambda: len(out_rows(m.mnt, "k")) == 3, 20, "the delayed batch")
    assert time.monotonic() - t0 >= 2.5
    # enough records: at once
    t1 = time.monotonic()
    produce(kc, "t", ["d%d" % i for i in range(6)])
    util.wait_for(lambda: len(out_rows(m.mnt, "k")) == 9, 20, "a batch of 6")
    assert time.monotonic() - t1 < 3.5
    m.unmount()


# -- options refused and warned ----------------------------------------------------

@pytest.mark.parametrize("key", ["auto.offset.reset", "key.deserializer", "value.deserializer",
                                 "enable.auto.commit", "interceptor.classes"])
def test_sparks_refused_kafka_keys_name_the_key(tmp_path, key):
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": {"format": "kafka", "subscribe": "t",
                                         "kafka.bootstrap.servers": "127.0.0.1:1",
                                         "kafka." + key: "x"}}})
    p = util.sluice("run", "--available-now", data)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert "queries.k.source.kafka.%s: Kafka option '%s' is not supported" % (key, key) \
        in p.stderr, p.stderr


def test_option_errors_name_the_field(tmp_path):
    data = str(tmp_path / "data")
    cases = [
        ({"subscribe": "t", "assign": {"t": [0]}}, "queries.k.source.subscribe: only one of"),
        ({}, "queries.k.source: one of the options 'assign', 'subscribe', 'subscribePattern'"),
        ({"subscribe": "t", "schema": "a INT"}, "queries.k.source.schema: the kafka format has "
                                                "a fixed schema"),
        ({"subscribe": "t", "minOffsetsPerTrigger": 9, "maxOffsetsPerTrigger": 3},
         "queries.k.source.minOffsetsPerTrigger"),
        ({"assign": "t"}, "queries.k.source.assign: expected a JSON object"),
        ({"subscribe": "t", "startingOffsets": {"t": {"0": -5}}},
         "queries.k.source.startingOffsets"),
    ]
    for opts, want in cases:
        src = {"format": "kafka", "kafka.bootstrap.servers": "127.0.0.1:1"}
        src.update(opts)
        write_config(data, {"k": {"source": src}})
        p = util.sluice("run", "--available-now", data)
        assert p.returncode == 4 and want in p.stderr, (opts, p.returncode, p.stderr)


def test_kafka_values_go_to_librdkafka(mounts, tmp_path, clusters):
    """kafka.* values reach librdkafka: read_committed is taken (the mock
    has no aborted transactions to hide), a value it refuses is named in
    lastError."""
    kc = clusters({"t": 1})
    produce(kc, "t", ["a"])
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribe="t", startingOffsets="earliest",
                                               valueFormat="string",
                                               **{"kafka.isolation.level": "read_committed"})}})
    assert "1 rows" in run(data).stdout
    write_config(data, {"k": {"source": kafka(kc, subscribe="t",
                                               **{"kafka.isolation.level": "bogus"})}})
    p = util.sluice("run", "--available-now", data)
    assert p.returncode == 1
    want = 'queries.k.source.kafka.isolation.level: Invalid value "bogus"'
    assert want in p.stderr, p.stderr
    assert want in status(data, "k")["lastError"]


def test_group_id_is_accepted_with_sparks_warning(mounts, tmp_path, clusters):
    kc = clusters({"t": 1})
    produce(kc, "t", ["a"])
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribe="t", startingOffsets="earliest",
                                               **{"kafka.group.id": "mine"})}})
    p = run(data)
    assert "1 rows" in p.stdout
    assert "kafka.group.id is set" in p.stderr, p.stderr
    # the source never commits: the group has no offsets in Kafka
    groups = kc.kcat("-L", "-J").decode()
    assert "mine" not in groups or '"committed"' not in groups


# -- headers, valueFormat ----------------------------------------------------------

def test_include_headers(mounts, tmp_path, clusters):
    kc = clusters({"t": 1})
    produce(kc, "t", ["with"], headers=["h1=v1", "h2=\x01"])
    produce(kc, "t", ["without"])
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribe="t", startingOffsets="earliest",
                                               includeHeaders=True)}})
    run(data)
    m = mounts.new(data=data)
    rows = out_rows(m.mnt, "k")
    assert list(rows[0])[-1] == "headers"
    assert json.loads(rows[0]["headers"]) == [{"key": "h1", "value": b64("v1")},
                                              {"key": "h2", "value": b64("\x01")}]
    assert "headers" not in rows[1]  # null: no headers
    m.unmount()


def test_value_format_json_feeds_dedup_watermark_and_windows(mounts, tmp_path, clusters):
    kc = clusters({"ev": 2})
    recs = [{"id": 1, "ts": "2026-01-01T00:00:01Z", "n": 1},
            {"id": 2, "ts": "2026-01-01T00:00:02Z", "n": 2},
            {"id": 1, "ts": "2026-01-01T00:00:03Z", "n": 3},   # a duplicate id
            {"id": 3, "ts": "2026-01-01T00:00:15Z", "n": 4}]
    produce(kc, "ev", [json.dumps(r) for r in recs[:2]], partition=0)
    produce(kc, "ev", [json.dumps(r) for r in recs[2:]], partition=1)
    produce(kc, "ev", ["not json"], partition=1)
    data = str(tmp_path / "data")
    schema = "id BIGINT, ts TIMESTAMP, n BIGINT"
    write_config(data, {
        "dedup": {"source": kafka(kc, subscribe="ev", startingOffsets="earliest",
                                   valueFormat="json", schema=schema,
                                   mode="DROPMALFORMED"),
                  "watermark": {"column": "ts", "delay": "1 second"},
                  "dropDuplicates": ["id"]},
        "win": {"source": kafka(kc, subscribe="ev", startingOffsets="earliest",
                                 valueFormat="json", schema=schema),
                "watermark": {"column": "ts", "delay": "0 seconds"},
                "groupBy": {"window": {"column": "ts", "duration": "10 seconds"}},
                "aggregate": {"c": "count(*)", "s": "sum(n)"}}})
    run(data)
    m = mounts.new(data=data)
    ded = out_rows(m.mnt, "dedup")
    assert sorted(r["id"] for r in ded) == [1, 2, 3]
    win = out_rows(m.mnt, "win")
    # the window [0 s, 10 s) closed when 15 s came; the malformed record is a row of nulls
    first = [r for r in win if r["window"]["start"].startswith("2026-01-01T00:00:00")]
    assert len(first) == 1 and first[0]["c"] == 3 and first[0]["s"] == 6, win
    assert reports(m.mnt, "dedup")[0]["numInputRows"] == 5
    m.unmount()


def test_fail_on_data_loss_when_retention_trimmed_the_offsets(mounts, tmp_path, clusters):
    """The mock trims a partition's oldest records past about 5 MiB of log:
    retention in small. Offsets a query still needs that left the log stop
    it, naming topic, partition and the lost range (failOnDataLoss true);
    with false the gap is skipped, logged and counted."""
    kc = clusters({"t": 1})
    produce(kc, "t", ["a%d" % i for i in range(10)], partition=0)
    data = str(tmp_path / "data")
    src = kafka(kc, subscribe="t", startingOffsets="earliest", valueFormat="string")
    write_config(data, {"k": {"source": src}})
    assert "10 rows" in run(data).stdout
    big = "x" * 1000
    for chunk in range(4):
        produce(kc, "t", ["b%05d%s" % (chunk * 3000 + i, big) for i in range(3000)], partition=0)
    lo = int(kc.kcat("-Q", "-t", "t:0:-2").decode().split("offset")[1])
    assert lo > 10, "the mock kept every record: no retention to show"
    p = util.sluice("run", "--available-now", data)
    assert p.returncode == 1, (p.returncode, p.stderr)
    want = "kafka: topic 't' partition 0: offsets 10 to %d are gone" % (lo - 1)
    assert want in p.stderr, p.stderr
    assert want in status(data, "k")["lastError"]
    src["failOnDataLoss"] = False
    write_config(data, {"k": {"source": src}})
    p = run(data)
    assert "offsets 10 to %d are gone" % (lo - 1) in p.stderr  # logged, not fatal
    m = mounts.new(data=data)
    rows = out_rows(m.mnt, "k")
    assert [r["offset"] for r in rows] == list(range(10)) + list(range(lo, 12010))
    rep = reports(m.mnt, "k")[-1]
    assert rep["sources"][0]["metrics"]["dataLoss"] == str(lo - 10)
    m.unmount()


def test_value_format_json_failfast_names_the_record(tmp_path, clusters):
    kc = clusters({"ev": 1})
    produce(kc, "ev", ['{"id": 1}', '{"id": "one"}'])
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribe="ev", startingOffsets="earliest",
                                               valueFormat="json", schema="id BIGINT",
                                               mode="FAILFAST")}})
    p = util.sluice("run", "--available-now", data)
    assert p.returncode == 1
    assert "kafka: ev-0 offset 1: " in p.stderr and "(mode FAILFAST)" in p.stderr, p.stderr


# -- progress, status, secrets -----------------------------------------------------

def test_status_shows_offsets_behind_latest(mounts, tmp_path, clusters):
    kc = clusters({"t": 2})
    produce(kc, "t", ["a%d" % i for i in range(30)], partition=0)
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribe="t", startingOffsets="earliest",
                                               maxOffsetsPerTrigger=10),
                              "trigger": {"processingTime": "1 hour"}}})
    m = mounts.new(data=data)
    util.wait_for(lambda: len(out_rows(m.mnt, "k")) == 10, 20, "one batch of 10")
    st = util.wait_for(lambda: status(data, "k")["backlog"] == {"offsets": 20} and
                       status(data, "k"), 10, "a backlog of 20 offsets")
    assert st["backlog"] == {"offsets": 20}
    plain = util.sluice("status", data).stdout
    assert "backlog=20:offsets" in plain, plain
    rep = reports(m.mnt, "k")[0]
    assert rep["backlog"] == {"offsets": 20}
    assert rep["sources"][0]["metrics"]["maxOffsetsBehindLatest"] == "20"
    m.unmount()


def test_secrets_are_masked_and_need_a_private_config(tmp_path, clusters):
    kc = clusters({"t": 1})
    data = str(tmp_path / "data")
    secret = "s3cr3t-Pa55"
    pwfile = tmp_path / "pw"
    pwfile.write_text(secret + "\n")
    src = kafka(kc, subscribe="t", **{"kafka.security.protocol": "sasl_plaintext",
                                      "kafka.sasl.mechanisms": "PLAIN",
                                      "kafka.sasl.username": "u",
                                      "kafka.sasl.password": secret,
                                      "kafka.socket.timeout.ms": "2000"})
    # a config that holds a secret must be the user's and not writable by others
    write_config(data, {"k": {"source": src}}, mode=0o664)
    p = util.sluice("run", "--available-now", data)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert "queries.k.source.kafka.sasl.password" in p.stderr and "chmod go-w" in p.stderr
    assert secret not in p.stderr
    # @file: and @env: references are resolved, and never printed
    for ref, env in (("@file:%s" % pwfile, None),
                     ("@env:KPW", dict(os.environ, KPW=secret))):
        src["kafka.sasl.password"] = ref
        write_config(data, {"k": {"source": src}})
        p = util.sluice("run", "--available-now", data, env=env, timeout=60)
        out = p.stdout + p.stderr + util.sluice("status", "--json", data).stdout
        assert secret not in out, out
    src["kafka.sasl.password"] = "@env:NOT_SET_ANYWHERE"
    write_config(data, {"k": {"source": src}})
    p = util.sluice("run", "--available-now", data)
    assert p.returncode != 0 and "NOT_SET_ANYWHERE is not set" in p.stderr, p.stderr


# -- crashes -----------------------------------------------------------------------

class Producer:
    """Numbered records into a topic's partitions, in bursts, from a thread."""

    def __init__(self, kc, topic, parts, total):
        import threading
        self.kc, self.topic, self.parts, self.total = kc, topic, parts, total
        self.sent = 0
        self.t = threading.Thread(target=self._main, daemon=True)
        self.t.start()

    def _main(self):
        while self.sent < self.total:
            n = min(50, self.total - self.sent)
            vals = ["%d" % (self.sent + i) for i in range(n)]
            produce(self.kc, self.topic, vals, partition=(self.sent // 50) % self.parts)
            self.sent += n
            time.sleep(0.05)

    def join(self):
        self.t.join(timeout=120)


FAULTS = ["engine.after_offsets", "engine.before_commit", "engine.after_commit"]


def test_kill9_every_record_exactly_once(mounts, tmp_path, clusters):
    """The Kafka source into the file sink while sluice is killed (kill -9 at
    seeded random moments, and exits at the fault points around the batch's
    offsets and commit): every record comes out exactly once."""
    rnd = random.Random(1407)
    kc = clusters({"t": 3})
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribe="t", startingOffsets="earliest",
                                               maxOffsetsPerTrigger=40,
                                               valueFormat="string")}})
    total = 3000
    prod = Producer(kc, "t", 3, total)
    faults = util.faults_compiled()
    plan = ["kill"] * 6 + (FAULTS if faults else [])
    rnd.shuffle(plan)
    extra = []  # records produced for the fault points
    for what in plan:
        if what == "kill":
            m = mounts.new(data=data)
            time.sleep(rnd.uniform(0.2, 1.2))
            m.kill9()
        else:
            # records enough for the point's Nth pass, even once the producer is done
            more = ["%d" % (1000000 + len(extra) + i) for i in range(300)]
            produce(kc, "t", more, partition=len(extra) // 300 % 3)
            extra += more
            env = dict(os.environ, SLUICE_FAULT="%s:%d" % (what, rnd.randint(2, 5)))
            m = mounts.new(data=data, env=env, start=False)
            os.makedirs(m.mnt, exist_ok=True)
            with open(m.log, "ab") as err:
                m.proc = subprocess.Popen([util.sluice_bin(), "mount", m.data, m.mnt, "-f"],
                                          stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                          env=env)
            try:
                m.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pytest.fail("fault point %s never reached" % what)
            assert m.proc.returncode == 86, (what, m.proc.returncode, m.stderr())
            m.killed = True
        util.lazy_unmount(m.mnt)
        util.wait_for(lambda: not util.is_listed_mount(m.mnt), 10, "the dead mount to go")
    prod.join()
    assert prod.sent == total
    run(data)
    m = mounts.new(data=data)
    rows = out_rows(m.mnt, "k")
    keys = [(r["partition"], r["offset"]) for r in rows]
    assert len(keys) == len(set(keys)), "a record came out twice"
    assert sorted(int(r["value"]) for r in rows) == list(range(total)) + \
        [int(v) for v in extra]
    m.unmount()


def test_replay_reads_the_logged_range(mounts, tmp_path, clusters):
    """A batch logged (offsets/N) and not committed replays exactly its range,
    even when more records arrived since."""
    if not util.faults_compiled():
        pytest.skip("built without -Dfaults=true")
    kc = clusters({"t": 1})
    produce(kc, "t", ["a", "b"])
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribe="t", startingOffsets="earliest",
                                               valueFormat="string")}})
    env = dict(os.environ, SLUICE_FAULT="engine.after_offsets:1")
    p = util.sluice("run", "--available-now", data, env=env)
    assert p.returncode == 86, (p.returncode, p.stderr)
    produce(kc, "t", ["c"])
    run(data)
    m = mounts.new(data=data)
    assert offsets_of(m.mnt, "k", 0)[1] == '{"t":{"0":2}}'
    assert offsets_of(m.mnt, "k", 1)[1] == '{"t":{"0":3}}'
    assert [r["value"] for r in out_rows(m.mnt, "k")] == ["a", "b", "c"]
    m.unmount()


# -- a real broker -----------------------------------------------------------------

def needs_broker():
    if not kafka_util.real_broker():
        pytest.skip("skipped: no broker")
    for tool in ("kafka-topics.sh", "kafka-configs.sh", "kafka-delete-records.sh"):
        if shutil.which(tool) is None:
            pytest.skip("skipped: no %s next to the broker" % tool)


def admin(*args):
    subprocess.run(list(args) + ["--bootstrap-server", kafka_util.real_broker()], check=True,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)


class Real:
    def __init__(self):
        self.bootstrap = kafka_util.real_broker()

    kcat = kafka_util.MockCluster.kcat


def test_partition_added_while_running_is_read_from_earliest(mounts, tmp_path):
    """A partition added to a topic the query reads (the mock cannot)."""
    needs_broker()
    kc = Real()
    topic = "sluice-added-%d" % os.getpid()
    admin("kafka-topics.sh", "--create", "--topic", topic, "--partitions", "1")
    produce(kc, topic, ["a"], partition=0)
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribe=topic, startingOffsets="earliest",
                                               valueFormat="string")}})
    m = mounts.new(data=data)
    util.wait_for(lambda: len(out_rows(m.mnt, "k")) == 1, 30, "the first record")
    admin("kafka-topics.sh", "--alter", "--topic", topic, "--partitions", "2")
    produce(kc, topic, ["b"], partition=1)
    util.wait_for(lambda: len(out_rows(m.mnt, "k")) == 2, 60, "the new partition's record")
    m.unmount()


def test_deleted_records_stop_or_are_skipped(mounts, tmp_path):
    """Records deleted by Kafka's admin tools (as retention deletes them)."""
    needs_broker()
    kc = Real()
    topic = "sluice-loss-%d" % os.getpid()
    admin("kafka-topics.sh", "--create", "--topic", topic, "--partitions", "1")
    produce(kc, topic, ["a%d" % i for i in range(10)], partition=0)
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": kafka(kc, subscribe=topic, startingOffsets="earliest",
                                               maxOffsetsPerTrigger=2,
                                               valueFormat="string"),
                              "trigger": {"processingTime": "1 hour"}}})
    m = mounts.new(data=data)
    util.wait_for(lambda: len(out_rows(m.mnt, "k")) == 2, 30, "one batch")
    m.unmount()
    offsets = tmp_path / "del.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0,
                                                   "offset": 6}], "version": 1}))
    admin("kafka-delete-records.sh", "--offset-json-file", str(offsets))
    p = util.sluice("run", "--available-now", data)
    assert p.returncode != 0
    assert "topic '%s' partition 0: offsets 2 to 5 are gone" % topic in p.stderr, p.stderr
    src = json.load(open(os.path.join(data, "sluice.json")))
    src["queries"]["k"]["source"]["failOnDataLoss"] = False
    write_config(data, src["queries"])
    run(data)
    m = mounts.new(data=data)
    assert [r["value"] for r in out_rows(m.mnt, "k")] == ["a0", "a1"] + \
        ["a%d" % i for i in range(6, 10)]
    m.unmount()
