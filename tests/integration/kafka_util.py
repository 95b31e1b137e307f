"""Kafka for the tests: librdkafka's mock cluster in a helper process of its
own (tests/kafka/mock-cluster.c, built next to sluice), and kcat, the outside
client.

    with MockCluster(topics={"events": 3}) as kc:
        kc.produce("events", ["a", "b"], partition=0)
        lines = kc.consume("events")

CONNECTORS.md §7: the mock does not hide aborted transactions from
read_committed readers, cannot add partitions or delete records, and trims a
partition past about 5 MiB. Tests that need a real broker use
`real_broker()`, which is the KAFKA_BOOTSTRAP environment variable or None.
"""

import os
import shutil
import subprocess

import util


def mock_bin():
    """The helper built beside SLUICE_BIN (build/tests/sluice-kafka-mock)."""
    build = os.path.dirname(os.path.dirname(os.path.abspath(util.sluice_bin())))
    return os.path.join(build, "tests", "sluice-kafka-mock")


def missing_reason():
    """Why the Kafka tests cannot run here, or None."""
    if not os.access(mock_bin(), os.X_OK):
        return "no sluice-kafka-mock (sluice built without librdkafka)"
    if shutil.which("kcat") is None:
        return "no kcat"
    return None


def real_broker():
    return os.environ.get("KAFKA_BOOTSTRAP") or None


class MockCluster:
    """A mock cluster of `brokers` brokers with `topics` {name: partitions}.
    Stops when the context ends (its stdin closes), or by kill at teardown."""

    def __init__(self, topics=None, brokers=3):
        self.topics = dict(topics or {})
        self.brokers = brokers
        self.proc = None
        self.bootstrap = None

    def __enter__(self):
        args = [mock_bin(), "-b", str(self.brokers)]
        args += ["%s:%d" % (t, n) for t, n in self.topics.items()]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if not line:
            err = self.proc.stderr.read()
            self.proc.kill()
            raise RuntimeError("sluice-kafka-mock did not start: %s" % err)
        self.bootstrap = line
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (subprocess.TimeoutExpired, OSError):
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def command(self, line):
        """Sends one fault-injection command (tests/kafka/mock-cluster.c:
        err APIKEY CODE..., topicerr TOPIC CODE, down N, up N,
        slow APIKEY MS COUNT)."""
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        if answer != "ok":
            raise RuntimeError("sluice-kafka-mock %r: %s" % (line, answer))

    def kcat(self, *args, input=None, timeout=30):
        """Runs kcat against this cluster; returns its stdout (bytes)."""
        r = subprocess.run(["kcat", "-b", self.bootstrap, *args], input=input,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError("kcat %s: %s" % (" ".join(args), r.stderr.decode(errors="replace")))
        return r.stdout

    def produce(self, topic, values, partition=None, key=None):
        """Produces one record per value (str without newlines), acked."""
        args = ["-P", "-t", topic, "-X", "acks=all"]
        if partition is not None:
            args += ["-p", str(partition)]
        if key is not None:
            args += ["-k", key]
        data = "".join(v + "\n" for v in values).encode()
        self.kcat(*args, input=data)

    def consume(self, topic, fmt="%s\\n", read_committed=False, timeout=30):
        """Every record of `topic` from the beginning, formatted by kcat -f."""
        args = ["-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", fmt]
        if read_committed:
            args += ["-X", "isolation.level=read_committed"]
        return self.kcat(*args, timeout=timeout).decode()
