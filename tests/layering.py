#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The module layering of docs/design.md, checked on the sources and the build.

Dependencies point one way: daemon/ uses fuse_lowlevel/, dax/, sandbox/ and
state/ through their public headers; those four use none of ours; frontend/ is an
independent peer that uses nothing of the daemon's; common/vufs_util.h is a
leaf every module may include. Inside daemon/, the passthrough
(daemon/passthrough/) uses only fuse_lowlevel/, dax/ and state/, and the rest of
daemon/ sees it through passthrough.h alone.

Two checks:
  1. every #include of one of our headers in a module's sources names a header
     the module may include (its own, the leaf, or an allowed public header);
  2. every source of a module is compiled with include paths (-I) inside the
     tree that are its own directory, common/, or the directory of a module it
     may use (from compile_commands.json); daemon/, which names the directory
     of the headers it includes from other modules, has the source root too.

Usage: layering.py SOURCE_ROOT [BUILD_DIR]. Prints each violation, exits 1 if any.
"""
import json
import os
import re
import shlex
import sys

LEAF = "common/vufs_util.h"

# Module directory -> (the headers outside it it may include, the directories
# outside it its include path may name). The most specific directory wins.
RULES = {
    "common": ([], []),
    "fuse_lowlevel": ([LEAF], ["common"]),
    "dax": ([LEAF], ["common"]),
    "sandbox": ([LEAF], ["common"]),
    "state": ([LEAF], ["common"]),
    "frontend": ([LEAF], ["common"]),
    "daemon/passthrough": ([LEAF, "fuse_lowlevel/fll.h", "dax/dax.h", "state/state.h"],
                           ["common", "fuse_lowlevel", "dax", "state"]),
    "daemon": ([LEAF, "fuse_lowlevel/fll.h", "dax/dax.h", "sandbox/sandbox.h", "state/state.h",
                "daemon/passthrough/passthrough.h"],
               ["common", "fuse_lowlevel", "dax", "sandbox", "state", "daemon/passthrough"]),
}
# Modules that name the directory of another module's header ("dax/dax.h"):
# the source root is on their include path, so check 1 alone decides which
# of our headers they may include.
ROOT_PATH = {"daemon"}
# Generated into the build directory of the module that owns it.
GENERATED = {"vufsd-config.h": "daemon"}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def module_of(path):
    best = None
    for m in RULES:
        if path == m or path.startswith(m + "/"):
            if best is None or len(m) > len(best):
                best = m
    return best


def our_headers(root):
    headers = {}
    for m in RULES:
        top = m.split("/")[0]
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith(".h"):
                    rel = os.path.relpath(os.path.join(dirpath, f), root)
                    headers.setdefault(f, set()).add(rel)
    return headers


def check_includes(root):
    headers = our_headers(root)
    bad = []
    for m in RULES:
        top = os.path.join(root, m)
        for dirpath, dirs, files in os.walk(top):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                src = os.path.relpath(os.path.join(dirpath, f), root)
                if module_of(src) != m:
                    continue  # a submodule's file, checked under its own rule
                text = open(os.path.join(root, src), encoding="utf-8").read()
                for line_no, (kind, name) in (
                        (text.count("\n", 0, mo.start()) + 1, mo.groups())
                        for mo in INCLUDE.finditer(text)):
                    target = resolve(root, headers, src, kind, name)
                    if target is None:
                        continue  # a system header
                    why = forbidden(m, src, target)
                    if why:
                        bad.append(f"{src}:{line_no}: includes {name} ({target}): {why}")
    return bad


def resolve(root, headers, src, kind, name):
    if name in GENERATED:
        return "<build>/" + GENERATED[name] + "/" + name
    if kind == '"':
        here = os.path.normpath(os.path.join(os.path.dirname(src), name))
        if os.path.exists(os.path.join(root, here)):
            return here
    found = headers.get(os.path.basename(name))
    if not found:
        return None
    # A bare name found in several places resolves to any of them: all must pass.
    return sorted(found)[0] if len(found) == 1 else " or ".join(sorted(found))


def forbidden(m, src, target):
    if target.startswith("<build>/"):
        owner = target.split("/")[1]
        return None if m == owner or m.startswith(owner + "/") else "generated for " + owner
    for t in target.split(" or "):
        if module_of(t) == m:
            continue
        allowed, _ = RULES[m]
        if t not in allowed:
            owner = module_of(t) or os.path.dirname(t)
            if m == "common":
                return "common/ is a leaf and includes nothing of ours"
            return f"{m}/ may not use {owner}/" if not t.endswith("_i.h") \
                else f"private header of {owner}/"
    return None


def check_include_paths(root, build):
    path = os.path.join(build, "compile_commands.json")
    if not os.path.exists(path):
        return [f"{path}: missing (configure the build first)"]
    root = os.path.realpath(root)
    build = os.path.realpath(build)
    bad = []
    for c in json.load(open(path)):
        src = os.path.relpath(os.path.realpath(os.path.join(c["directory"], c["file"])), root)
        m = module_of(src)
        # Test programs compile module sources with test include paths of their own.
        if m is None or src.startswith("tests/") or c["output"].startswith("tests/"):
            continue
        args = c.get("arguments") or shlex.split(c["command"])
        dirs = []
        for i, a in enumerate(args):
            if a == "-I" and i + 1 < len(args):
                dirs.append(args[i + 1])
            elif a.startswith("-I"):
                dirs.append(a[2:])
        _, allowed = RULES[m]
        for d in dirs:
            real = os.path.realpath(os.path.join(c["directory"], d))
            if real == build or real.startswith(build + os.sep):
                continue  # the build tree: generated headers, meson's private dirs
            if not real.startswith(root + os.sep) and real != root:
                continue  # system directories
            rel = os.path.relpath(real, root)
            ok = (rel == "." and m in ROOT_PATH) or \
                (rel != "." and (rel == m or rel.startswith(m + "/") or rel in allowed))
            if not ok:
                bad.append(f"{src}: compiled with -I{rel}: not {m}/, common/ or a module {m}/ may use")
    return sorted(set(bad))


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    root = sys.argv[1]
    bad = check_includes(root)
    if len(sys.argv) > 2:
        bad += check_include_paths(root, sys.argv[2])
    for b in bad:
        print(b)
    if not bad:
        print("layering: every include and include path follows docs/design.md")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
