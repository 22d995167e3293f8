/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target: loading a saved state (daemon/state.h), the way a restarted
 * vufsd or --restore-state does: the container (vst_open), then every part
 * through the real loaders into real objects: the passthrough serving a
 * scratch share (pt_state_load), the DAX window (dax_window_restore_mapping),
 * the FUSE session (fll_session_restore) and a vhost-user device whose queues
 * really start and run the requests the state says to run again
 * (vdev_state_load).
 *
 * Input: one control byte, then the state.
 *   bit 0 clear: the harness makes the header's length and CRC match the
 *     bytes, and gives the root's record and every record naming an
 *     existing path the scratch share's device and inode numbers
 *     (fz_fix_inodes), so mutations reach the parsers behind the checksum
 *     and the identity checks; set: the bytes are used as they are (the
 *     header and root checks are fuzzed too).
 * With VST_F_FDS and at most 16 fds announced, the state comes with: fd 0 a
 * 1 MiB memfd (guest memory), 4 an O_PATH and 5 and 8 O_RDWR fds of the
 * share's "hello", 6 an O_PATH and 7 a read fd of "dir", every other an eventfd.
 *
 * Oracles (abort = finding): no sanitizer report, no crash or hang, every
 * inode the passthrough holds afterwards on the scratch tmpfs (no path or
 * handle in a state reaches outside the share), a refused state leaves the
 * filesystem with nothing but its root.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dax.h"
#include "device.h"
#include "fuzz_input.h"
#include "fuzz_scratch.h"
#include "options.h"
#include "passthrough.h"
#include "pt_fs_i.h"
#include "restart.h"
#include "state.h"

#define FZ_MAX_FDS 16u

static struct vufsd_config fz_cfg;
static struct pt_config fz_pt_cfg;

static int fz_map(void *ctx, int fd, uint64_t foffset, uint64_t moffset, uint64_t len,
                  bool writable)
{
    return 0;
}

static int fz_unmap(void *ctx, uint64_t moffset, uint64_t len)
{
    return 0;
}

static int fz_open(void *ctx, uint64_t key, bool writable, bool for_frontend)
{
    return -ESTALE;
}

static const struct dax_ops fz_dax_ops = {.map = fz_map, .unmap = fz_unmap, .open = fz_open};

static size_t fz_inode_count(struct pt_fs *fs)
{
    pthread_mutex_lock(&fs->itab.lock);
    size_t n = fs->itab.count;
    pthread_mutex_unlock(&fs->itab.lock);
    return n;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fz_confine("fuzz_state", "/tmp/vufsd-fuzz-state", argc, argv);
    vopt_config_init(&fz_cfg);
    fz_cfg.shared_dir = fz_share;
    fz_cfg.xattr = true;
    fz_cfg.readdirplus = true;
    fz_cfg.dax_window = 16u << 20;
    fz_cfg.log_level = VUFSD_LOG_ERROR;
    fz_pt_cfg = (struct pt_config){.shared_dir = fz_share, .xattr = true, .readdirplus = true};
    return 0;
}

