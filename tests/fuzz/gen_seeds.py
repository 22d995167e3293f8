#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Writes the seed corpus in tests/fuzz/corpus/<target>/: small, valid inputs
that take each fuzz target straight to its interesting code (valid FUSE
requests, valid descriptor chains, valid vhost-user messages, valid DAX map and
unmap sequences). The fuzzers mutate from there.

Run from anywhere: python3 tests/fuzz/gen_seeds.py. Deterministic; the output
is committed. Regression inputs (crashes found and fixed) live next to the
seeds as regress-<name> and are never overwritten by this script.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- fuzz_fll: 6 control bytes + one FUSE request (see tests/unit/fll/fll_fuzz.c)

FUSE = dict(LOOKUP=1, FORGET=2, GETATTR=3, SETATTR=4, READLINK=5, SYMLINK=6, MKNOD=8,
            MKDIR=9, UNLINK=10, RMDIR=11, RENAME=12, LINK=13, OPEN=14, READ=15, WRITE=16,
            STATFS=17, RELEASE=18, FSYNC=20, SETXATTR=21, GETXATTR=22, LISTXATTR=23,
            REMOVEXATTR=24, FLUSH=25, INIT=26, OPENDIR=27, READDIR=28, RELEASEDIR=29,
            GETLK=31, SETLK=32, SETLKW=33, ACCESS=34, CREATE=35, INTERRUPT=36,
            DESTROY=38, BATCH_FORGET=42, FALLOCATE=43, READDIRPLUS=44, RENAME2=45,
            LSEEK=46, COPY_FILE_RANGE=47, SETUPMAPPING=48, REMOVEMAPPING=49, SYNCFS=50,
            TMPFILE=51, STATX=52)


def fuse_req(opcode, nodeid, body, unique=2):
    hdr = struct.pack("<IIQQIIIHH", 40 + len(body), FUSE[opcode], unique, nodeid,
                      1000, 1000, 4242, 0, 0)
    return hdr + body


def secctx(xname, value):
    """A fuse_secctx_header blob with one context, padded as Linux pads it."""
    ent = struct.pack("<II", len(value), 0) + xname + b"\0" + value
    ent += b"\0" * (-len(ent) % 8)
    return struct.pack("<II", 8 + len(ent), 1) + ent


