/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target: the FUSE decoder + dispatch (fuse_lowlevel/) over the REAL
 * passthrough filesystem (daemon/passthrough/) serving a scratch directory.
 *
 * Input: a sequence of FUSE requests, each as
 *   u16  length of the request bytes that follow (little endian)
 *   ...  the request (header + arguments); hdr.len is fixed up to the real
 *        length when bit 15 of the length word is set
 * processed in order on one session, after a valid INIT (7.41, every flag). A
 * fresh scratch directory, passthrough and session are made for each input, so
 * inputs are independent.
 *
 * The scratch directory holds bait: a FIFO (CVE-2020-35517: opening it for I/O
 * would hang until the fuzzer's -timeout reports it), a symlink to a host path
 * and one to '..'. The process runs in its own mount namespace where every
 * host mount is read-only (only the scratch tmpfs, mounted nodev/nosuid, and
 * libFuzzer's output directories are writable), so an escape bug fails with
 * EROFS instead of writing on the host.
 *
 * Escape oracle: after every request, every inode the passthrough holds must be
 * on the scratch tmpfs (its st_dev). A lookup that reached a host file through
 * '..', a symlink or a /proc trick is a finding even when it only reads.
 *
 * Invariants (abort = finding): every request gets exactly one completion, the
 * reply fits the buffer and its header is well formed (length = completed bytes,
 * the request's unique, error 0 or -1..-4095, an error reply is a bare header).
 * SETLKW is sent as SETLK: a blocking lock would complete from another thread
 * after the input ended.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/mount.h>

#include "fll.h"
#include "fuzz_input.h"
#include "fuzz_scratch.h"
#include "passthrough.h"

#define FZ_OUT_SIZE (128u * 1024 + 4096)
#define FZ_MAX_REQS 64

static struct pt_config fz_cfg;

/* ---- A transport that records the one completion -------------------------------- */

static int fz_completions;
static size_t fz_out_len;

static void fz_complete(struct fll_req *r, size_t out_len)
{
    fz_completions++;
    fz_out_len = out_len;
}

static const struct fll_transport fz_transport = {.complete = fz_complete};

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fz_confine("fuzz_pt", "/tmp/vufsd-fuzz-pt", argc, argv);
    fz_cfg = (struct pt_config){.shared_dir = fz_share, .xattr = true, .readdirplus = true};
    return 0;
}

static void fz_check_reply(const uint8_t *out, size_t out_size, uint64_t unique)
{
    FZ_REQUIRE(fz_completions == 1);
    FZ_REQUIRE(fz_out_len <= out_size);
    if (fz_out_len == 0)
        return;
    struct fuse_out_header oh;
    FZ_REQUIRE(fz_out_len >= sizeof(oh));
    memcpy(&oh, out, sizeof(oh));
    FZ_REQUIRE(oh.len == fz_out_len);
    FZ_REQUIRE(oh.unique == unique);
    FZ_REQUIRE(oh.error <= 0 && oh.error >= -4095);
    if (oh.error != 0)
        FZ_REQUIRE(fz_out_len == sizeof(oh));
}

/* One request in a heap block of exactly its size (ASan sees over-reads). */
static void fz_send(struct fll_session *se, const uint8_t *req, size_t len, uint8_t *out)
{
    uint8_t *in = malloc(len ? len : 1);
    if (!in)
        abort();
    memcpy(in, req, len);
    uint64_t unique = 0;
    if (len >= sizeof(struct fuse_in_header)) {
        struct fuse_in_header h;
        memcpy(&h, in, sizeof(h));
        unique = h.unique;
        if (h.opcode == FUSE_SETLKW) {
            h.opcode = FUSE_SETLK;
            memcpy(in, &h, sizeof(h));
        }
    }
    struct iovec iv = {in, len}, ov = {out, FZ_OUT_SIZE};
    struct fll_req r = {.se = se, .in = &iv, .in_cnt = 1, .out = &ov, .out_cnt = 1};
    fz_completions = 0;
    fz_out_len = 0;
    fll_session_process(se, &r);
    fz_check_reply(out, FZ_OUT_SIZE, unique);
    free(in);
}

static void fz_send_init(struct fll_session *se, uint8_t *out)
{
    struct {
        struct fuse_in_header h;
        struct fuse_init_in i;
    } m;
    memset(&m, 0, sizeof(m));
    m.h.len = sizeof(m);
    m.h.opcode = FUSE_INIT;
    m.h.unique = 1;
    m.i.major = 7;
    m.i.minor = FLL_KERNEL_MINOR;
    m.i.max_readahead = 131072;
    m.i.flags = 0xffffffffu;
    m.i.flags2 = 0xffffffffu;
    fz_send(se, (const uint8_t *)&m, sizeof(m), out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t *out;
    if (!out && !(out = malloc(FZ_OUT_SIZE)))
        abort();

    fz_make_share();
    struct pt_fs *fs = NULL;
    FZ_REQUIRE(pt_fs_new(&fz_cfg, &fs) == 0);
    struct fll_session_config scfg = {
        .ops = pt_fs_ops(),
        .fs = fs,
        .transport = &fz_transport,
        .max_write = 128 * 1024,
    };
    struct fll_session *se = NULL;
    FZ_REQUIRE(fll_session_new(&scfg, &se) == 0);
    fz_send_init(se, out);

    struct fz_in in;
    fz_init(&in, data, size);
    for (unsigned n = 0; n < FZ_MAX_REQS && in.left >= 2; n++) {
        uint16_t w = fz_u16(&in);
        size_t len = w & 0x7fff;
        if (len > in.left)
            len = in.left;
        uint8_t *req = malloc(len ? len : 1);
        if (!req)
            abort();
        fz_fill(&in, req, len);
        if ((w & 0x8000) && len >= sizeof(struct fuse_in_header)) {
            uint32_t l = (uint32_t)len;
            memcpy(req + offsetof(struct fuse_in_header, len), &l, sizeof(l));
        }
        fz_send(se, req, len, out);
        free(req);
        fz_check_confined(fs);
    }

    fll_session_free(se);
    pt_fs_free(fs);
    return 0;
}
