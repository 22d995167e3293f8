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
#include "passthrough.h"
#include "pt_i.h"

#define FZ_OUT_SIZE (128u * 1024 + 4096)
#define FZ_MAX_REQS 64

static char fz_share[64];
static dev_t fz_share_dev;
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

/* ---- The confinement ---------------------------------------------------------------- */

static void fz_die(const char *what)
{
    fprintf(stderr, "fuzz_pt: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* A writable bind of dir onto itself inside the read-only tree. */
static void fz_keep_writable(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        char *slash = strrchr(dir, '/');
        if (!slash)
            snprintf(dir, sizeof(dir), ".");
        else if (slash == dir)
            dir[1] = '\0';
        else
            *slash = '\0';
    }
    if (mount(dir, dir, NULL, MS_BIND, NULL) < 0)
        fz_die("bind a libFuzzer directory");
    struct mount_attr rw = {.attr_clr = MOUNT_ATTR_RDONLY};
    if (syscall(SYS_mount_setattr, AT_FDCWD, dir, 0, &rw, sizeof(rw)) < 0)
        fz_die("make a libFuzzer directory writable");
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    if (geteuid() != 0) {
        fprintf(stderr, "fuzz_pt: needs root (mount namespace, credential switching)\n");
        exit(77); /* meson: SKIP (the replay test runs with -error_exitcode=1) */
    }
    /* One fixed, empty mount point: each fuzzer mounts its tmpfs on it in its own
     * mount namespace, so parallel runs do not meet and nothing is left behind. */
    snprintf(fz_share, sizeof(fz_share), "/tmp/vufsd-fuzz-pt");
    if (mkdir(fz_share, 0755) < 0 && errno != EEXIST)
        fz_die("mkdir the scratch mount point");

    if (unshare(CLONE_NEWNS) < 0)
        fz_die("unshare(CLONE_NEWNS)");
    if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
        fz_die("make mounts slaves");
    struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
    if (syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof(ro)) < 0)
        fz_die("make every mount read-only");

    /* libFuzzer writes new corpus entries and artifacts: keep those writable. */
    for (int i = 1; i < *argc; i++) {
        const char *a = (*argv)[i];
        if (strncmp(a, "-artifact_prefix=", 17) == 0)
            fz_keep_writable(a + 17);
        else if (a[0] != '-')
            fz_keep_writable(a);
    }

    /* The confinement must hold before any input runs: the host is read-only. */
    int probe = open("/tmp/vufsd-fuzz-pt-probe", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (probe >= 0 || errno != EROFS) {
        fprintf(stderr, "fuzz_pt: /tmp is still writable; refusing to fuzz the host\n");
        exit(1);
    }

    fz_cfg = (struct pt_config){.shared_dir = fz_share, .xattr = true, .readdirplus = true};
    return 0;
}

/* A fresh scratch tmpfs with the bait. */
static void fz_make_share(void)
{
    umount2(fz_share, MNT_DETACH);
    if (mount("vufsd-fuzz", fz_share, "tmpfs", MS_NODEV | MS_NOSUID, "size=8m,mode=0777") < 0)
        fz_die("mount the scratch tmpfs");
    int d = open(fz_share, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (d < 0)
        fz_die("open the scratch directory");
    int f = openat(d, "hello", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (f < 0 || write(f, "hello from the share\n", 21) != 21)
        fz_die("write hello");
    close(f);
    if (mkdirat(d, "dir", 0755) < 0 || mkdirat(d, "dir/sub", 0700) < 0)
        fz_die("mkdir");
    f = openat(d, "dir/inner", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (f < 0)
        fz_die("create inner");
    close(f);
    if (mkfifoat(d, "fifo", 0666) < 0 || symlinkat("/etc/passwd", d, "host-link") < 0 ||
        symlinkat("..", d, "dotdot-link") < 0 || symlinkat("hello", d, "lnk") < 0)
        fz_die("make the bait");
    struct stat st;
    if (fstat(d, &st) < 0)
        fz_die("stat the scratch directory");
    fz_share_dev = st.st_dev;
    close(d);
}

/* Every live inode of the passthrough is inside the scratch filesystem. */
static void fz_check_confined(struct pt_fs *fs)
{
    struct pt_itab *t = &fs->itab;
    pthread_mutex_lock(&t->lock);
    for (uint32_t idx = 1; idx < t->slots.next_fresh; idx++) {
        const struct pt_inode *i = pt_slots_at(&t->slots, idx);
        if (i && i->live && i->dev != fz_share_dev) {
            fprintf(stderr, "fuzz_pt: inode %u (ino %llu) is outside the share\n", idx,
                    (unsigned long long)i->ino);
            abort();
        }
    }
    pthread_mutex_unlock(&t->lock);
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
    struct fll_session *se = fll_session_new(&scfg);
    FZ_REQUIRE(se != NULL);
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
