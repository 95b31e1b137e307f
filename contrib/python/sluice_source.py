# SPDX-License-Identifier: MIT
"""pyspark's streaming data source API for sluice's `process` source.

A source written for Spark 4 (pyspark.sql.datasource) runs under sluice with
one change, its import line:

    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
becomes
    from sluice_source import DataSource, DataSourceStreamReader, InputPartition

and the query's command runs it through this module:

    "source": {"format": "process",
               "command": ["python3", "/usr/share/sluice/python/sluice_source.py",
                           "/opt/ledger_source.py"],
               "schema": "seq BIGINT, account STRING, amount BIGINT",
               "options": {"endpoint": "http://127.0.0.1:8099"}}

The file runs once with `spark` defined (spark.dataSource.register() and
spark.readStream...load() work as in Spark and do nothing else); the source
served is the one load() named, else the only one registered (or the class
given with --source NAME). Its options are those the code gave load(), with
sluice.json's `options` over them. sluice then speaks the line protocol of
CONNECTORS.md §5 with it on stdin/stdout; whatever the code prints goes to
stderr, hence to sluice's log.

Names and signatures are pyspark's (4.0/4.1, and 4.2's latestOffset(start,
limit)); offsets are JSON dicts; partitions cross the protocol as
{"class": name, "state": vars(partition)} (pickled when not JSON).
"""

import base64
import datetime
import decimal
import inspect
import json
import os
import pickle
import sys
import traceback

__all__ = ["DataSource", "DataSourceStreamReader", "InputPartition",
           "SimpleDataSourceStreamReader", "ReadLimit", "ReadAllAvailable", "ReadMaxRows",
           "PySparkNotImplementedError", "spark", "serve"]


class PySparkNotImplementedError(NotImplementedError):
    """pyspark.errors.PySparkNotImplementedError's stand-in (NOT_IMPLEMENTED)."""


def _not_impl(name):
    return PySparkNotImplementedError("[NOT_IMPLEMENTED] %s is not implemented." % name)


class _Options(dict):
    """pyspark's CaseInsensitiveDict: keys compared ignoring case."""

    def __init__(self, *a, **kw):
        super().__init__()
        for k, v in dict(*a, **kw).items():
            self[k] = v

    def __setitem__(self, k, v):
        super().__setitem__(k.lower(), v)

    def __getitem__(self, k):
        return super().__getitem__(k.lower())

    def __contains__(self, k):
        return super().__contains__(k.lower())

    def get(self, k, default=None):
        return super().get(k.lower(), default)


_PARTITIONS = {}


class InputPartition:
    """A partition of a range (pyspark.sql.datasource.InputPartition)."""

    def __init__(self, value):
        self.value = value

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        _PARTITIONS[cls.__name__] = cls

    def __repr__(self):
        attrs = ", ".join("%s=%r" % kv for kv in vars(self).items())
        return "%s(%s)" % (type(self).__name__, attrs)


_PARTITIONS["InputPartition"] = InputPartition


class DataSource:
    """pyspark.sql.datasource.DataSource: options in, a stream reader out."""

    def __init__(self, options):
        self.options = options

    @classmethod
    def name(cls):
        return cls.__name__

    def schema(self):
        raise _not_impl("schema")

    def streamReader(self, schema):
        raise _not_impl("streamReader")

    def simpleStreamReader(self, schema):
        raise _not_impl("simpleStreamReader")


class DataSourceStreamReader:
    """pyspark.sql.datasource.DataSourceStreamReader."""

    def initialOffset(self):
        raise _not_impl("initialOffset")

    def latestOffset(self, start=None, limit=None):
        raise _not_impl("latestOffset")

    def partitions(self, start, end):
        raise _not_impl("partitions")

    def read(self, partition):
        raise _not_impl("read")

    def commit(self, end):
        pass

    def stop(self):
        pass


class SimpleDataSourceStreamReader:
    """pyspark's SimpleDataSourceStreamReader (served through a wrapper)."""

    def initialOffset(self):
        raise _not_impl("initialOffset")

    def read(self, start):
        raise _not_impl("read")

    def readBetweenOffsets(self, start, end):
        raise _not_impl("readBetweenOffsets")

    def commit(self, end):
        pass


