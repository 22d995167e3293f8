#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The calls between the files of daemon/ form a tree, checked on the built objects.

A file calls another when its object file leaves a symbol undefined (nm) that the
other's object defines: that gives the file-level call graph, function pointers
aside (a callback handed down is the way a child reaches its parent). Two groups
are checked, each on its own: the top level of daemon/ and daemon/passthrough/.
Within a group, a call from A to B is refused when B calls A back, directly or
through other files of the group, except:

  - the parent/child pairs of PAIRS: the two files count as one, so they may call
    each other, but nothing else may close a circle through them;
  - the calls of KNOWN: circles that exist today and are being taken apart. An
    entry that no longer closes a circle fails the check too, so that it is
    struck from the list when the circle is gone.

Usage:
  callcheck.py SOURCE_ROOT BUILD_DIR
      checks the objects of the build (from compile_commands.json);
  callcheck.py SOURCE_ROOT BUILD_DIR --add FROM:TO [--add ...] --expect-refused
      the same graph with the calls FROM -> TO added (paths from SOURCE_ROOT);
      exits 0 only if the check refuses each added call;
  callcheck.py --self-test
      the check on small made-up graphs.
Prints each refused call with the way back; exits 1 if any.
"""
import json
import os
import subprocess
import sys

GROUPS = ["daemon", "daemon/passthrough"]

# Parent/child pairs, per group: (parent, child).
PAIRS = {
    "daemon": [
        # The device starts, stops and tears down its queue threads; a queue
        # thread asks its device for the memory table, the features and whether
        # it is broken.
        ("device.c", "queue.c"),
    ],
    "daemon/passthrough": [],
}

# Calls that close a circle today, per group: (caller, callee). Strike an entry
# when the call goes or no longer closes a circle (the check says which).
KNOWN = {
    "daemon": [],
    "daemon/passthrough": [],
}


# ---- The graph ----------------------------------------------------------------------

def objects(root, build):
    """Source path (from root) -> its object file, for the sources of GROUPS."""
    root = os.path.realpath(root)
    path = os.path.join(build, "compile_commands.json")
    objs = {}
    for c in json.load(open(path)):
        src = os.path.relpath(os.path.realpath(os.path.join(c["directory"], c["file"])), root)
        if c["output"].startswith("tests/") or os.path.dirname(src) not in GROUPS:
            continue
        objs[src] = os.path.join(c["directory"], c["output"])
    return objs


def symbols(obj):
    """(defined, undefined) global symbols of an object file."""
    out = subprocess.run(["nm", "-P", obj], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        name, kind = line.split()[:2]
        if kind == "U":
            undefined.add(name)
        elif kind.isupper():
            defined.add(name)
    return defined, undefined


def call_graph(objs):
    """Caller -> {callee: [symbols]}, between files of the same group."""
    syms = {src: symbols(o) for src, o in objs.items()}
    owner = {}
    for src, (defined, _) in syms.items():
        for s in defined:
            owner.setdefault(s, set()).add(src)
    graph = {src: {} for src in objs}
    for src, (_, undefined) in syms.items():
        for s in sorted(undefined):
            for d in owner.get(s, ()):
                if d != src and os.path.dirname(d) == os.path.dirname(src):
                    graph[src].setdefault(d, []).append(s)
    return graph


# ---- The check ----------------------------------------------------------------------

def refused(graph, pairs, known):
    """The calls of one group that close a circle, and the stale KNOWN entries.

    graph: file -> {callee: [symbols]} for the files of the group; pairs: the
    parent/child pairs; known: the tolerated calls. Returns (refused, stale):
    refused is a list of (caller, callee, the way back from callee to caller),
    stale the entries of known that close no circle.
    """
    unit = {f: f for f in graph}
    for parent, child in pairs:
        unit[child] = unit.get(parent, parent)
    edges = {}
    for a, callees in graph.items():
        for b in callees:
            if unit[a] != unit[b]:
                edges.setdefault(unit[a], {}).setdefault(unit[b], (a, b))

    def way(start, goal):
        """A path of file calls from unit start to unit goal, or None."""
        prev, todo = {start: None}, [start]
        while todo:
            u = todo.pop(0)
            if u == goal:
                path = []
                while prev[u]:
                    path.append(prev[u])
                    u = unit[prev[u][0]]
                return list(reversed(path))
            for v, call in sorted(edges.get(u, {}).items()):
                if v not in prev:
                    prev[v] = call
                    todo.append(v)
        return None

    circles = []
    for a in sorted(graph):
        for b in sorted(graph[a]):
            if unit[a] == unit[b]:
                continue
            back = way(unit[b], unit[a])
            if back is not None:
                circles.append((a, b, back))
    known = set(known)
    bad = [c for c in circles if (c[0], c[1]) not in known]
    closing = {(a, b) for a, b, _ in circles}
    stale = sorted(k for k in known if k not in closing)
    return bad, stale


def check(graph):
    """Every group of the graph (paths from the source root). Lines to print."""
    lines = []
    for g in GROUPS:
        files = sorted(f for f in graph if os.path.dirname(f) == g)
        sub = {os.path.basename(f): {os.path.basename(c): s for c, s in graph[f].items()}
               for f in files}
        bad, stale = refused(sub, PAIRS.get(g, []), KNOWN.get(g, []))
        for a, b, back in bad:
            syms = ", ".join(sub[a][b][:3])
            path = " -> ".join([b] + [y for _, y in back])
            lines.append(f"{g}/{a} calls {g}/{b} ({syms}), which calls it back: {path}")
        for a, b in stale:
            lines.append(f"{g}: KNOWN lists {a} -> {b}, which closes no circle now: strike it")
    return lines


# ---- Self-test ----------------------------------------------------------------------

def self_test():
    def g(*calls):
        graph = {}
        for a, b in calls:
            graph.setdefault(a, {}).setdefault(b, ["f"])
            graph.setdefault(b, {})
        return graph

    cases = [
        # (graph, pairs, known, expected refused calls, expected stale)
        ("a tree", g(("main", "dev"), ("dev", "mem"), ("main", "mem")), [], [], [], []),
        ("a call back up", g(("dev", "mig"), ("mig", "dev")), [], [],
         [("dev", "mig"), ("mig", "dev")], []),
        ("a circle of three", g(("a", "b"), ("b", "c"), ("c", "a"), ("a", "d")), [], [],
         [("a", "b"), ("b", "c"), ("c", "a")], []),
        ("a parent and its child", g(("dev", "queue"), ("queue", "dev"), ("queue", "mem")),
         [("dev", "queue")], [], [], []),
        ("a circle through a parent and its child",
         g(("dev", "queue"), ("queue", "dev"), ("queue", "mig"), ("mig", "dev")),
         [("dev", "queue")], [], [("mig", "dev"), ("queue", "mig")], []),
        ("a known circle", g(("a", "b"), ("b", "a")), [], [("a", "b"), ("b", "a")], [], []),
        ("a known circle gone", g(("a", "b")), [], [("a", "b"), ("b", "a")], [],
         [("a", "b"), ("b", "a")]),
        ("a new call into a known circle", g(("a", "b"), ("b", "a"), ("b", "c"), ("c", "a")),
         [], [("a", "b"), ("b", "a")], [("b", "c"), ("c", "a")], []),
    ]
    failed = 0
    for name, graph, pairs, known, want_bad, want_stale in cases:
        bad, stale = refused(graph, pairs, known)
        got = sorted((a, b) for a, b, _ in bad)
        if got != sorted(want_bad) or stale != sorted(want_stale):
            print(f"FAIL {name}: refused {got}, stale {stale}; "
                  f"wanted {sorted(want_bad)}, {sorted(want_stale)}")
            failed += 1
        else:
            print(f"ok   {name}")
    # The report names the way back.
    bad, _ = refused(g(("a", "b"), ("b", "c"), ("c", "a")), [], [])
    if bad[0][2] != [("b", "c"), ("c", "a")]:
        print(f"FAIL the way back: {bad[0][2]}")
        failed += 1
    return 1 if failed else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) < 3:
        print(__doc__)
        return 2
    root, build, rest = argv[1], argv[2], argv[3:]
    graph = call_graph(objects(root, build))
    added = []
    while rest[:1] == ["--add"] and len(rest) > 1:
        a, b = rest[1].split(":")
        if a not in graph or b not in graph:
            print(f"--add {rest[1]}: not a file of {' or '.join(GROUPS)}")
            return 2
        graph[a].setdefault(b, []).append("(added)")
        added.append((a, b))
        rest = rest[2:]
    expect_refused = rest == ["--expect-refused"]
    if rest and not expect_refused:
        print(__doc__)
        return 2
    lines = check(graph)
    for line in lines:
        print(line)
    if expect_refused:
        missing = [f"{a} calls {b}" for a, b in added
                   if not any(line.startswith(f"{a} calls {b} ") for line in lines)]
        for m in missing:
            print(f"callcheck: the added call {m} was not refused")
        return 1 if missing or not added else 0
    if not lines:
        print("callcheck: the calls of each group of daemon/ form a tree "
              "(parent/child pairs and known circles aside)")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
