"""librdkafka is loaded when a query first needs Kafka (core/sources/rdk.c),
not with the binary: a data dir without Kafka runs where the library cannot
be loaded, a Kafka source or sink there is refused with why, and a mount
without Kafka never maps it. The library is hidden the way a machine
without it would be: /dev/null bind-mounted over it in a mount namespace of
the command's own (root, unshare(1))."""

import json
import os
import shutil
import subprocess

import pytest

import kafka_util
import util

pytestmark = pytest.mark.timeout(60)


def librdkafka():
    """The path the dynamic loader finds librdkafka.so.1 at, or None."""
    out = subprocess.run(["ldconfig", "-p"], stdout=subprocess.PIPE, text=True).stdout
    for line in out.splitlines():
        name, _, path = line.strip().partition(" => ")
        if name.startswith("librdkafka.so.1 "):
            return path
    return None


def hidden(args):
    """args run with librdkafka.so.1 replaced by an empty file."""
    lib = librdkafka()
    if os.geteuid() != 0 or not shutil.which("unshare") or not lib:
        pytest.skip("needs root, unshare and librdkafka.so.1")
    return ["unshare", "-m", "sh", "-c", 'mount --bind /dev/null "$0" && exec "$@"', lib] + args


def write_config(data, queries):
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "sluice.json"), "w") as f:
        json.dump({"queries": queries}, f)


def file_query(sink=None):
    q = {"source": {"format": "json", "path": "ev", "schema": "user STRING, n BIGINT"}}
    if sink:
        q["sink"] = sink
    return q


def land(tmp_path, data):
    p = tmp_path / "a.json"
    p.write_text('{"user": "u", "n": 1}\n{"user": "v", "n": 2}\n')
    r = util.sluice("land", data, str(p), "--to", "ev")
    assert r.returncode == 0, r.stderr


def test_without_librdkafka_a_file_query_runs(tmp_path):
    data = str(tmp_path / "data")
    write_config(data, {"q": file_query()})
    land(tmp_path, data)
    p = util.run(hidden([util.sluice_bin(), "run", "--available-now", data]), timeout=30, text=True)
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert p.stdout == "q: 1 batches, 2 rows\n", p.stdout


def test_without_librdkafka_a_kafka_sink_is_refused(tmp_path):
    if kafka_util.missing_reason():
        pytest.skip(kafka_util.missing_reason())
    data = str(tmp_path / "data")
    write_config(data, {"q": file_query({"format": "kafka", "topic": "t",
                                         "kafka.bootstrap.servers": "127.0.0.1:1"})})
    p = util.run(hidden([util.sluice_bin(), "run", "--available-now", data]), timeout=30, text=True)
    assert p.returncode == 4, (p.returncode, p.stderr)
    assert "queries.q.sink: cannot load librdkafka (librdkafka.so.1):" in p.stderr, p.stderr


def test_without_librdkafka_a_kafka_source_fails_with_why(tmp_path):
    if kafka_util.missing_reason():
        pytest.skip(kafka_util.missing_reason())
    data = str(tmp_path / "data")
    write_config(data, {"k": {"source": {"format": "kafka", "subscribe": "t",
                                         "kafka.bootstrap.servers": "127.0.0.1:1"}}})
    p = util.run(hidden([util.sluice_bin(), "run", "--available-now", data]), timeout=30, text=True)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "queries.k.source: cannot load librdkafka (librdkafka.so.1):" in p.stderr, p.stderr


def mapped(pid, name):
    with open("/proc/%d/maps" % pid) as f:
        return [line for line in f if name in line]


def test_a_mount_maps_librdkafka_only_for_kafka(mounts, tmp_path):
    """A mount whose queries read and write files has no librdkafka in its
    memory; one with a Kafka sink has (its options are checked with it)."""
    if kafka_util.missing_reason():
        pytest.skip(kafka_util.missing_reason())
    plain = str(tmp_path / "plain")
    write_config(plain, {"q": file_query()})
    m = mounts.new(data=plain)
    assert os.path.isdir(os.path.join(m.mnt, "in"))
    assert not mapped(m.proc.pid, "/librdkafka.so")
    assert mapped(m.proc.pid, "/libfuse3.so")  # (the test reads the right process)
    kafka = str(tmp_path / "kafka")
    write_config(kafka, {"q": file_query({"format": "kafka", "topic": "t",
                                          "kafka.bootstrap.servers": "127.0.0.1:1"})})
    m2 = mounts.new(data=kafka)
    assert os.path.isdir(os.path.join(m2.mnt, "in"))
    assert mapped(m2.proc.pid, "/librdkafka.so")
