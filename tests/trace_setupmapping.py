#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The path of a SETUPMAPPING in docs/design.md, checked against the daemon.

docs/design.md lists, in a fenced block under "### The path of a SETUPMAPPING",
the functions one SETUPMAPPING runs, in order, one `KIND name` a line (a `#`
starts a comment). KIND names the thread:

  queue    the request queue's thread, which pops the request;
  request  the thread that runs the request: the queue thread itself, or a
           pool worker with --thread-pool-size;
  message  the vhost-user message thread (the daemon's main thread).

The check runs the real vufsd under gdb (batch mode) with a breakpoint on each
function listed, and on each function of COVERED (below) whether listed or
not; each breakpoint's commands print the function and the thread, and
continue. tests/setupmapping_once drives the
daemon through the in-tree frontend, playing QEMU 11.1: it starts vufsd with a
DAX window (mainline protocol, --dax-policy always, 8 MiB), LOOKUPs and OPENs a
file and sends exactly one SETUPMAPPING, readable and writable; the frontend
adds the mapping's memory region (ADD_MEM_REG) after answering the map.

Of the hits, those of the SETUPMAPPING count: from the queue's vqt_handle that
took it to its vqt_complete. On each thread they must be exactly the lines of
the list that thread runs, in the list's order (a function called twice is
listed twice). Where the list goes back to a thread after lines of another, the
thread waits for them: its next hit must come after the last of them.

Usage:
  trace_setupmapping.py SOURCE_ROOT BUILD_DIR [DAEMON_OPTION...]
      one run, the daemon with the extra options (e.g. --thread-pool-size=2);
  trace_setupmapping.py SOURCE_ROOT BUILD_DIR --self-check [DAEMON_OPTION...]
      the same run, then the same hits against three altered lists (a line
      dropped, two lines swapped, a function renamed): each must be refused.
Exits 0 when the list matches, 1 when it does not, 77 (skipped) without gdb.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

DOC = "docs/design.md"
HEADING = "### The path of a SETUPMAPPING"
KINDS = ("queue", "request", "message")
# Broken on whether the list names them or not, so that a line dropped from the
# list fails the check instead of dropping its breakpoint with it: the functions
# the list must keep. vqt_handle and vqt_complete also bound the request's hits,
# and fll_do_setupmapping tells which request it is. A function the list gains
# and must keep belongs here too.
COVERED = (
    "vqt_handle", "fll_session_process", "fll_do_setupmapping",
    "pt_op_setupmapping", "pt_dax_on", "dax_window_usable", "vdax_usable", "vdev_can_map",
    "dax_setup_check", "pt_inode_get_type", "pt_dax_open_as_caller", "pt_inode_fd",
    "pt_openat_as_caller", "pt_cred_enter", "pt_cred_leave",
    "dax_setupmapping", "dax_prealloc", "dax_stamp_fd", "dax_inode_get_locked",
    "keep_fds_locked", "slot_change_locked", "dax_slot_wait_idle_locked",
    "victims_fds_locked", "reopen_survivors_locked", "apply_locked",
    "dax_slot_set_state_locked", "unmap_victims_locked", "map_piece_locked",
    "fill_piece_locked", "dax_store_fill", "dax_inode_set_seen_locked",
    "vdax_map", "vdax_shmem_map_locked", "vdev_mem_wait_room", "vdev_mem_adds",
    "vdax_send_map", "vdax_send", "vdev_backend_request", "vdev_send_all", "vdev_recv_all",
    "vdev_mem_wait_added",
    "vu_dispatch", "vu_add_mem_reg", "vu_mem_reg_change", "vdev_mem_swap", "vqt_mem_changed",
    "vdev_mem_added",
    "dax_extent_add_locked", "count_new_map_locked", "dax_slot_release_locked",
    "dax_inode_put_locked", "dax_close_pending", "fll_reply_status", "fll_complete",
    "vqt_complete",
)
DAEMON_OPTIONS = ("--sandbox none --seccomp none --unsafe-no-isolation --log-level warn "
                  "--dax-window 8M --dax-policy always")
TIMEOUT_S = 120

# gdb sets a breakpoint location at each instance of a function: the function
# itself and each place it is inlined. The optimizer adds more: a nested block
# of the function's own name (a split-off part of its body), or two inlined
# instances sharing their code (a sanitizer build merges the tails of the two
# branches of vdax_send_map), so one call can pass two locations. A hit counts
# only at the first location of an instance, instances whose code overlaps
# taken as one. vufsd_hit prints one line per call: the function and its thread.
GDB_PY = """python
import gdb
def vufsd_entries(name):
    spans = []
    for bp in gdb.breakpoints():
        if bp.location != name:
            continue
        for loc in bp.locations:
            b, outer = gdb.block_for_pc(loc.address), None
            while b is not None:
                if b.function is not None and b.function.name == name:
                    outer = b
                b = b.superblock
            if outer is None:
                spans.append([loc.address, loc.address + 1, loc.address])
            else:
                spans.append([outer.start, outer.end, loc.address])
    spans.sort()
    merged = []
    for sp in spans:
        if merged and sp[0] < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], sp[1])
            merged[-1][2] = min(merged[-1][2], sp[2])
        else:
            merged.append(sp)
    return set(m[2] for m in merged)
def vufsd_hit(name):
    if gdb.selected_frame().pc() not in vufsd_entries(name):
        return
    t = gdb.selected_thread()
    pid, lwp = t.ptid[0], t.ptid[1]
    print("@@hit %s %d %s %d" % (name, lwp, t.name or "?", 1 if lwp == pid else 0), flush=True)
end
"""


