#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A hostile frontend and a hostile guest against the real binary: malformed
vhost-user messages get error replies and leak no fds; a malicious descriptor
chain marks the device broken without killing the process; after the frontend
resets the device, a well-formed FUSE_INIT is served on the same connection."""
import mmap
import os
import select
import shutil
import struct
import sys
import tempfile

from vutest import (Daemon, check, fail, GET_FEATURES, SET_FEATURES, SET_MEM_TABLE,
                    SET_VRING_NUM, SET_VRING_ADDR, SET_VRING_BASE, GET_VRING_BASE,
                    SET_VRING_KICK, SET_VRING_CALL, SET_BACKEND_REQ_FD, GET_QUEUE_NUM,
                    GET_STATUS, SET_STATUS)

VERSION_1 = 1 << 32
GPA = 0x100000
UVA = 0x7f1200000000  # the frontend's address of the region: only a key for the backend
MEMSZ = 1 << 20
RING = 8
DESC, AVAIL, USED, BUF = 0x0, 0x1000, 0x2000, 0x10000
Q = 1  # first request queue


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def test_bad_messages(d, c):
    c.handshake()
    before = fd_count(d.proc.pid)
    check(c.call(99) != 0, "unknown request acknowledged as success")
    check(c.call(99) != 0, "unknown request acknowledged as success (2nd)")
    check(d.text().count("unsupported request 99") <= 1, "unknown request logged twice")
    check(c.call(SET_BACKEND_REQ_FD) != 0, "SET_BACKEND_REQ_FD without an fd accepted")
    check(c.call(SET_FEATURES, b"\0" * 4) != 0, "truncated SET_FEATURES accepted")
    check(c.call(SET_FEATURES, struct.pack("<Q", 1 << 5)) != 0, "unoffered feature accepted")
    check(c.call(SET_VRING_NUM, struct.pack("<II", Q, 3)) != 0, "ring size 3 accepted")
    check(c.call(SET_VRING_NUM, struct.pack("<II", 99, 8)) != 0, "queue 99 accepted")
    check(c.call(SET_VRING_BASE, struct.pack("<II", Q, 0x10000)) != 0, "base > 0xffff accepted")
    # Wrong fd counts: the fds must be closed, not leaked.
    rfd, wfd = os.pipe()
    for _ in range(20):
        table = struct.pack("<II", 1, 0) + struct.pack("<QQQQ", GPA, MEMSZ, UVA, 0)
        check(c.call(SET_MEM_TABLE, table, fds=[rfd, wfd, rfd]) != 0,
              "SET_MEM_TABLE with 3 fds for 1 region accepted")
        check(c.call(SET_FEATURES, struct.pack("<Q", VERSION_1), fds=[rfd]) != 0,
              "SET_FEATURES carrying an fd accepted")
    # Overflowing region.
    table = struct.pack("<II", 1, 0) + struct.pack("<QQQQ", 2**64 - 4096, 8192, UVA, 0)
    check(c.call(SET_MEM_TABLE, table, fds=[rfd]) != 0, "overflowing region accepted")
    os.close(rfd)
    os.close(wfd)
    after = fd_count(d.proc.pid)
    check(after <= before, "fds leaked: %d before, %d after" % (before, after))
    # Replies still come for requests that have their own.
    c.send(GET_VRING_BASE, struct.pack("<II", 99, 0))
    check(len(c.reply(GET_VRING_BASE)) == 8, "GET_VRING_BASE on a bad index: bad reply")
    check(c.get_u64(GET_QUEUE_NUM) == 17, "queue count")
    check(c.get_u64(GET_STATUS) == 0, "status")
    check(d.alive(), "daemon died")


class Guest:
    """One memfd region with one ring, laid out like a driver would."""

    def __init__(self, c):
        self.c = c
        self.fd = os.memfd_create("guest")
        os.ftruncate(self.fd, MEMSZ)
        self.m = mmap.mmap(self.fd, MEMSZ)
        self.kick = os.eventfd(0)
        self.callfd = os.eventfd(0, os.EFD_NONBLOCK)
        self.avail_idx = 0

    def start(self):
        c = self.c
        check(c.call(SET_FEATURES, struct.pack("<Q", VERSION_1)) == 0, "SET_FEATURES")
        table = struct.pack("<II", 1, 0) + struct.pack("<QQQQ", GPA, MEMSZ, UVA, 0)
        check(c.call(SET_MEM_TABLE, table, fds=[self.fd]) == 0, "SET_MEM_TABLE")
        check(c.call(SET_VRING_NUM, struct.pack("<II", Q, RING)) == 0, "SET_VRING_NUM")
        check(c.call(SET_VRING_BASE, struct.pack("<II", Q, self.avail_idx)) == 0,
              "SET_VRING_BASE")
        addr = struct.pack("<IIQQQQ", Q, 0, UVA + DESC, UVA + USED, UVA + AVAIL, 0)
        check(c.call(SET_VRING_ADDR, addr) == 0, "SET_VRING_ADDR")
        check(c.call(SET_VRING_CALL, struct.pack("<Q", Q), fds=[self.callfd]) == 0,
              "SET_VRING_CALL")
        check(c.call(SET_VRING_KICK, struct.pack("<Q", Q), fds=[self.kick]) == 0,
              "SET_VRING_KICK")

    def desc(self, i, addr, length, flags, nxt):
        struct.pack_into("<QIHH", self.m, DESC + 16 * i, addr, length, flags, nxt)

    def submit(self, head):
        struct.pack_into("<H", self.m, AVAIL + 4 + 2 * (self.avail_idx % RING), head)
        self.avail_idx = (self.avail_idx + 1) & 0xffff
        struct.pack_into("<H", self.m, AVAIL + 2, self.avail_idx)
        os.eventfd_write(self.kick, 1)

    def used_idx(self):
        return struct.unpack_from("<H", self.m, USED + 2)[0]

    def wait_used(self, idx, timeout=30):
        r, _, _ = select.select([self.callfd], [], [], timeout)
        check(r, "no used-buffer notification within %ss" % timeout)
        os.eventfd_read(self.callfd)
        check(self.used_idx() == idx, "used idx %d, expected %d" % (self.used_idx(), idx))
        slot = (idx - 1) % RING
        return struct.unpack_from("<II", self.m, USED + 4 + 8 * slot)


def fuse_init(g, head):
    """FUSE_INIT as a two-descriptor chain; returns (reply length, error, unique)."""
    unique = 0x1234
    init_in = struct.pack("<IIII", 7, 38, 0x20000, 0) + b"\0" * 48
    hdr = struct.pack("<IIQQIIIHH", 40 + len(init_in), 26, unique, 0, 0, 0, 1, 0, 0)
    req = hdr + init_in
    g.m[BUF:BUF + len(req)] = req
    g.desc(head, GPA + BUF, len(req), 1, head + 1)             # readable, NEXT
    g.desc(head + 1, GPA + BUF + 0x1000, 4096, 2, 0)           # writable
    g.submit(head)
    used_id, used_len = g.wait_used(g.expected)
    check(used_id == head, "used id %d, expected %d" % (used_id, head))
    out = bytes(g.m[BUF + 0x1000:BUF + 0x1000 + 16])
    length, error, uniq = struct.unpack("<IiQ", out)
    return used_len, length, error, uniq


def test_broken_ring_then_reset(d, c):
    c.handshake()
    g = Guest(c)
    g.start()
    # A descriptor loop: 0 -> 1 -> 0.
    g.desc(0, GPA + BUF, 16, 1, 1)
    g.desc(1, GPA + BUF, 16, 1, 0)
    g.submit(0)
    d.wait_log("device marked broken", 30)
    check(d.alive(), "daemon died on a descriptor loop")
    check("malformed descriptor chain" in d.text(), "reason not logged")
    # The frontend resets the device: stop the ring, restart it with a good chain.
    c.send(GET_VRING_BASE, struct.pack("<II", Q, 0))
    idx, base = struct.unpack("<II", c.reply(GET_VRING_BASE))
    check(idx == Q and base == 1, "GET_VRING_BASE after the broken chain: %d %d" % (idx, base))
    g.avail_idx = base
    struct.pack_into("<H", g.m, USED + 2, base)  # the driver reset: used catches up
    g.kick = os.eventfd(0)
    g.start()
    d.wait_log("serving again", 30)
    g.expected = base + 1
    used_len, length, error, uniq = fuse_init(g, 2)
    check(error == 0, "FUSE_INIT error %d" % error)
    check(uniq == 0x1234, "FUSE_INIT reply for unique %#x" % uniq)
    check(used_len == length and length > 16, "used len %d vs reply len %d" % (used_len, length))
    # Out-of-range head on the same ring: broken again, still alive, logged once more.
    g.submit(RING + 5)
    d.wait_log("device marked broken", 30)
    check(d.alive(), "daemon died on an out-of-range head")
    c.close()
    check(d.wait_exit(30) == 0, "exit status after disconnect")


ADD_MEM_REG, REM_MEM_REG = 37, 38
GPA_B = GPA + MEMSZ  # region B starts where A ends
UVA_B = UVA + 0x10000000


def init_request(unique):
    init_in = struct.pack("<IIII", 7, 38, 0x20000, 0) + b"\0" * 48
    hdr = struct.pack("<IIQQIIIHH", 40 + len(init_in), 26, unique, 0, 0, 0, 1, 0, 0)
    return hdr + init_in


def test_mem_hotplug(d, c):
    """Regions added and removed while the ring runs; a reply straddling two regions."""
    c.handshake()
    g = Guest(c)
    g.start()
    fd_b = os.memfd_create("guest-b")
    os.ftruncate(fd_b, MEMSZ)
    mb = mmap.mmap(fd_b, MEMSZ)
    region_b = struct.pack("<QQQQQ", 0, GPA_B, MEMSZ, UVA_B, 0)
    check(c.call(ADD_MEM_REG, region_b, fds=[fd_b]) == 0, "ADD_MEM_REG")
    # Request in B; reply buffer = last 8 bytes of A + the start of B.
    req = init_request(0x77)
    mb[0x100:0x100 + len(req)] = req
    g.desc(0, GPA_B + 0x100, len(req), 1, 1)
    g.desc(1, GPA_B - 8, 4096, 2, 0)
    g.m[MEMSZ - 8:MEMSZ] = b"\xff" * 8  # poison the split reply header
    mb[0:8] = b"\xff" * 8
    g.submit(0)
    used_id, used_len = g.wait_used(1)
    check(used_id == 0, "used id %d" % used_id)
    out = bytes(g.m[MEMSZ - 8:MEMSZ]) + bytes(mb[0:8])
    length, error, uniq = struct.unpack("<IiQ", out)
    check(error == 0 and uniq == 0x77, "straddled reply: error %d unique %#x" % (error, uniq))
    check(used_len == length and length > 16, "used len %d, reply len %d" % (used_len, length))
    # Remove B: a chain pointing into it is now outside guest memory.
    check(c.call(REM_MEM_REG, region_b) == 0, "REM_MEM_REG")
    check(c.call(REM_MEM_REG, region_b) != 0, "REM_MEM_REG of a removed region accepted")
    g.desc(2, GPA_B + 0x100, len(req), 1, 3)
    g.desc(3, GPA + BUF, 4096, 2, 0)
    g.submit(2)
    d.wait_log("device marked broken", 30)
    check("Bad address" in d.text(), "EFAULT not reported:\n" + d.text())
    check(d.alive(), "daemon died on a chain into a removed region")
    c.close()
    check(d.wait_exit(30) == 0, "exit status after disconnect")


def bad_kick_then_reset(d, c, bad, poke):
    """Starts the ring with a kick fd that is not an eventfd; poke() makes it
    readable. The queue must not spin on it, and a reset with a real eventfd
    serves again."""
    c.handshake()
    g = Guest(c)
    g.kick = bad
    g.start()
    poke()
    d.wait_log("kick fd is not an eventfd", 30)
    check(d.alive(), "daemon died on a bad kick fd")
    # The message thread still answers, and a reset with a real eventfd serves again.
    c.send(GET_VRING_BASE, struct.pack("<II", Q, 0))
    idx, base = struct.unpack("<II", c.reply(GET_VRING_BASE))
    check(idx == Q and base == 0, "GET_VRING_BASE: %d %d" % (idx, base))
    g.kick = os.eventfd(0)
    g.start()
    d.wait_log("serving again", 30)
    g.expected = 1
    used_len, length, error, uniq = fuse_init(g, 0)
    check(error == 0 and uniq == 0x1234, "FUSE_INIT after the reset: %d %#x" % (error, uniq))
    os.close(bad)
    c.close()
    check(d.wait_exit(30) == 0, "exit status after disconnect")


def test_bad_kick_fd(d, c):
    """A kick 'eventfd' that is really a pipe."""
    r, w = os.pipe()

    def poke():
        os.write(w, b"x")  # readable, but 1 byte: not an eventfd counter
        os.close(w)
    bad_kick_then_reset(d, c, r, poke)


def test_file_kick_fd(d, c):
    """A kick 'eventfd' that is a regular file (always readable, cannot be epolled)."""
    fd, path = tempfile.mkstemp()
    os.unlink(path)
    bad_kick_then_reset(d, c, fd, lambda: os.write(fd, struct.pack("<Q", 1)))


def test_stop_start_keeps_session(d, c):
    """A VM pause/resume: GET_VRING_BASE stops the ring, a new start resumes at the
    returned index, and the FUSE session survives (no second INIT needed)."""
    c.handshake()
    g = Guest(c)
    g.start()
    g.expected = 1
    used_len, length, error, uniq = fuse_init(g, 0)
    check(error == 0, "FUSE_INIT error %d" % error)
    c.send(GET_VRING_BASE, struct.pack("<II", Q, 0))
    idx, base = struct.unpack("<II", c.reply(GET_VRING_BASE))
    check(idx == Q and base == 1, "GET_VRING_BASE: %d %d" % (idx, base))
    g.kick = os.eventfd(0)
    g.start()  # SET_VRING_BASE 1
    getattr_in = struct.pack("<IIQ", 0, 0, 0)
    hdr = struct.pack("<IIQQIIIHH", 40 + len(getattr_in), 3, 0x99, 1, 0, 0, 1, 0, 0)
    req = hdr + getattr_in
    g.m[BUF:BUF + len(req)] = req
    g.desc(4, GPA + BUF, len(req), 1, 5)
    g.desc(5, GPA + BUF + 0x1000, 4096, 2, 0)
    g.submit(4)
    used_id, used_len = g.wait_used(2)
    length, error, uniq = struct.unpack("<IiQ", bytes(g.m[BUF + 0x1000:BUF + 0x1010]))
    check(used_id == 4 and uniq == 0x99, "GETATTR reply id %d unique %#x" % (used_id, uniq))
    check(error == 0, "GETATTR after stop/start failed with %d: session lost?" % error)
    check(used_len == length and length == 16 + 104, "GETATTR reply length %d" % length)
    c.close()
    check(d.wait_exit(30) == 0, "exit status after disconnect")


def guest_reset(c, g, how):
    """A guest driver reset as QEMU shows it to the backend: every queue stopped
    (GET_VRING_BASE), with "status" also SET_STATUS 0; then the new driver's rings
    start from index 0 in freshly zeroed memory."""
    c.send(GET_VRING_BASE, struct.pack("<II", Q, 0))
    c.reply(GET_VRING_BASE)
    if how == "status":
        check(c.call(SET_STATUS, struct.pack("<Q", 0)) == 0, "SET_STATUS 0")
    g.m[0:0x10000] = bytes(0x10000)  # the new driver's rings, zeroed
    g.avail_idx = 0
    g.kick = os.eventfd(0)
    g.start()
    if how == "status":
        check(c.call(SET_STATUS, struct.pack("<Q", 15)) == 0, "SET_STATUS DRIVER_OK")


def getattr_error(g, head, expected):
    getattr_in = struct.pack("<IIQ", 0, 0, 0)
    hdr = struct.pack("<IIQQIIIHH", 40 + len(getattr_in), 3, 0x99, 1, 0, 0, 1, 0, 0)
    req = hdr + getattr_in
    g.m[BUF:BUF + len(req)] = req
    g.desc(head, GPA + BUF, len(req), 1, head + 1)
    g.desc(head + 1, GPA + BUF + 0x1000, 4096, 2, 0)
    g.submit(head)
    used_id, used_len = g.wait_used(expected)
    length, error, uniq = struct.unpack("<IiQ", bytes(g.m[BUF + 0x1000:BUF + 0x1010]))
    check(used_id == head and uniq == 0x99, "GETATTR reply id %d unique %#x" % (used_id, uniq))
    return error


def test_reset_new_session(d, c, how):
    """A guest reboot without FUSE_DESTROY (a crash, kexec, driver rebind): the new
    driver's FUSE_INIT starts a new session instead of being refused, and a second
    INIT of the same driver is refused as before."""
    c.handshake()
    g = Guest(c)
    g.start()
    g.expected = 1
    _, _, error, _ = fuse_init(g, 0)
    check(error == 0, "first FUSE_INIT error %d" % error)
    for boot in range(3):
        guest_reset(c, g, how)
        g.expected = 1
        _, _, error, _ = fuse_init(g, 0)
        check(error == 0, "FUSE_INIT after reset %d refused with %d (the session of the "
              "old driver was kept)" % (boot + 1, error))
        check(getattr_error(g, 2, 2) == 0, "GETATTR in the new session failed")
        g.expected = 3
        _, _, error, _ = fuse_init(g, 4)
        check(error == -71, "a second FUSE_INIT without a reset: %d, not EPROTO" % error)
    check("new session" in d.text(), "the new session is not logged:\n" + d.text())
    c.close()
    check(d.wait_exit(30) == 0, "exit status after disconnect")


GET_CONFIG, SET_CONFIG, CONFIG_BIT = 24, 25, 9


def test_config_space(d, c):
    """GET_CONFIG (the generic vhost-user device reads virtio-fs's config space from
    the backend): --tag and --num-request-queues, any window inside the 40 bytes,
    an empty reply for a window outside, SET_CONFIG refused; no fd leaks."""
    _, pfeats = c.handshake()
    check(pfeats & (1 << CONFIG_BIT), "CONFIG not offered with --tag")
    before = fd_count(d.proc.pid)

    def get(offset, size, flags=0, claim=None):
        payload = struct.pack("<III", offset, size if claim is None else claim, flags)
        c.send(GET_CONFIG, payload + bytes(size))
        return c.reply(GET_CONFIG)

    p = get(0, 40)
    check(len(p) == 52, "GET_CONFIG reply of %d bytes" % len(p))
    off, size, flags = struct.unpack_from("<III", p)
    check((off, size, flags) == (0, 40, 0), "GET_CONFIG echoed %r" % ((off, size, flags),))
    check(p[12:12 + 36] == b"myfs" + bytes(32), "tag %r" % p[12:48])
    check(struct.unpack_from("<I", p, 48)[0] == 4, "num_request_queues %r" % p[48:52])
    p = get(36, 4)
    check(len(p) == 16 and struct.unpack_from("<I", p, 12)[0] == 4, "window read %r" % p)
    for bad in ((37, 4), (41, 0), (0xffffffff, 2), (0, 4, 2)):
        p = get(*bad)
        check(p == b"", "GET_CONFIG %r answered %r, not the empty error reply" % (bad, p))
    # A size that disagrees with the payload: refused before the handler.
    c.send(GET_CONFIG, struct.pack("<III", 0, 40, 0) + bytes(8))
    check(c.reply(GET_CONFIG) == b"", "size mismatch answered")
    check(c.call(SET_CONFIG, struct.pack("<III", 0, 4, 0) + b"evil") != 0, "SET_CONFIG accepted")
    p = get(0, 40)
    check(p[12:16] == b"myfs", "SET_CONFIG changed the tag")
    check(fd_count(d.proc.pid) <= before, "fds leaked")
    c.close()
    check(d.wait_exit(30) == 0, "exit status after disconnect")

    # Without --tag: no CONFIG feature (QEMU 7.1-8.0 crash on a CONFIG they do not
    # use), and GET_CONFIG gets the empty error reply.
    d2 = Daemon()
    d2.wait_listening()
    c2 = d2.connect()
    _, pfeats = c2.handshake()
    check(not pfeats & (1 << CONFIG_BIT), "CONFIG offered without --tag")
    c2.send(GET_CONFIG, struct.pack("<III", 0, 40, 0) + bytes(40))
    check(c2.reply(GET_CONFIG) == b"", "GET_CONFIG answered without the feature")
    c2.close()
    check(d2.wait_exit(30) == 0, "exit status after disconnect")


def test_oversized_header(d, c):
    c.handshake()
    c.send(GET_FEATURES, b"", size=0x100000)  # claims a 1 MiB payload
    rc = d.wait_exit(30)
    check(rc == 0, "exit status %d after a corrupt stream" % rc)
    check("stream corrupt" in d.text(), "corrupt stream not logged:\n" + d.text())


if __name__ == "__main__":
    which = sys.argv[1]
    d = Daemon({"broken-pool": ["--thread-pool-size", "2"],
                "config": ["--tag", "myfs", "--num-request-queues", "4"]}.get(which, []))
    d.wait_listening()
    c = d.connect()
    try:
        {"messages": test_bad_messages, "broken": test_broken_ring_then_reset,
         "broken-pool": test_broken_ring_then_reset,
         "oversized": test_oversized_header, "hotplug": test_mem_hotplug,
         "badkick": test_bad_kick_fd, "filekick": test_file_kick_fd,
         "stopstart": test_stop_start_keeps_session,
         "reset-rings": lambda d, c: test_reset_new_session(d, c, "rings"),
         "reset-status": lambda d, c: test_reset_new_session(d, c, "status"),
         "config": test_config_space}[which](d, c)
    finally:
        d.term()
        d.wait_exit(30)
    shutil.rmtree(d.dir, ignore_errors=True)
    print("PASS")
