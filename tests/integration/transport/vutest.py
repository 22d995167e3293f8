# SPDX-License-Identifier: GPL-2.0-or-later
"""Helpers for the transport integration tests: start vufsd, talk raw vhost-user."""
import atexit
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

VUFSD = os.environ.get("VUFSD", "")
QEMU = os.environ.get("QEMU", "qemu-system-x86_64")

# Run without namespace sandbox and seccomp unless a test asks otherwise: these
# tests are about the transport, and must run unprivileged too.
UNSANDBOXED = ["--sandbox", "none", "--seccomp", "none", "--unsafe-no-isolation"]

GET_FEATURES, SET_FEATURES, SET_OWNER = 1, 2, 3
SET_MEM_TABLE = 5
SET_VRING_NUM, SET_VRING_ADDR, SET_VRING_BASE, GET_VRING_BASE = 8, 9, 10, 11
SET_VRING_KICK, SET_VRING_CALL, SET_VRING_ERR = 12, 13, 14
GET_PROTOCOL_FEATURES, SET_PROTOCOL_FEATURES, GET_QUEUE_NUM = 15, 16, 17
SET_VRING_ENABLE, SET_BACKEND_REQ_FD = 18, 21
SET_STATUS = 39
GET_STATUS = 40
NEED_REPLY = 0x8
REPLY_ACK_BIT = 3


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def check_sanitizers(text):
    """A sanitizer report in a daemon log fails the test even if the exit status is 0."""
    for needle in ("runtime error:", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer"):
        check(needle not in text, "sanitizer report in the daemon log:\n" + text)


class Daemon:
    """A vufsd process on a socket in a private temporary directory."""

    def __init__(self, extra=(), sandboxed=False, workdir=None, sock=None, env=None):
        if not VUFSD:
            fail("VUFSD is not set")
        self.dir = workdir or tempfile.mkdtemp(prefix="vufsd-transport-")
        self.share = os.path.join(self.dir, "share")
        os.makedirs(self.share, exist_ok=True)
        self.sock = sock or os.path.join(self.dir, "vhost.sock")
        self.log = os.path.join(self.dir, "vufsd-%d.log" % time.monotonic_ns())
        args = [VUFSD, "--socket-path", self.sock, "--shared-dir", self.share,
                "--log-level", "debug"] + ([] if sandboxed else UNSANDBOXED) + list(extra)
        self.logf = open(self.log, "w")
        self.proc = subprocess.Popen(args, stdout=self.logf, stderr=subprocess.STDOUT,
                                     env=None if env is None else dict(os.environ, **env))
        atexit.register(self.kill)  # a failed check must not leave the daemon running

    def wait_listening(self, timeout=30):
        self.wait_log("listening on", timeout)

    def text(self):
        with open(self.log) as f:
            return f.read()

    def wait_log(self, needle, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.text():
                return
            if self.proc.poll() is not None and needle not in self.text():
                fail("vufsd exited (%s) before logging %r:\n%s" % (self.proc.returncode, needle,
                                                                  self.text()))
            time.sleep(0.05)
        fail("vufsd did not log %r within %ss:\n%s" % (needle, timeout, self.text()))

    def alive(self):
        return self.proc.poll() is None

    def wait_exit(self, timeout=60):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            fail("vufsd did not exit within %ss:\n%s" % (timeout, self.text()))
        check_sanitizers(self.text())
        return rc

    def term(self):
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)

    def kill(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait()

    def connect(self):
        # The socket file appears at bind(), a moment before listen(): retry a refusal.
        deadline = time.monotonic() + 10
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(30)
            try:
                s.connect(self.sock)
                return Conn(s)
            except ConnectionRefusedError:
                s.close()
                if time.monotonic() > deadline or not self.alive():
                    raise
                time.sleep(0.05)


class Conn:
    """A raw vhost-user frontend connection."""

    def __init__(self, s):
        self.s = s

    def send(self, req, payload=b"", flags=1, fds=(), size=None):
        hdr = struct.pack("<III", req, flags, len(payload) if size is None else size)
        if fds:
            socket.send_fds(self.s, [hdr + payload], list(fds))
        else:
            self.s.sendall(hdr + payload)

    def recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.s.recv(n - len(buf))
            if not chunk:
                raise EOFError("backend closed the connection")
            buf += chunk
        return buf

    def reply(self, req):
        r, flags, size = struct.unpack("<III", self.recv_exact(12))
        check(r == req, "reply to %d carries request %d" % (req, r))
        check(flags & 0x3 == 1 and flags & 0x4, "reply flags %#x" % flags)
        return self.recv_exact(size)

    def get_u64(self, req):
        self.send(req)
        p = self.reply(req)
        check(len(p) == 8, "reply of %d bytes" % len(p))
        return struct.unpack("<Q", p)[0]

    def call(self, req, payload=b"", fds=(), size=None):
        """Sends with NEED_REPLY and returns the REPLY_ACK value."""
        self.send(req, payload, flags=1 | NEED_REPLY, fds=fds, size=size)
        return struct.unpack("<Q", self.reply(req))[0]

    def handshake(self):
        feats = self.get_u64(GET_FEATURES)
        pfeats = self.get_u64(GET_PROTOCOL_FEATURES)
        check(pfeats & (1 << REPLY_ACK_BIT), "REPLY_ACK not offered")
        self.send(SET_PROTOCOL_FEATURES, struct.pack("<Q", pfeats))
        self.send(SET_OWNER)
        return feats, pfeats

    def close(self):
        self.s.close()


def qemu_cmd(sock, extra=()):
    return [QEMU, "-machine", "q35", "-accel", "tcg", "-m", "256M", "-nodefaults",
            "-no-user-config", "-display", "none", "-monitor", "none", "-serial", "none",
            "-object", "memory-backend-memfd,id=mem,size=256M,share=on",
            "-numa", "node,memdev=mem", "-chardev", "socket,id=vfs,path=" + sock,
            "-device", "vhost-user-fs-pci,chardev=vfs,tag=t", "-S"] + list(extra)