static uint64_t fz_le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void fz_put_le(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* The share path behind the bait fd with index idx (see fz_make_fds), or NULL. */
static const char *fz_bait(uint64_t idx)
{
    static char path[128];
    if (idx < 4 || idx > 8)
        return NULL;
    snprintf(path, sizeof(path), "%s/%s", fz_share, idx == 6 || idx == 7 ? "dir" : "hello");
    return path;
}

/*
 * What the process that saved the state would have recorded: the root's
 * device and inode numbers, and those of each object named by a path that
 * exists in the scratch share or is one of the bait fds (the tmpfs is new
 * for each input, so no seed can know them). Records are walked as the loader reads them; the first one
 * that does not fit stops the walk.
 */
static void fz_fix_inodes(uint8_t *p, size_t len)
{
    uint32_t count = (uint32_t)fz_le(p, 4);
    size_t off = 4;
    for (uint32_t k = 0; k < count && len - off >= 45; k++) {
        uint8_t *r = p + off;
        uint8_t flags = r[20];
        size_t at = 45;
        if (flags & 0x1)
            at += 4;
        if ((flags & 0x2) && len - off >= at + 5)
            at += 5 + r[at + 4];
        const char *name = NULL;
        char path[4200];
        if ((flags & 0x1) && fz_bait(fz_le(r + 45, 4)))
            name = fz_bait(fz_le(r + 45, 4));
        if ((flags & 0x4) && len - off >= at + 2) {
            size_t n = (size_t)fz_le(r + at, 2);
            if (n < 4096 && len - off >= at + 2 + n) {
                snprintf(path, sizeof(path), "%s/%.*s", fz_share, (int)n, (const char *)r + at + 2);
                name = path;
            }
            at += 2 + n;
        }
        if (fz_le(r, 4) == 1)
            name = fz_share;
        struct stat st;
        if (name && fstatat(AT_FDCWD, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
            fz_put_le(r + 21, st.st_dev, 8);
            fz_put_le(r + 29, st.st_ino, 8);
        }
        if (at > len - off)
            return;
        off += at;
    }
}

/* The header's length and CRC, and the identities (see above). */
static void fz_fix_up(uint8_t *b, size_t len)
{
    if (len < VST_HEADER_SIZE)
        return;
    fz_put_le(b + 16, len, 8);
    size_t off = VST_HEADER_SIZE;
    uint32_t nsec = (uint32_t)fz_le(b + 28, 4);
    for (uint32_t i = 0; i < nsec && len - off >= 16; i++) {
        uint32_t type = (uint32_t)fz_le(b + off, 4);
        uint64_t slen = fz_le(b + off + 8, 8);
        off += 16;
        if (slen > len - off)
            break;
        if (type == VST_SEC_FS_INODES && slen >= 4)
            fz_fix_inodes(b + off, (size_t)slen);
        off += (size_t)slen;
    }
    fz_put_le(b + 32, vst_crc32c(0, b + VST_HEADER_SIZE, len - VST_HEADER_SIZE), 4);
}

static int fz_open_in_share(const char *name, int flags)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/%s", fz_share, name);
    int fd = open(p, flags | O_CLOEXEC);
    if (fd < 0)
        fz_die("open a bait fd");
    return fd;
}

/* The fds a handover would bring, as described above. */
static void fz_make_fds(unsigned n, int *fds)
{
    for (unsigned i = 0; i < n; i++) {
        switch (i) {
        case 0:
            fds[i] = memfd_create("fuzz-guest", MFD_CLOEXEC);
            if (fds[i] < 0 || ftruncate(fds[i], 1 << 20) < 0)
                fz_die("memfd");
            break;
        case 4: fds[i] = fz_open_in_share("hello", O_PATH); break;
        case 5: fds[i] = fz_open_in_share("hello", O_RDWR); break;
        case 6: fds[i] = fz_open_in_share("dir", O_PATH | O_DIRECTORY); break;
        case 7: fds[i] = fz_open_in_share("dir", O_RDONLY | O_DIRECTORY); break;
        case 8: fds[i] = fz_open_in_share("hello", O_RDWR); break;
        default:
            fds[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
            if (fds[i] < 0)
                fz_die("eventfd");
        }
    }
}

static void fz_fs_reset(void *fs)
{
    pt_fs_reset(fs);
}

static void fz_fs_cancel(void *fs)
{
    pt_fs_cancel_waits(fs);
}

static void fz_fs_detach(void *fs, void (*fn)(void *ctx, struct fll_req *r), void *ctx)
{
    pt_fs_detach_waits(fs, fn, ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    fz_make_share();
    size_t len = size - 1;
    uint8_t *b = malloc(len ? len : 1); /* exactly its size: ASan sees over-reads */
    if (!b)
        abort();
    memcpy(b, data + 1, len);
    if (!(data[0] & 1))
        fz_fix_up(b, len);

    struct vst_state st;
    struct vst_err err = {""};
    if (vst_open(b, len, &st, &err) < 0 || st.nfds > FZ_MAX_FDS) {
        free(b);
        return 0;
    }
    struct vst_fds fds;
    int raw[FZ_MAX_FDS];
    fz_make_fds(st.nfds, raw);
    FZ_REQUIRE(vst_fds_adopt(&fds, raw, st.nfds) == 0);

    struct pt_fs *fs = NULL;
    FZ_REQUIRE(pt_fs_new(&fz_pt_cfg, &fs) == 0);
    struct dax_config dcfg = {.window_size = fz_cfg.dax_window, .policy = DAX_POLICY_AUTO};
    struct dax_window *dax = NULL;
    FZ_REQUIRE(dax_window_new(&dcfg, &fz_dax_ops, NULL, &dax) == 0);
    struct vrs_parts p = {.fs = fs, .dax = dax, .conn_fd = -1};
    struct pt_state_report rep;
    int ret = vrs_load(&p, VST_PART_FS, &st, &fds, NULL, &rep, &err);
    fz_check_confined(fs);
    if (ret < 0)
        FZ_REQUIRE(fz_inode_count(fs) == 1); /* refused: nothing kept */
    else
        ret = vrs_load(&p, VST_PART_DAX, &st, &fds, NULL, NULL, &err);
    /* VUFSD_FUZZ_VERBOSE=1: what a seed restored, or why it was refused. */
    bool verbose = getenv("VUFSD_FUZZ_VERBOSE") != NULL;
    if (verbose)
        fprintf(stderr, "fs+dax: %d %s (inodes %u/%u lost, handles %u/%u, owners %u, locks %u/%u)\n",
                ret, err.msg, rep.inodes, rep.inodes_lost, rep.handles, rep.handles_lost,
                rep.owners, rep.locks, rep.locks_lost);

    struct vst_reader probe;
    if (vst_section(&st, VST_SEC_FUSE, &probe, NULL) || vst_section(&st, VST_SEC_VHOST, &probe, NULL)) {
        /* The device part alone too: it does not depend on the filesystem's. */
        struct vdev_config dc = {
            .cfg = &fz_cfg,
            .ops = pt_fs_ops(),
            .fs = fs,
            .fs_reset = fz_fs_reset,
            .fs_cancel_waits = fz_fs_cancel,
            .fs_detach_waits = fz_fs_detach,
            .dax = dax,
        };
        struct vufsd_dev *dev;
        FZ_REQUIRE(vdev_new(&dc, &dev) == 0);
        p.dev = dev;
        int conn = -1;
        err.msg[0] = '\0';
        ret = vrs_load(&p, VST_PART_FUSE | VST_PART_VHOST, &st, &fds, &conn, NULL, &err);
        if (verbose)
            fprintf(stderr, "fuse+vhost: %d %s (connection fd %d)\n", ret, err.msg, conn);
        if (conn >= 0)
            close(conn);
        vdev_free(dev); /* stops what started; the requests it ran are answered */
        fz_check_confined(fs);
    }
    dax_window_reset(dax);
    pt_fs_free(fs);
    dax_window_free(dax);
    vst_fds_free(&fds);
    free(b);
    return 0;
}