class ReadLimit:
    """pyspark.sql.streaming.datasource.ReadLimit (4.2)."""

    def dump(self):
        d = {"type": type(self).__name__}
        d.update(vars(self))
        return d


class ReadAllAvailable(ReadLimit):
    pass


class ReadMaxRows(ReadLimit):
    def __init__(self, max_rows):
        self.max_rows = max_rows


class _SimplePartition(InputPartition):
    def __init__(self, start, end):
        self.start, self.end = start, end


class _SimpleWrapper(DataSourceStreamReader):
    """Spark's _SimpleStreamReaderWrapper: one partition, replay through
    readBetweenOffsets (the rows are never cached across the protocol)."""

    def __init__(self, simple):
        self.simple = simple

    def initialOffset(self):
        return self.simple.initialOffset()

    def latestOffset(self):
        _, end = self.simple.read(self._start)
        return end

    def partitions(self, start, end):
        return [_SimplePartition(start, end)]

    def read(self, partition):
        return self.simple.readBetweenOffsets(partition.start, partition.end)

    def commit(self, end):
        self.simple.commit(end)


# ---- the `spark` object a Spark source's file refers to ----

class _Anything:
    """Chains any call and does nothing (writeStream, start, ...)."""

    def __getattr__(self, name):
        return lambda *a, **kw: self


class _Registry:
    def __init__(self):
        self.sources = {}

    def register(self, cls):
        self.sources[cls.name()] = cls


class _StreamReader:
    def __init__(self, spark):
        self._spark = spark
        self._format = None
        self._options = {}

    def format(self, name):
        self._format = name
        return self

    def option(self, key, value):
        self._options[key] = value
        return self

    def options(self, **kw):
        self._options.update(kw)
        return self

    def schema(self, s):
        return self

    def load(self, path=None):
        self._spark._loaded = (self._format, dict(self._options))
        return _Anything()


class _Spark:
    def __init__(self):
        self.dataSource = _Registry()
        self._loaded = None

    @property
    def readStream(self):
        return _StreamReader(self)


spark = _Spark()


# ---- the protocol ----

def _jsonable(v):
    if isinstance(v, datetime.datetime):
        return v.isoformat()
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return float(v)
    raise TypeError("a value of type %s cannot be sent to sluice" % type(v).__name__)


def _encode_partition(p):
    name = type(p).__name__
    try:
        state = json.loads(json.dumps(vars(p)))
        if _decode_partition({"class": name, "state": state}).__dict__ == vars(p):
            return {"class": name, "state": state}
    except (TypeError, ValueError, KeyError):
        pass
    return {"class": name, "pickle": base64.b64encode(pickle.dumps(p)).decode()}


def _decode_partition(d):
    if "pickle" in d:
        return pickle.loads(base64.b64decode(d["pickle"]))
    cls = _PARTITIONS[d["class"]]
    p = cls.__new__(cls)
    p.__dict__.update(d["state"])
    return p


def _rows(it):
    """Rows as lists: tuples, lists, pyspark Rows, or Arrow record batches."""
    for r in it:
        if hasattr(r, "to_pylist"):  # a pyarrow RecordBatch
            for d in r.to_pylist():
                yield list(d.values())
        elif isinstance(r, (tuple, list)):
            yield list(r)
        else:
            raise TypeError("[DATA_SOURCE_INVALID_RETURN_TYPE] read() must yield tuples, got %s"
                            % type(r).__name__)


def _takes_start(fn):
    try:
        return len(inspect.signature(fn).parameters) >= 2
    except (TypeError, ValueError):
        return False


