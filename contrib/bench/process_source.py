# SPDX-License-Identifier: MIT
"""B11's source: N rows (seq, account, amount) in partitions of 100,000, as
a pyspark-style DataSourceStreamReader. Run by sluice through
contrib/python/sluice_source.py (option "rows"), or directly as

    python3 process_source.py --to-file PATH N

which writes the same reader's rows to PATH as JSON Lines: the same Python
code without sluice, for B11's other side."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from sluice_source import DataSource, DataSourceStreamReader, InputPartition  # noqa: E402

STEP = 100_000


class RangePartition(InputPartition):
    def __init__(self, start, end):
        self.start, self.end = start, end


class BenchReader(DataSourceStreamReader):
    def __init__(self, schema, options):
        self.rows = int(options["rows"])

    def initialOffset(self):
        return {"seq": 0}

    def latestOffset(self):
        return {"seq": self.rows}

    def partitions(self, start, end):
        return [RangePartition(s, min(s + STEP, end["seq"]))
                for s in range(start["seq"], end["seq"], STEP)]

    def read(self, partition):
        for i in range(partition.start + 1, partition.end + 1):
            yield (i, "acct-%d" % (i % 97), i * 3 - 1000)


class BenchSource(DataSource):
    @classmethod
    def name(cls):
        return "bench"

    def schema(self):
        return "seq long, account string, amount long"

    def streamReader(self, schema):
        return BenchReader(schema, self.options)


def to_file(path, n):
    """The same reader's rows, as the json sink's lines, to a file."""
    r = BenchSource({"rows": str(n)}).streamReader(None)
    names = ("seq", "account", "amount")
    with open(path, "w", buffering=1 << 16) as f:
        for p in r.partitions(r.initialOffset(), r.latestOffset()):
            for row in r.read(p):
                f.write(json.dumps(dict(zip(names, row)), separators=(",", ":")))
                f.write("\n")
        f.flush()
        os.fsync(f.fileno())


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--to-file":
        to_file(sys.argv[2], int(sys.argv[3]))
    else:
        sys.stderr.write("usage: process_source.py --to-file PATH N\n")
        sys.exit(2)
