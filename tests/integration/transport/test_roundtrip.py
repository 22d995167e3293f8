#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""FUSE round trips through the in-tree frontend (vufs-frontend) against the real
binary: the transport's data path under the default sandbox (namespace + seccomp
kill) and with the worker pool, on several request queues."""
import os
import shutil
import subprocess
import sys
import tempfile

from vutest import VUFSD, UNSANDBOXED, check, check_sanitizers, fail

VFE = os.environ.get("VFE", "")


def roundtrip(extra, queues, label):
    work = tempfile.mkdtemp(prefix="vufsd-transport-")
    share = os.path.join(work, "share")
    os.mkdir(share)
    payload = "transport %s %d\n" % (label, os.getpid())
    with open(os.path.join(share, "f.txt"), "w") as f:
        f.write(payload)
    log = os.path.join(work, "backend.log")
    backend = "%s --socket-path {socket} --shared-dir {dir} --log-level debug %s" % (
        VUFSD, " ".join(extra))
    for cmd in (["cat", "/f.txt"], ["ls", "/"], ["write", "/g.txt", "written"]):
        r = subprocess.run([VFE, "--backend", backend, "--dir", share, "--queues", str(queues),
                            "--backend-log", log] + cmd,
                           capture_output=True, text=True, timeout=120)
        with open(log) as f:
            blog = f.read()
        check(r.returncode == 0, "%s: %s failed (%d): %s\n%s" % (label, cmd, r.returncode,
                                                                 r.stderr, blog))
        if cmd[0] == "cat":
            check(payload.strip() in r.stdout, "%s: read back %r" % (label, r.stdout))
        if cmd[0] == "ls":
            check("f.txt" in r.stdout, "%s: listing %r" % (label, r.stdout))
        check("marked broken" not in blog, "%s: device broke:\n%s" % (label, blog))
        check_sanitizers(blog)
    with open(os.path.join(share, "g.txt")) as f:
        check(f.read() == "written", "%s: written file content" % label)
    shutil.rmtree(work, ignore_errors=True)


def reconnect():
    """--reconnect: each new frontend gets a clean device and a fresh FUSE session."""
    from vutest import Daemon
    d = Daemon(UNSANDBOXED + ["--reconnect"])
    d.wait_listening()
    with open(os.path.join(d.share, "f.txt"), "w") as f:
        f.write("again\n")
    for i in range(3):
        r = subprocess.run([VFE, "--socket", d.sock, "--queues", "2", "cat", "/f.txt"],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0 and "again" in r.stdout,
              "connection %d: %d %s\n%s" % (i, r.returncode, r.stderr, d.text()))
        d.wait_log("waiting for a new frontend")
        check(d.alive(), "daemon exited despite --reconnect")
    check(d.text().count("frontend connected") == 3, "three connections expected")
    d.term()
    check(d.wait_exit(30) == 0, "exit status after SIGTERM")
    shutil.rmtree(d.dir, ignore_errors=True)


def sigterm_busy(extra):
    """SIGTERM while requests are in flight on several queues: in-flight requests
    complete, the daemon exits 0 and sanitizers stay quiet."""
    import time
    from vutest import Daemon
    d = Daemon(UNSANDBOXED + list(extra))
    d.wait_listening()
    with open(os.path.join(d.share, "big"), "wb") as f:
        f.write(os.urandom(8 << 20))
    bench = subprocess.Popen([VFE, "--socket", d.sock, "--queues", "4", "--depth", "16",
                              "--block", "65536", "--random", "bench", "read", "/big", "30"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    d.wait_log("queue 4 started", 60)
    time.sleep(1.0)  # let requests pile up; not a timing assertion
    if bench.poll() is not None:
        fail("the benchmark ended early:\n" + bench.stdout.read())
    d.term()
    rc = d.wait_exit(60)
    check(rc == 0, "exit status %d on SIGTERM under load:\n%s" % (rc, d.text()[-3000:]))
    check("signal received" in d.text(), "SIGTERM not logged")
    bench.kill()
    bench.wait()
    shutil.rmtree(d.dir, ignore_errors=True)


if __name__ == "__main__":
    if not VFE:
        print("FAIL: VFE (vufs-frontend) not given")
        sys.exit(1)
    which = sys.argv[1]
    if which == "sandboxed":
        if os.geteuid() != 0:
            print("SKIP: the namespace sandbox needs root")
            sys.exit(77)
        roundtrip([], 1, "sandboxed")
        roundtrip(["--thread-pool-size", "2"], 2, "sandboxed-pool")
    elif which == "sigterm-busy":
        sigterm_busy([])
        sigterm_busy(["--thread-pool-size", "2"])
    elif which == "reconnect":
        reconnect()
    elif which == "pool":
        roundtrip(UNSANDBOXED + ["--thread-pool-size", "4"], 4, "pool")
    else:
        roundtrip(UNSANDBOXED, 2, "inline")
    print("PASS")