class DocError(Exception):
    pass


def parse_doc(root):
    """The list of (kind, name) in the fenced block of the section."""
    path = os.path.join(root, DOC)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    try:
        i = lines.index(HEADING)
    except ValueError:
        raise DocError(f"{DOC}: no heading '{HEADING}'")
    j = i + 1
    while j < len(lines) and not lines[j].startswith("```"):
        if lines[j].startswith("#"):
            raise DocError(f"{DOC}: no fenced block under '{HEADING}'")
        j += 1
    if j == len(lines):
        raise DocError(f"{DOC}: no fenced block under '{HEADING}'")
    out = []
    for k in range(j + 1, len(lines)):
        line = lines[k]
        if line.startswith("```"):
            break
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        words = text.split()
        if len(words) != 2 or words[0] not in KINDS or \
                not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", words[1]):
            raise DocError(f"{DOC}:{k + 1}: not 'KIND name' with KIND one of "
                           f"{', '.join(KINDS)}: {line!r}")
        out.append((words[0], words[1]))
    else:
        raise DocError(f"{DOC}: the fenced block under '{HEADING}' does not end")
    if not out:
        raise DocError(f"{DOC}: the fenced block under '{HEADING}' is empty")
    return out


def gdb_script(names):
    # LeakSanitizer cannot run under ptrace: in a sanitizer build the traced
    # daemon checks everything but leaks.
    asan = os.environ.get("ASAN_OPTIONS", "")
    s = [f"set environment ASAN_OPTIONS={asan + ':' if asan else ''}detect_leaks=0",
         "set pagination off", "set confirm off", "set breakpoint pending off",
         "set startup-with-shell off", "set debuginfod enabled off",
         # The keeper forks the serving process: follow it.
         "set follow-fork-mode child", "set detach-on-fork on",
         "set print thread-events off", "set print inferior-events on",
         "handle all nostop noprint pass", GDB_PY]
    for n in names:
        s += [f"break {n}", "commands", "silent", f'python vufsd_hit("{n}")', "continue", "end"]
    s += ["run"]
    return "\n".join(s) + "\n"


def record(root, build, options):
    """Runs the helper against vufsd under gdb: (hits, gdb's output)."""
    vufsd = os.path.join(build, "vufsd")
    helper = os.path.join(build, "tests", "setupmapping_once")
    names = sorted(set(n for _, n in parse_doc(root)) | set(COVERED))
    with tempfile.TemporaryDirectory(prefix="vufsd-trace-") as tmp:
        script = os.path.join(tmp, "trace.gdb")
        log = os.path.join(tmp, "gdb.log")
        with open(script, "w") as f:
            f.write(gdb_script(names))
        backend = (f"gdb -batch -nx -q -x {shlex.quote(script)} --args {shlex.quote(vufsd)} "
                   f"--socket-path={{socket}} --shared-dir={{dir}} {DAEMON_OPTIONS} "
                   + " ".join(shlex.quote(o) for o in options))
        p = subprocess.run([helper, "--backend", backend, "--log", log],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=TIMEOUT_S)
        try:
            with open(log, errors="replace") as f:
                out = f.read()
        except FileNotFoundError:
            out = "(no output: gdb did not start)\n"
    undefined = re.findall(r'Function "(\w+)" not defined', out)
    if undefined:
        raise DocError(f"vufsd has no function {', '.join(undefined)} (gdb: "
                       f"{out.strip().splitlines()[-1]})")
    if p.returncode != 0:
        raise DocError(f"the run failed (setupmapping_once exit {p.returncode}):\n"
                       f"{p.stdout}--- gdb and vufsd ---\n{out}")
    if not re.search(r"\[Inferior \d+ \(process \d+\) exited normally\]", out):
        raise DocError(f"the daemon under gdb did not exit normally:\n{out}")
    hits = []
    for line in out.splitlines():
        m = re.fullmatch(r"@@hit (\w+) (\d+) (\S+) ([01])", line.strip())
        if m:
            hits.append((m.group(1), int(m.group(2)), m.group(3), m.group(4) == "1"))
    return hits, out


def thread_class(hit):
    _, _, tname, main = hit
    if main:
        return "message"
    if tname == "vufsd-worker":
        return "worker"
    if tname.startswith("vufsd-req") or tname == "vufsd-hiprio":
        return "queue"
    return "other"