class _Server:
    def __init__(self, source_cls, code_options, out):
        self.cls = source_cls
        self.code_options = code_options or {}
        self.out = out
        self.reader = None

    def send(self, obj):
        self.out.write(json.dumps(obj, separators=(",", ":"), default=_jsonable))
        self.out.write("\n")
        self.out.flush()

    def op_init(self, req):
        opts = _Options(self.code_options)
        for k, v in (req.get("options") or {}).items():
            # Spark's options are strings
            opts[k] = v if isinstance(v, str) else json.dumps(v)
        ds = self.cls(opts)
        schema = req.get("schema") or ds.schema()
        try:
            self.reader = ds.streamReader(schema)
        except NotImplementedError:
            self.reader = _SimpleWrapper(ds.simpleStreamReader(schema))
        return {"ok": True}

    def op_initialOffset(self, req):
        return {"offset": self.reader.initialOffset()}

    def op_latestOffset(self, req):
        start, end = req.get("start"), req.get("end")
        lo = self.reader.latestOffset
        if isinstance(self.reader, _SimpleWrapper):
            self.reader._start = start
        if _takes_start(lo):
            m = (req.get("limit") or {}).get("maxRows")
            limit = ReadMaxRows(m) if m else ReadAllAvailable()
            return {"offset": lo(start, limit)}
        if end is not None:
            # Spark 4.0/4.1's latestOffset() has no admission control: under
            # availableNow the end fixed at start is the answer
            return {"offset": end}
        return {"offset": lo()}

    def op_partitions(self, req):
        parts = self.reader.partitions(req["start"], req["end"])
        return {"partitions": [_encode_partition(p) for p in parts]}

    def op_read(self, req):
        part = _decode_partition(req["partition"])
        n = 0
        w = self.out.write
        dumps = json.JSONEncoder(separators=(",", ":"), default=_jsonable).encode
        for row in _rows(self.reader.read(part)):
            w(dumps(row))
            w("\n")
            n += 1
        return {"end": n}

    def op_commit(self, req):
        self.reader.commit(req["end"])
        return {"ok": True}

    def serve(self, inp):
        for line in inp:
            if not line.strip():
                continue
            try:
                req = json.loads(line)
                op = req["op"]
                if op == "stop":
                    if self.reader is not None and hasattr(self.reader, "stop"):
                        self.reader.stop()
                    return 0
                fn = getattr(self, "op_" + op, None)
                if fn is None:
                    raise ValueError("unknown op %r" % op)
                ans = fn(req)
            except Exception as e:  # the program's error, for lastError
                traceback.print_exc(file=sys.stderr)
                ans = {"error": "%s: %s" % (type(e).__name__, e)}
            self.send(ans)
        return 0


def serve(source_cls, options=None):
    """Serves source_cls (a DataSource subclass) on stdin/stdout until "stop"."""
    out = os.fdopen(os.dup(1), "w", buffering=1 << 16, encoding="utf-8")
    os.dup2(2, 1)  # print() in the source's code must not break the protocol
    sys.stdout = sys.stderr
    inp = os.fdopen(0, "r", encoding="utf-8")
    return _Server(source_cls, options, out).serve(inp)


def main(argv=None):
    import types
    argv = list(sys.argv[1:] if argv is None else argv)
    name = None
    if len(argv) >= 2 and argv[0] == "--source":
        name = argv[1]
        argv = argv[2:]
    if len(argv) != 1:
        sys.stderr.write("usage: sluice_source.py [--source NAME] SOURCE.py\n")
        return 2
    path = os.path.abspath(argv[0])
    sys.path.insert(0, os.path.dirname(path))
    # a module of its own, so that pickle finds the classes it defines
    mod = types.ModuleType("__sluice_source__")
    mod.__file__ = path
    mod.spark = spark
    sys.modules[mod.__name__] = mod
    with open(path, encoding="utf-8") as f:
        exec(compile(f.read(), path, "exec"), mod.__dict__)
    ns = mod.__dict__
    regs = spark.dataSource.sources
    options = {}
    if name is None and spark._loaded is not None:
        name, options = spark._loaded
    if name is None:
        if len(regs) == 1:
            name = next(iter(regs))
        else:
            found = [v for v in ns.values() if isinstance(v, type) and issubclass(v, DataSource)
                     and v is not DataSource]
            if len(found) != 1:
                sys.stderr.write("sluice_source: %s: register one DataSource, or name it with "
                                 "--source\n" % path)
                return 2
            regs[found[0].name()] = found[0]
            name = found[0].name()
    if name not in regs:
        sys.stderr.write("sluice_source: no data source called %r in %s\n" % (name, path))
        return 2
    return serve(regs[name], options)


if __name__ == "__main__":
    # the source's file imports `sluice_source`: one module, not __main__ and a copy
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sluice_source
    sys.exit(sluice_source.main())
