#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""QEMU 7.2's vhost-user-fs-pci negotiates with vufsd at device realize (no guest
kernel needed: -S). The handshake must complete in QEMU's order, QEMU quitting
must make vufsd exit 0, and with --reconnect vufsd must serve a second QEMU."""
import os
import shutil
import subprocess
import sys
import time

from vutest import Daemon, check, fail, qemu_cmd, QEMU

HANDSHAKE = ["GET_FEATURES", "GET_PROTOCOL_FEATURES", "SET_PROTOCOL_FEATURES",
             "GET_QUEUE_NUM", "GET_MAX_MEM_SLOTS", "SET_BACKEND_REQ_FD", "SET_OWNER",
             "SET_VRING_CALL"]


def run_qemu(d, tag):
    log = open(os.path.join(d.dir, "qemu-%s.log" % tag), "w")
    return subprocess.Popen(qemu_cmd(d.sock), stdout=log, stderr=subprocess.STDOUT)


def wait_handshake(d, nth):
    for name in HANDSHAKE:
        needle = "vhost-user: %s done" % name
        deadline_ok = False
        for _ in range(2400):  # 120 s: QEMU under TCG on a loaded machine
            if d.text().count(needle) >= nth:
                deadline_ok = True
                break
            if not d.alive():
                fail("vufsd died during the handshake:\n" + d.text())
            time.sleep(0.05)
        check(deadline_ok, "handshake step %s (#%d) missing:\n%s" % (name, nth, d.text()))
    # QEMU's order: features, then protocol features, then ownership.
    text = d.text()
    pos = [text.find("vhost-user: %s done" % n) for n in HANDSHAKE[:3]]
    check(pos == sorted(pos), "handshake out of order:\n" + text)
    check("failed" not in text, "a vhost-user request failed:\n" + text)


def stop_qemu(q):
    q.terminate()
    try:
        q.wait(60)
    except subprocess.TimeoutExpired:
        q.kill()
        q.wait()


def test_handshake_then_exit(sandboxed):
    d = Daemon(sandboxed=sandboxed)
    d.wait_listening()
    q = run_qemu(d, "1")
    try:
        wait_handshake(d, 1)
    finally:
        stop_qemu(q)
    rc = d.wait_exit(60)
    check(rc == 0, "vufsd exit status %d after QEMU quit:\n%s" % (rc, d.text()))
    check("frontend disconnected" in d.text(), "disconnect not logged")
    check(not os.path.exists(d.sock), "socket left behind")
    check(not os.path.exists(d.sock + ".pid"), "pid file left behind")
    shutil.rmtree(d.dir, ignore_errors=True)


def test_reconnect():
    d = Daemon(["--reconnect"])
    d.wait_listening()
    q = run_qemu(d, "1")
    try:
        wait_handshake(d, 1)
    finally:
        stop_qemu(q)
    d.wait_log("waiting for a new frontend")
    check(d.alive(), "vufsd exited despite --reconnect")
    q = run_qemu(d, "2")
    try:
        wait_handshake(d, 2)
    finally:
        stop_qemu(q)
    d.wait_log("waiting for a new frontend")
    d.term()
    rc = d.wait_exit(60)
    check(rc == 0, "vufsd exit status %d after SIGTERM:\n%s" % (rc, d.text()))
    shutil.rmtree(d.dir, ignore_errors=True)


if __name__ == "__main__":
    if not shutil.which(QEMU):
        # scripts/deps.sh installs QEMU: a handshake test that did not run is a failure.
        print("FAIL: %s not installed" % QEMU)
        sys.exit(1)
    which = sys.argv[1] if len(sys.argv) > 1 else "plain"
    if which == "plain":
        test_handshake_then_exit(False)
    elif which == "sandboxed":
        if os.geteuid() != 0:
            print("SKIP: the namespace sandbox needs root")
            sys.exit(77)
        test_handshake_then_exit(True)
    elif which == "reconnect":
        test_reconnect()
    print("PASS")