def span(hits):
    """The SETUPMAPPING's hits: from the vqt_handle that took it to its
    vqt_complete (requests are sent one at a time)."""
    anchors = [i for i, h in enumerate(hits) if h[0] == "fll_do_setupmapping"]
    if len(anchors) != 1:
        raise DocError(f"{len(anchors)} hits of fll_do_setupmapping, one expected")
    a = anchors[0]
    starts = [i for i in range(a) if hits[i][0] == "vqt_handle"]
    ends = [i for i in range(a + 1, len(hits)) if hits[i][0] == "vqt_complete"]
    if not starts or not ends:
        raise DocError("no vqt_handle before or no vqt_complete after the SETUPMAPPING")
    return hits[starts[-1]:ends[0] + 1]


def check(doc, hits, pool):
    """Errors (a list of lines; empty when the list matches the hits)."""
    errors = []
    where = {"queue": "queue", "request": "worker" if pool else "queue", "message": "message"}
    # The hits per thread, in order, with their place in the whole run.
    threads = {}
    for t, h in enumerate(hits):
        threads.setdefault(h[1], []).append((t, h))
    lwp_of = {}
    for lwp, hs in threads.items():
        cls = thread_class(hs[0][1])
        if cls not in where.values():
            errors.append(f"hits on thread {lwp} ({hs[0][1][2]}), which runs no line of the "
                          f"list: {' '.join(h[0] for _, h in hs)}")
            continue
        if cls in lwp_of:
            errors.append(f"hits on two {cls} threads ({lwp_of[cls]} and {lwp})")
            continue
        lwp_of[cls] = lwp
    # Per thread: exactly the list's lines for it, in order.
    place = {}  # index in doc -> index in hits
    for cls in sorted(set(where.values())):
        want = [(i, n) for i, (k, n) in enumerate(doc) if where[k] == cls]
        got = threads.get(lwp_of.get(cls), [])
        wn = [n for _, n in want]
        gn = [h[0] for _, h in got]
        kinds = "/".join(k for k in KINDS if where[k] == cls)
        if wn != gn:
            k = 0
            while k < min(len(wn), len(gn)) and wn[k] == gn[k]:
                k += 1
            errors.append(f"the {cls} thread ({kinds} lines) differs from the list at its "
                          f"step {k + 1}: the list says "
                          f"{wn[k] if k < len(wn) else '(nothing more)'}, the daemon ran "
                          f"{gn[k] if k < len(gn) else '(nothing more)'}")
            errors.append(f"  list:   {' '.join(wn)}")
            errors.append(f"  daemon: {' '.join(gn)}")
            continue
        for (i, _), (t, _) in zip(want, got):
            place[i] = t
    if errors:
        return errors
    # Waits: a thread the list comes back to runs on after the lines between.
    seen = set()
    for i, (k, n) in enumerate(doc):
        cls = where[k]
        if i > 0 and cls != where[doc[i - 1][0]] and cls in seen and place[i] < place[i - 1]:
            errors.append(f"the list has {k} {n} wait for {doc[i - 1][0]} {doc[i - 1][1]}, "
                          f"but it ran before it")
        seen.add(cls)
    return errors


def altered(doc):
    """Three wrong lists: (what, list)."""
    mid = len(doc) // 2
    out = [(f"line {mid + 1} ('{' '.join(doc[mid])}') dropped", doc[:mid] + doc[mid + 1:])]
    for i in range(mid, len(doc) - 1):
        if doc[i][0] == doc[i + 1][0] and doc[i][1] != doc[i + 1][1]:
            sw = list(doc)
            sw[i], sw[i + 1] = sw[i + 1], sw[i]
            out.append((f"lines {i + 1} and {i + 2} ('{doc[i][1]}', '{doc[i + 1][1]}') swapped",
                        sw))
            break
    rn = list(doc)
    rn[mid] = (doc[mid][0], doc[mid][1] + "_renamed")
    out.append((f"line {mid + 1} renamed to '{rn[mid][1]}'", rn))
    return out


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    root, build, rest = argv[1], argv[2], argv[3:]
    self_check = "--self-check" in rest
    options = [o for o in rest if o != "--self-check"]
    pool = any(re.fullmatch(r"--thread-pool-size=?\s*[1-9]\d*", o) for o in options)
    config = " ".join(options) or "default"
    if shutil.which("gdb") is None:
        print("SKIP: gdb is not installed (scripts/deps.sh installs it)")
        return 77
    t0 = time.monotonic()
    try:
        doc = parse_doc(root)
        hits, _ = record(root, build, options)
        got = span(hits)
    except DocError as e:
        print(f"FAIL: {e}")
        return 1
    errors = check(doc, got, pool)
    dt = time.monotonic() - t0
    if errors:
        print(f"FAIL: {DOC}, the path of a SETUPMAPPING, does not match the daemon ({config}):")
        for e in errors:
            print(f"  {e}")
        return 1
    print(f"ok: {len(doc)} lines of {DOC} match the SETUPMAPPING's {len(got)} breakpoint hits "
          f"on {len(set(h[1] for h in got))} threads ({config}, {dt:.1f} s)")
    if not self_check:
        return 0
    bad = 0
    for what, wrong in altered(doc):
        errs = check(wrong, got, pool)
        if errs:
            print(f"refused as it must be, {what}: {errs[0]}")
        else:
            print(f"FAIL: accepted with {what}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