def with_ext(req, ext):
    """req with ext appended as its request extensions (total_extlen, len)."""
    req = bytearray(req + ext)
    struct.pack_into("<I", req, 0, len(req))
    struct.pack_into("<H", req, 36, len(ext) // 8)
    return bytes(req)


def fll_seed(req, init_first=True, reply=65536):
    ctl = bytes([0, 0]) + struct.pack("<H", reply // 16) + \
        bytes([(1 if init_first else 0), 0xff])
    return ctl + req


def name(s):
    return s.encode() + b"\0"


def fll_seeds():
    init = struct.pack("<IIIII", 7, 41, 131072, 0xffffffff, 0xffffffff) + bytes(44)
    write("fuzz_fll", "init", fll_seed(fuse_req("INIT", 0, init, 1), init_first=False))
    write("fuzz_fll", "init-7.31", fll_seed(
        fuse_req("INIT", 0, struct.pack("<IIII", 7, 31, 131072, 0x3fffffff), 1),
        init_first=False))
    write("fuzz_fll", "lookup", fll_seed(fuse_req("LOOKUP", 1, name("hello"))))
    write("fuzz_fll", "getattr", fll_seed(fuse_req("GETATTR", 2, struct.pack("<IIQ", 0, 0, 0))))
    write("fuzz_fll", "open", fll_seed(fuse_req("OPEN", 2, struct.pack("<II", 2, 0))))
    read_in = struct.pack("<QQIIQII", 7, 4096, 8192, 0, 0, 0, 0)
    write("fuzz_fll", "read", fll_seed(fuse_req("READ", 2, read_in)))
    data = b"vufsd" * 20
    write_in = struct.pack("<QQIIQII", 7, 0, len(data), 0, 0, 0, 0)
    write("fuzz_fll", "write", fll_seed(fuse_req("WRITE", 2, write_in + data)))
    # The same WRITE cut into 7-byte iovecs and a reply split in 3-byte pieces.
    w = bytearray(fll_seed(fuse_req("WRITE", 2, write_in + data)))
    w[0], w[1] = 7, 3
    write("fuzz_fll", "write-split", bytes(w))
    write("fuzz_fll", "mkdir", fll_seed(fuse_req("MKDIR", 1, struct.pack("<II", 0o755, 0o22)
                                                  + name("dir"))))
    write("fuzz_fll", "create", fll_seed(fuse_req(
        "CREATE", 1, struct.pack("<IIII", 0o102, 0o644, 0o22, 0) + name("new"))))
    write("fuzz_fll", "symlink", fll_seed(fuse_req("SYMLINK", 1, name("link") + name("target"))))
    # FUSE_SECURITY_CTX: a label as a 7.38+ request extension.
    write("fuzz_fll", "mkdir-secctx", fll_seed(with_ext(
        fuse_req("MKDIR", 1, struct.pack("<II", 0o755, 0o22) + name("dir")),
        secctx(b"security.selinux", b"system_u:object_r:tmp_t:s0\0"))))
    write("fuzz_fll", "create-secctx", fll_seed(with_ext(
        fuse_req("CREATE", 1, struct.pack("<IIII", 0o102, 0o644, 0o22, 0) + name("new")),
        secctx(b"security.SMACK64", b"_"))))
    # CVE-2026-47243: an absolute host path as the SYMLINK name must be refused.
    write("fuzz_fll", "symlink-abs-name", fll_seed(fuse_req(
        "SYMLINK", 1, name("/etc/cron.d/x") + name("/bin/sh"))))
    write("fuzz_fll", "lookup-dotdot", fll_seed(fuse_req("LOOKUP", 1, name(".."))))
    write("fuzz_fll", "rename2", fll_seed(fuse_req(
        "RENAME2", 1, struct.pack("<QII", 1, 1, 0) + name("a") + name("b"))))
    write("fuzz_fll", "link", fll_seed(fuse_req("LINK", 1, struct.pack("<Q", 2) + name("hard"))))
    write("fuzz_fll", "unlink", fll_seed(fuse_req("UNLINK", 1, name("hello"))))
    write("fuzz_fll", "setxattr", fll_seed(fuse_req(
        "SETXATTR", 2, struct.pack("<IIII", 3, 0, 0, 0) + name("user.x") + b"abc")))
    write("fuzz_fll", "getxattr", fll_seed(fuse_req(
        "GETXATTR", 2, struct.pack("<II", 64, 0) + name("user.x"))))
    write("fuzz_fll", "readdirplus", fll_seed(fuse_req("READDIRPLUS", 1, read_in)))
    setattr_in = struct.pack("<IIQQQQQQIIIIIII", 1 << 3, 0, 7, 4096, 0, 0, 0, 0, 0, 0, 0,
                             0o644, 0, 1000, 1000) + bytes(4)
    write("fuzz_fll", "setattr", fll_seed(fuse_req("SETATTR", 2, setattr_in)))
    lk = struct.pack("<QQQQIIII", 7, 0, 0, 100, 1, 4242, 0, 0)
    write("fuzz_fll", "setlkw", fll_seed(fuse_req("SETLKW", 2, lk)))
    write("fuzz_fll", "forget", fll_seed(fuse_req("FORGET", 2, struct.pack("<Q", 1))))
    write("fuzz_fll", "batch-forget", fll_seed(fuse_req(
        "BATCH_FORGET", 0, struct.pack("<II", 2, 0) + struct.pack("<QQ", 2, 1) * 2)))
    write("fuzz_fll", "setupmapping", fll_seed(fuse_req(
        "SETUPMAPPING", 2, struct.pack("<QQQQQ", 7, 0, 2 << 20, 3, 0))))
    write("fuzz_fll", "removemapping", fll_seed(fuse_req(
        "REMOVEMAPPING", 0, struct.pack("<I", 2) + struct.pack("<QQ", 0, 2 << 20) +
        struct.pack("<QQ", 4 << 20, 2 << 20))))
    write("fuzz_fll", "copy-file-range", fll_seed(fuse_req(
        "COPY_FILE_RANGE", 2, struct.pack("<QQQQQQQ", 7, 0, 3, 4096, 0, 4096, 0))))
    write("fuzz_fll", "statx", fll_seed(fuse_req("STATX", 2, struct.pack("<IIQII", 0, 0, 0, 0, 0xfff))))
    write("fuzz_fll", "destroy", fll_seed(fuse_req("DESTROY", 0, b"")))


# ---- fuzz_pt: a sequence of requests (u16 length | 0x8000 = fix hdr.len) on the
# real passthrough over the scratch share of fuzz_pt.c (hello, dir/, dir/inner,
# dir/sub/, fifo, host-link -> /etc/passwd, dotdot-link -> .., lnk -> hello).
# After INIT, the first inode looked up is node 2, the first open handle fh 1.

def seq(*reqs):
    out = b""
    for i, r in enumerate(reqs):
        r = bytearray(r)
        r[8:16] = struct.pack("<Q", 10 + i)  # unique
        out += struct.pack("<H", len(r) | 0x8000) + bytes(r)
    return out


def pt_seeds():
    read_in = struct.pack("<QQIIQII", 1, 0, 4096, 0, 0, 0, 0)
    data = b"written through the passthrough\n"
    write_in = struct.pack("<QQIIQII", 1, 0, len(data), 0, 0, 0, 0)
    rel = struct.pack("<QIIQ", 1, 0, 0, 0)
    write("fuzz_pt", "lookup-open-read-write", seq(
        fuse_req("LOOKUP", 1, name("hello")),
        fuse_req("OPEN", 2, struct.pack("<II", 2, 0)),
        fuse_req("READ", 2, read_in),
        fuse_req("WRITE", 2, write_in + data),
        fuse_req("GETATTR", 2, struct.pack("<IIQ", 0, 0, 0)),
        fuse_req("RELEASE", 2, rel),
        fuse_req("FORGET", 2, struct.pack("<Q", 1))))
    write("fuzz_pt", "create-mkdir-rename-unlink", seq(
        fuse_req("CREATE", 1, struct.pack("<IIII", 0o102, 0o644, 0o22, 0) + name("new")),
        fuse_req("MKDIR", 1, struct.pack("<II", 0o755, 0o22) + name("d2")),
        fuse_req("RENAME2", 1, struct.pack("<QII", 1, 1, 0) + name("new") + name("renamed")),
        fuse_req("LINK", 2, struct.pack("<Q", 1) + name("hard")),
        fuse_req("UNLINK", 1, name("renamed")),
        fuse_req("RMDIR", 1, name("d2"))))
    write("fuzz_pt", "readdirplus", seq(
        fuse_req("OPENDIR", 1, struct.pack("<II", 0, 0)),
        fuse_req("READDIRPLUS", 1, read_in),
        fuse_req("READDIR", 1, read_in),
        fuse_req("RELEASEDIR", 1, rel)))
    write("fuzz_pt", "symlinks-and-xattrs", seq(
        fuse_req("SYMLINK", 1, name("s") + name("/etc/shadow")),
        fuse_req("READLINK", 2, b""),
        fuse_req("LOOKUP", 1, name("host-link")),
        fuse_req("OPEN", 3, struct.pack("<II", 0, 0)),
        fuse_req("SETXATTR", 1, struct.pack("<IIII", 3, 0, 0, 0) + name("user.x") + b"abc"),
        fuse_req("GETXATTR", 1, struct.pack("<II", 64, 0) + name("user.x")),
        fuse_req("LISTXATTR", 1, struct.pack("<II", 256, 0))))
    # Escape attempts: absolute and '..' names, the FIFO (must never be opened
    # for I/O), a symlink to '..' followed by a lookup through it.
    write("fuzz_pt", "escapes", seq(
        fuse_req("SYMLINK", 1, name("/tmp/vufsd-escape") + name("x")),
        fuse_req("MKDIR", 1, struct.pack("<II", 0o755, 0) + name("..")),
        fuse_req("CREATE", 1, struct.pack("<IIII", 0o102, 0o644, 0, 0) + name("../escape")),
        fuse_req("LOOKUP", 1, name("fifo")),
        fuse_req("OPEN", 2, struct.pack("<II", 2, 0)),
        fuse_req("LOOKUP", 1, name("dotdot-link")),
        fuse_req("LOOKUP", 3, name("etc")),
        fuse_req("MKNOD", 1, struct.pack("<IIII", 0o20644, 0x0103, 0, 0) + name("null")),
        fuse_req("LOOKUP", 1, name("null")),
        fuse_req("OPEN", 5, struct.pack("<II", 2, 0))))
    write("fuzz_pt", "locks-setattr-statfs", seq(
        fuse_req("LOOKUP", 1, name("hello")),
        fuse_req("OPEN", 2, struct.pack("<II", 2, 0)),
        fuse_req("SETLK", 2, struct.pack("<QQQQIIII", 1, 7, 0, 100, 1, 4242, 0, 0)),
        fuse_req("GETLK", 2, struct.pack("<QQQQIIII", 1, 8, 0, 100, 1, 4243, 0, 0)),
        fuse_req("SETATTR", 2, struct.pack("<IIQQQQQQIIIIIII", 1 << 3, 0, 1, 7, 0, 0, 0, 0, 0,
                                           0, 0, 0, 0, 0, 0) + bytes(4)),
        fuse_req("FALLOCATE", 2, struct.pack("<QQQII", 1, 0, 8192, 0, 0)),
        fuse_req("LSEEK", 2, struct.pack("<QQII", 1, 0, 3, 0)),
        fuse_req("FSYNC", 2, struct.pack("<QII", 1, 0, 0)),
        fuse_req("STATFS", 1, b""),
        fuse_req("STATX", 2, struct.pack("<IIQII", 0, 0, 0, 0, 0xfff))))


# ---- fuzz_vq: region table, ring placement, then guest memory (see fuzz_vq.c)

VRING_F_NEXT, VRING_F_WRITE, VRING_F_INDIRECT = 1, 2, 4


def desc(addr, length, flags=0, nxt=0):
    return struct.pack("<QIHH", addr, length, flags, nxt)


def vq_seed(regions, log2, desc_gpa, avail_gpa, used_gpa, head, mem, pops=4, max_iov=16,
            event_idx=1):
    out = bytes([len(regions) - 1])
    for i in range(4):
        gpa, size, uva = regions[i] if i < len(regions) else (0, 1, 0)
        out += struct.pack("<QHQ", gpa, size - 1, uva)
    out += bytes([log2]) + struct.pack("<QQQ", desc_gpa, avail_gpa, used_gpa)
    out += struct.pack("<HHBBB", head, 0, event_idx, pops, max_iov - 1)
    return out + mem


def place(mem, off, data):
    if len(mem) < off + len(data):
        mem.extend(bytes(off + len(data) - len(mem)))
    mem[off:off + len(data)] = data


def vq_seeds():
    # One 4 KiB region; ring of 8 at 0x0/0x80/0xc0; two chains in the avail ring:
    # a direct one (header readable, reply writable) and an indirect one.
    m = bytearray()
    place(m, 0x00, desc(0x200, 40, VRING_F_NEXT, 1) + desc(0x400, 1024, VRING_F_WRITE)
          + desc(0x180, 32, VRING_F_INDIRECT))
    place(m, 0x180, desc(0x200, 64, VRING_F_NEXT, 1) + desc(0x400, 128, VRING_F_WRITE))
    place(m, 0x80, struct.pack("<HHHH", 0, 2, 0, 2))
    write("fuzz_vq", "direct-and-indirect",
          vq_seed([(0x0, 4096, 0x7f0000000000)], 3, 0x0, 0x80, 0xc0, 0, bytes(m)))
    # Two adjacent regions and a buffer straddling them (two iovecs).
    m = bytearray()
    place(m, 0x00, desc(0x200, 40, VRING_F_NEXT, 1) + desc(0xf00, 0x200, VRING_F_WRITE))
    place(m, 0x80, struct.pack("<HHH", 0, 1, 0))
    write("fuzz_vq", "straddle",
          vq_seed([(0x0, 4096, 0x10000), (0x1000, 4096, 0x20000)], 3, 0x0, 0x80, 0xc0, 0,
                  bytes(m)))
    # A chain that loops back on itself (-ELOOP, never a hang).
    m = bytearray()
    place(m, 0x00, desc(0x200, 16, VRING_F_NEXT, 1) + desc(0x210, 16, VRING_F_NEXT, 0))
    place(m, 0x80, struct.pack("<HHH", 0, 1, 0))
    write("fuzz_vq", "loop", vq_seed([(0x0, 4096, 0)], 3, 0x0, 0x80, 0xc0, 0, bytes(m)))
    # A buffer whose addr+len overflows 64 bits.
    m = bytearray()
    place(m, 0x00, desc(0xfffffffffffff000, 0x2000, VRING_F_WRITE))
    place(m, 0x80, struct.pack("<HHH", 0, 1, 0))
    write("fuzz_vq", "overflow", vq_seed([(0x0, 4096, 0)], 3, 0x0, 0x80, 0xc0, 0, bytes(m)))


# ---- fuzz_vu_msg: u8 fd count + header + payload

VU = dict(GET_FEATURES=1, SET_FEATURES=2, SET_OWNER=3, SET_MEM_TABLE=5, SET_VRING_NUM=8,
          SET_VRING_ADDR=9, SET_VRING_BASE=10, GET_VRING_BASE=11, SET_VRING_KICK=12,
          SET_VRING_CALL=13, GET_PROTOCOL_FEATURES=15, SET_PROTOCOL_FEATURES=16,
          SET_VRING_ENABLE=18, SET_BACKEND_REQ_FD=21, GET_MAX_MEM_SLOTS=36,
          ADD_MEM_REG=37, REM_MEM_REG=38, SET_STATUS=39, GET_CONFIG=24, SET_CONFIG=25,
          SET_LOG_BASE=6, SET_LOG_FD=7, SET_DEVICE_STATE_FD=42, CHECK_DEVICE_STATE=43)


def vu(req, payload=b"", nfds=0, flags=1):
    return bytes([nfds]) + struct.pack("<III", VU[req], flags, len(payload)) + payload


def vu_seeds():
    write("fuzz_vu_msg", "get-features", vu("GET_FEATURES"))
    write("fuzz_vu_msg", "set-features", vu("SET_FEATURES", struct.pack("<Q", (1 << 32) | (1 << 30))))
    write("fuzz_vu_msg", "set-owner", vu("SET_OWNER"))
    region = struct.pack("<QQQQ", 0, 1 << 30, 0x7f0000000000, 0)
    write("fuzz_vu_msg", "set-mem-table", vu("SET_MEM_TABLE", struct.pack("<II", 1, 0) + region, 1))
    two = region + struct.pack("<QQQQ", 1 << 32, 1 << 30, 0x7f0040000000, 1 << 30)
    write("fuzz_vu_msg", "set-mem-table-2", vu("SET_MEM_TABLE", struct.pack("<II", 2, 0) + two, 2))
    write("fuzz_vu_msg", "set-vring-num", vu("SET_VRING_NUM", struct.pack("<II", 0, 1024)))
    write("fuzz_vu_msg", "set-vring-addr", vu("SET_VRING_ADDR", struct.pack(
        "<IIQQQQ", 1, 0, 0x7f0000001000, 0x7f0000003000, 0x7f0000002000, 0)))
    write("fuzz_vu_msg", "set-vring-base", vu("SET_VRING_BASE", struct.pack("<II", 1, 0)))
    write("fuzz_vu_msg", "get-vring-base", vu("GET_VRING_BASE", struct.pack("<II", 1, 0)))
    write("fuzz_vu_msg", "set-vring-kick", vu("SET_VRING_KICK", struct.pack("<Q", 1), 1))
    write("fuzz_vu_msg", "set-vring-call-nofd", vu("SET_VRING_CALL", struct.pack("<Q", 0x101)))
    write("fuzz_vu_msg", "set-protocol-features", vu("SET_PROTOCOL_FEATURES",
                                                     struct.pack("<Q", (1 << 0) | (1 << 3) | (1 << 5))))
    write("fuzz_vu_msg", "set-vring-enable", vu("SET_VRING_ENABLE", struct.pack("<II", 1, 1),
                                                flags=1 | 8))
    write("fuzz_vu_msg", "backend-req-fd", vu("SET_BACKEND_REQ_FD", nfds=1))
    write("fuzz_vu_msg", "add-mem-reg", vu("ADD_MEM_REG", struct.pack("<Q", 0) + region, 1))
    write("fuzz_vu_msg", "rem-mem-reg", vu("REM_MEM_REG", struct.pack("<Q", 0) + region))
    write("fuzz_vu_msg", "set-status", vu("SET_STATUS", struct.pack("<Q", 0xf)))
    write("fuzz_vu_msg", "get-config", vu("GET_CONFIG", struct.pack("<III", 0, 40, 0) + bytes(40)))
    write("fuzz_vu_msg", "get-config-window", vu("GET_CONFIG", struct.pack("<III", 36, 4, 0) + bytes(4)))
    write("fuzz_vu_msg", "set-config", vu("SET_CONFIG", struct.pack("<III", 0, 4, 0) + b"abcd"))
    # Live migration: the dirty log (QEMU's: 24 KiB for 768 MiB at offset 0), the
    # used-ring logging flag, the device state transfer both ways and its check.
    write("fuzz_vu_msg", "set-log-base", vu("SET_LOG_BASE", struct.pack("<QQ", 24576, 0), 1))
    write("fuzz_vu_msg", "set-log-base-wrap", vu("SET_LOG_BASE", struct.pack("<QQ", 1 << 20, (1 << 64) - 4096), 1))
    write("fuzz_vu_msg", "set-log-fd", vu("SET_LOG_FD", nfds=1))
    write("fuzz_vu_msg", "set-vring-addr-log", vu("SET_VRING_ADDR", struct.pack(
        "<IIQQQQ", 1, 1, 0x7f0000001000, 0x7f0000003000, 0x7f0000002000, 0x3000)))
    write("fuzz_vu_msg", "set-device-state-save", vu("SET_DEVICE_STATE_FD", struct.pack("<II", 0, 0), 1))
    write("fuzz_vu_msg", "set-device-state-load", vu("SET_DEVICE_STATE_FD", struct.pack("<II", 1, 0), 1))
    write("fuzz_vu_msg", "check-device-state", vu("CHECK_DEVICE_STATE"))


# ---- fuzz_dax: window byte + operations (see fuzz_dax.c)

def small(v):  # fz_val, even mode: v pages
    return bytes([0]) + struct.pack("<H", v)


def npages(n):  # fz_len, even mode: n pages (1..256)
    return bytes([0, n - 1])


def setup(key, fpage, pages, mpage, flags=3):
    return bytes([0, key]) + small(fpage) + npages(pages) + small(mpage) + bytes([flags])


def remove(entries):
    out = bytes([1]) + struct.pack("<H", len(entries))
    for mpage, pages in entries:
        out += small(mpage) + npages(pages)
    return out


def dax_seeds():
    slot = 512  # 4 KiB pages per 2 MiB slot
    # 4 slots, 4 KiB pages: map a whole slot read/write, then remove it.
    write("fuzz_dax", "map-unmap", bytes([0x03]) + setup(1, 0, 256, 0) + setup(1, 256, 256, 256)
          + remove([(0, 256), (256, 256)]))
    # Several mappings in one slot, a partial remove that splits one, batched
    # unmaps (bit 6) and 20 % injected frontend failures (bits 4-5 = 2).
    write("fuzz_dax", "split-batch-failures", bytes([0x40 | 0x20 | 0x03])
          + setup(1, 0, 16, slot) + setup(2, 0, 16, slot + 16) + setup(3, 64, 32, slot + 32)
          + remove([(slot + 40, 4)]) + remove([(slot, 64)]))
    # Read-only then write upgrade, remove by inode, forget, reset.
    write("fuzz_dax", "upgrade-inode", bytes([0x01]) + setup(5, 0, 8, 0, 2) + setup(5, 0, 8, 0, 3)
          + bytes([2, 5, 3, 5, 5]))
    # Manager placement (the emulated guest), pin/unpin, and the wire decoders.
    write("fuzz_dax", "place-pin-wire", bytes([0x07]) + bytes([4, 9]) + small(0) + bytes([1])
          + bytes([7]) + small(0) + bytes([6]) + bytes(64) + struct.pack("<Q", 1))


# ---- fuzz_state: a control byte + a saved state (daemon/state.h)

SEC = dict(ORIGIN=1, FUSE=2, FS=3, FS_INODES=4, FS_HANDLES=5, FS_LOCKS=6, DAX=7, VHOST=8,
           LISTENER=9)
NO_FD = 0xffffffff
S_IFDIR, S_IFREG = 0o040000, 0o100000
O_RDONLY, O_RDWR, O_DIRECTORY = 0, 2, 0o200000


def crc32c(data):
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82f63b78 if crc & 1 else crc >> 1
    return crc ^ 0xffffffff


def state(sections, fds=0):
    """sections: [(type, version, payload)] in order; a valid header around them."""
    body = b"".join(struct.pack("<IIQ", t, v, len(p)) + p for t, v, p in sections)
    hdr = b"VUFSDST\0" + struct.pack("<IIQIIII", 1, 1 if fds else 0, 40 + len(body), fds,
                                       len(sections), crc32c(body), 0)
    return hdr + body


def inode(idx, gen, nlookup, mode, path=None, fd=None, fh=None, hashed=True):
    """dev and ino are 0: the harness fills them in from the scratch share."""
    flags = (1 if fd is not None else 0) | (2 if fh else 0) | (4 if path else 0) | \
        (8 if hashed else 0)
    r = struct.pack("<IIQIB", idx, gen, nlookup, mode, flags) + struct.pack("<QQQ", 0, 0, 0)
    if fd is not None:
        r += struct.pack("<I", fd)
    if fh:
        r += struct.pack("<IB", fh[0], len(fh[1])) + fh[1]
    if path:
        r += struct.pack("<H", len(path)) + path
    return r


def handle(idx, gen, nodeid, flags, is_dir=False, fd=None, flock=0):
    f = (1 if is_dir else 0) | (2 if fd is not None else 0) | flock
    r = struct.pack("<IIQIB", idx, gen, nodeid, flags, f)
    return r + (struct.pack("<I", fd) if fd is not None else b"")


def owner(nodeid, own, locks=(), fd=None):
    r = struct.pack("<QQIB", nodeid, own, 77, 1 if fd is not None else 0)
    if fd is not None:
        r += struct.pack("<I", fd)
    r += struct.pack("<H", len(locks))
    return r + b"".join(struct.pack("<BQQ", w, st, ln) for w, st, ln in locks)


def fs_sections(inodes, handles=(), owners=(), mounts=()):
    fs = bytes([0, 0, 0, 0]) + struct.pack("<III", 16, 16, len(mounts)) + \
        b"".join(struct.pack("<QI", m, fd) for m, fd in mounts)
    return [(SEC["FS"], 1, fs),
            (SEC["FS_INODES"], 1, struct.pack("<I", len(inodes)) + b"".join(inodes)),
            (SEC["FS_HANDLES"], 1, struct.pack("<I", len(handles)) + b"".join(handles)),
            (SEC["FS_LOCKS"], 1, struct.pack("<I", len(owners)) + b"".join(owners))]


def fuse_section(minor=41):
    want = (1 << 0) | (1 << 22)  # ASYNC_READ, MAX_PAGES
    return (SEC["FUSE"], 1, struct.pack("<BBIIQQIHHII", 1, 0, minor, minor, want | (1 << 30),
                                        want, 1 << 20, 256, 0, 131072, 1))


def origin():
    v = b"vufsd seed"
    return (SEC["ORIGIN"], 1, struct.pack("<H", len(v)) + v)


def state_seeds():
    root = inode(1, 0, 3, S_IFDIR)
    write("fuzz_state", "root-only", b"\0" + state([origin()] + fs_sections([root])))
    # What a guest holds after a little work: files by path, open files, a
    # directory stream, a lock owner with two locks, a DAX mapping.
    hello = inode(2, 0, 1, S_IFREG, path=b"hello")
    d = inode(3, 1, 2, S_IFDIR, path=b"dir")
    inner = inode(5, 0, 1, S_IFREG, path=b"dir/inner")
    hs = [handle(1, 0, 2, O_RDWR),
          handle(2, 3, 3 | (1 << 32), O_RDONLY | O_DIRECTORY, is_dir=True),
          handle(4, 0, 5 | (0 << 32), O_RDONLY, flock=4)]
    own = [owner(2, 0xab, [(1, 0, 10), (0, 100, 0)])]
    dax = (SEC["DAX"], 1, struct.pack("<QI", 16 << 20, 1) +
           struct.pack("<QQQQB", 2, 0, 0, 2 << 20, 1))
    write("fuzz_state", "paths-handles-locks", b"\0" + state(
        [origin(), fuse_section()] + fs_sections([root, hello, d, inner], hs, own) + [dax]))
    # Names that must lead nowhere: '..', a symlink out, an absolute path.
    bad = [inode(2, 0, 1, S_IFREG, path=b"../etc/passwd"),
           inode(3, 0, 1, S_IFREG, path=b"host-link"),
           inode(4, 0, 1, S_IFDIR, path=b"dotdot-link/tmp"),
           inode(6, 0, 1, S_IFREG, path=b"/etc/passwd"),
           inode(7, 0, 1, S_IFREG, fh=(1, bytes(8)))]
    write("fuzz_state", "escapes", b"\0" + state([origin()] + fs_sections([root] + bad)))
    # A restart's state: fds for the inodes, handles and an owner, the device
    # with guest memory (fd 0), one running request queue with a request to
    # run again, kick/call eventfds, the connection (fd 3).
    fhello = inode(2, 0, 1, S_IFREG, fd=4)
    fdir = inode(3, 0, 1, S_IFDIR, fd=6)
    fhs = [handle(1, 0, 2, O_RDWR, fd=5), handle(2, 0, 3, O_RDONLY | O_DIRECTORY, is_dir=True,
                                                 fd=7)]
    fown = [owner(2, 0xcd, fd=8)]
    mem = struct.pack("<I", 1) + struct.pack("<QQQQI", 0, 1 << 20, 0x40000000, 0, 0)
    q0 = struct.pack("<IBBIBQQQH", 0, 1, 1, 8, 1, 0x40000000, 0x40001000, 0x40002000, 0) + \
        struct.pack("<IIIH", 1, 2, NO_FD, 0)
    q1 = struct.pack("<IBBIBQQQH", 1, 1, 1, 8, 1, 0x40004000, 0x40005000, 0x40006000, 3) + \
        struct.pack("<IIIH", 9, 10, 11, 1) + struct.pack("<H", 2)
    vhost = struct.pack("<BQQBB", 1, (1 << 32) | (1 << 29) | (1 << 30), (1 << 0) | (1 << 3), 15,
                        0) + struct.pack("<II", 3, NO_FD) + mem + struct.pack("<I", 2) + q0 + q1
    write("fuzz_state", "restart-with-fds", b"\0" + state(
        [origin(), fuse_section()] + fs_sections([root, fhello, fdir], fhs, fown) +
        [(SEC["VHOST"], 1, vhost)], fds=12))
    # The same bytes used raw: the header and root checks are fuzzed too.
    write("fuzz_state", "raw-root-only", b"\1" + state([origin()] + fs_sections([root])))


if __name__ == "__main__":
    fll_seeds()
    pt_seeds()
    vq_seeds()
    vu_seeds()
    dax_seeds()
    state_seeds()
