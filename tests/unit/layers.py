#!/usr/bin/env python3
"""The layer rules of core/ (core/meson.build), checked on the sources:
a file includes only headers of its own layer or of the layers below it;
each third-party library's header appears only in the file that owns it;
fs/ and tools/ use only public headers; core includes nothing of FUSE.
The build refuses an upward include by its include paths; this test says
which rule a change broke, and covers the third-party headers too.

    layers.py [SOURCE_ROOT]     prints "ok   <rule>" or "FAIL <rule>" lines
"""

import os
import re
import sys

LAYERS = ["base", "store", "config", "land", "rows", "ops", "sources", "sinks", "engine"]

# third-party header -> the files allowed to include it (relative to core/)
OWNERS = {
    "lmdb.h": {"store/catalog.c"},
    "zstd.h": {"rows/codec.c"},
    "zstd_errors.h": {"rows/codec.c"},
    "jansson.h": {"config/load.c", "engine/render.c", "sources/process.c"},
    "librdkafka/rdkafka.h": {"sources/rdk.h"},
    "dlfcn.h": {"sources/rdk.c"},
    "systemd/sd-daemon.h": set(),
}
# third-party headers of the host's integration, owned by a file of fs/
# (relative to the root): libsystemd is the mount's business, not core's
FS_OWNERS = {
    "systemd/sd-daemon.h": {"fs/notify.c"},
}
GENERATED = {"sluice-build.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def sources(root, sub):
    for dirpath, _, names in os.walk(os.path.join(root, sub)):
        for n in sorted(names):
            if n.endswith((".c", ".h")):
                yield os.path.join(dirpath, n)


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return INCLUDE.findall(f.read())


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    core = os.path.join(root, "core")
    where = {}  # header name -> layer index
    for i, layer in enumerate(LAYERS):
        for p in sources(core, layer):
            if p.endswith(".h"):
                where[os.path.basename(p)] = i
    results = []

    def rule(name, problems):
        results.append((name, problems))

    upward, owned, fuse, unknown = [], [], [], []
    for i, layer in enumerate(LAYERS):
        for p in sources(core, layer):
            rel = os.path.relpath(p, core)
            for kind, h in includes(p):
                if kind == '"':
                    if h in GENERATED:
                        continue
                    if h not in where:
                        unknown.append("%s includes \"%s\", which no layer has" % (rel, h))
                    elif where[h] > i:
                        upward.append("%s (%s) includes %s of %s, a layer above"
                                      % (rel, layer, h, LAYERS[where[h]]))
                else:
                    if h in OWNERS and rel not in OWNERS[h]:
                        owned.append("%s includes <%s>, owned by %s"
                                     % (rel, h, ", ".join(sorted(OWNERS[h])) or "no file yet"))
                    if h.startswith("fuse"):
                        fuse.append("%s includes <%s>" % (rel, h))
    rule("layers: no include of a layer above", upward)
    rule("layers: third-party headers only in their owners", owned)
    rule("layers: core includes nothing of FUSE", fuse)
    rule("layers: every quoted include is a core header", unknown)

    outside = []
    for sub in ("fs", "tools"):
        for p in sources(root, sub):
            for kind, h in includes(p):
                if kind == '"' and h.endswith("_int.h"):
                    outside.append("%s includes %s, internal to its layer"
                                   % (os.path.relpath(p, root), h))
                if kind == "<" and h in OWNERS and \
                        os.path.relpath(p, root) not in FS_OWNERS.get(h, ()):
                    outside.append("%s includes <%s>" % (os.path.relpath(p, root), h))
    rule("layers: fs/ and tools/ use public core headers only", outside)

    failed = 0
    for name, problems in results:
        if problems:
            failed += 1
            print("FAIL %s" % name)
            for pr in problems:
                print("     %s" % pr)
        else:
            print("ok   %s" % name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
