/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What vfe puts on the vhost-user socket, checked message by message.
 *
 *   test_vfe_wire                 against a strict fake backend (no daemon, fast)
 *   test_vfe_wire --backend CMD   the replay against a real backend (the Rust
 *                                 virtiofsd): the message it refused, then the
 *                                 sequence vfe sends now
 *
 * The fake backend enforces what the spec (QEMU's docs/interop/vhost-user.rst)
 * and the rust-vmm vhost crate behind the Rust virtiofsd enforce: the exact
 * payload size of every request (SET_MEM_TABLE: 8 bytes of count and padding
 * plus 32 per region, one fd per region), fds only where a request carries
 * them, version 1 without the reply bit, NEED_REPLY only with REPLY_ACK
 * negotiated, GET_QUEUE_NUM / SET_BACKEND_REQ_FD / RESET_DEVICE only with their
 * protocol features, SET_VRING_ENABLE only with VHOST_USER_F_PROTOCOL_FEATURES
 * acked, ring addresses inside the memory table. Like the Rust daemon it acks a
 * refused request with a failure and hangs up.
 *
 * The order is checked against QEMU 11.1 driving the Rust virtiofsd 1.13.2
 * (hw/virtio trace events vhost_user_write/read, a Linux guest mounting the
 * share, then powering off), recorded below.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <glib.h>

#include "vfe.h"
#include "../it_util.h"

static const char *opt_backend;
static const char *opt_log;

/* What the Rust virtiofsd 1.13.2 offers (GET_FEATURES, GET_PROTOCOL_FEATURES:
 * MQ, LOG_SHMFD, REPLY_ACK, BACKEND_REQ, BACKEND_SEND_FD, RESET_DEVICE,
 * CONFIGURE_MEM_SLOTS, DEVICE_STATE) and its GET_QUEUE_NUM (hiprio + 1). */
#define RUST_FEATURES 0x174000000ull
#define RUST_PROTOCOL 0x8a42bull
#define RUST_QUEUES 2u

/* ---- QEMU 11.1 with the Rust virtiofsd: the messages, in order -------------------- */

struct qemu_msg {
    uint32_t req;
    uint32_t flags;
};

#define W(r, f) { VFE_VU_##r, f }
/* Connect (vhost_user_backend_init, vhost_dev_init). GET_MAX_MEM_SLOTS because
 * CONFIGURE_MEM_SLOTS was negotiated; the second GET_FEATURES and the
 * SET_VRING_CALL/ERR pairs are vhost_dev_init's per-queue masked notifiers. */
static const struct qemu_msg qemu_connect[] = {
    W(GET_FEATURES, 0x1), W(GET_PROTOCOL_FEATURES, 0x1), W(SET_PROTOCOL_FEATURES, 0x1),
    W(GET_QUEUE_NUM, 0x1), W(GET_MAX_MEM_SLOTS, 0x1), W(SET_BACKEND_REQ_FD, 0x9),
    W(SET_OWNER, 0x1), W(GET_FEATURES, 0x1),
    W(SET_VRING_CALL, 0x9), W(SET_VRING_ERR, 0x9), W(SET_VRING_CALL, 0x9), W(SET_VRING_ERR, 0x9),
};
/* The driver's probe resets the device (twice: virtio core and the driver),
 * then DRIVER_OK starts it: guest notifiers (SET_VRING_CALL x2), then
 * vhost_dev_start. ADD_MEM_REG stands for SET_MEM_TABLE with
 * CONFIGURE_MEM_SLOTS; the calls are unmasked after the rings are enabled. */
static const struct qemu_msg qemu_start[] = {
    W(RESET_DEVICE, 0x1), W(RESET_DEVICE, 0x1),
    W(SET_VRING_CALL, 0x9), W(SET_VRING_CALL, 0x9),
    { 2, 0x1 } /* SET_FEATURES */, { 37, 0x9 } /* ADD_MEM_REG */,
    W(SET_VRING_NUM, 0x1), W(SET_VRING_BASE, 0x1), W(SET_VRING_ADDR, 0x1), W(SET_VRING_KICK, 0x9),
    W(SET_VRING_NUM, 0x1), W(SET_VRING_BASE, 0x1), W(SET_VRING_ADDR, 0x1), W(SET_VRING_KICK, 0x9),
    W(SET_VRING_ENABLE, 0x9), W(SET_VRING_ENABLE, 0x9),
    W(SET_VRING_CALL, 0x9), W(SET_VRING_CALL, 0x9),
};
/* Power-off: vhost_dev_stop (rings disabled, bases fetched), notifiers masked,
 * then the reset. */
static const struct qemu_msg qemu_stop[] = {
    W(SET_VRING_ENABLE, 0x9), W(SET_VRING_ENABLE, 0x9),
    W(GET_VRING_BASE, 0x1), W(GET_VRING_BASE, 0x1),
    W(SET_VRING_CALL, 0x9), W(SET_VRING_CALL, 0x9),
    W(RESET_DEVICE, 0x1),
};
#undef W

/* ---- A strict fake backend ---------------------------------------------------------- */

struct rec {
    uint32_t req, flags, size;
    unsigned nfds;
    uint64_t u64;        /* first 8 payload bytes */
    uint32_t nregions;   /* SET_MEM_TABLE */
    struct vfe_vu_region region; /* ADD_MEM_REG, REM_MEM_REG */
    ino_t fd_ino;        /* the first fd's inode */
    bool refused;
    bool before_map_reply; /* ADD/REM_MEM_REG while a backend request was unanswered */
};

#define FAKE_MAX_REGIONS 64u

struct fake {
    char *dir, *path;
    int lfd, fd;
    pthread_t thread;
    bool running;
    uint64_t features, protocol, queues;

    GMutex lock;         /* everything below */
    GArray *log;         /* struct rec */
    char *why;           /* the first refusal */
    bool hung_up;

    /* Protocol state, the thread's own. */
    bool got_features, owned;
    uint64_t acked_protocol, acked_features;
    bool features_set;
    unsigned nregions;
    struct vfe_vu_region regions[FAKE_MAX_REGIONS];
    uint32_t base[64];

    /* The backend request channel (SET_BACKEND_REQ_FD's fd), driven by the
     * test; under lock: whether a request sent on it awaits its reply. */
    int chan_fd;
    bool chan_waiting;
    GCond chan_cond;
};

static bool in_table(const struct fake *f, uint64_t uaddr)
{
    for (unsigned i = 0; i < f->nregions; i++)
        if (uaddr >= f->regions[i].userspace_addr &&
            uaddr - f->regions[i].userspace_addr < f->regions[i].memory_size)
            return true;
    return false;
}

static bool has_own_reply(uint32_t req)
{
    return req == VFE_VU_GET_FEATURES || req == VFE_VU_GET_PROTOCOL_FEATURES ||
           req == VFE_VU_GET_QUEUE_NUM || req == VFE_VU_GET_VRING_BASE ||
           req == VFE_VU_GET_MAX_MEM_SLOTS;
}

/* NULL when the request is acceptable, else why not (g_free). */
static char *check(struct fake *f, const struct vfe_msg *m, unsigned nfds)
{
    uint32_t req = m->request, size = m->size;
    const char *name = vfe_msg_name(req);
    uint64_t v = 0;
    if (size >= 8)
        memcpy(&v, m->payload.raw, 8);
    if ((m->flags & VFE_VU_VERSION_MASK) != VFE_VU_VERSION)
        return g_strdup_printf("%s: version %u", name, m->flags & VFE_VU_VERSION_MASK);
    if (m->flags & ~(VFE_VU_VERSION_MASK | VFE_VU_FLAG_NEED_REPLY))
        return g_strdup_printf("%s: flags 0x%x", name, m->flags);
    bool reply_ack = f->acked_protocol & (1ull << VFE_VU_PF_REPLY_ACK);
    if ((m->flags & VFE_VU_FLAG_NEED_REPLY) && !reply_ack)
        return g_strdup_printf("%s: NEED_REPLY without REPLY_ACK (no ack would come)", name);

    /* Payload size and fds per request. */
    uint32_t want = 0;
    unsigned want_fds = 0;
    switch (req) {
    case VFE_VU_GET_FEATURES:
    case VFE_VU_GET_PROTOCOL_FEATURES:
    case VFE_VU_GET_QUEUE_NUM:
    case VFE_VU_SET_OWNER:
    case VFE_VU_RESET_OWNER:
    case VFE_VU_RESET_DEVICE:
        break;
    case VFE_VU_SET_BACKEND_REQ_FD:
        want_fds = 1;
        break;
    case VFE_VU_SET_FEATURES:
    case VFE_VU_SET_PROTOCOL_FEATURES:
        want = 8;
        break;
    case VFE_VU_SET_VRING_NUM:
    case VFE_VU_SET_VRING_BASE:
    case VFE_VU_GET_VRING_BASE:
    case VFE_VU_SET_VRING_ENABLE:
        want = sizeof(struct vfe_vu_state);
        break;
    case VFE_VU_SET_VRING_ADDR:
        want = sizeof(struct vfe_vu_addr);
        break;
    case VFE_VU_SET_VRING_KICK:
    case VFE_VU_SET_VRING_CALL:
    case VFE_VU_SET_VRING_ERR:
        want = 8;
        want_fds = (v & VFE_VU_VRING_NOFD) ? 0 : 1;
        break;
    case VFE_VU_SET_MEM_TABLE: {
        uint32_t n = size >= 8 ? m->payload.mem.nregions : 0;
        if (n < 1 || n > VFE_VU_MAX_REGIONS)
            return g_strdup_printf("SET_MEM_TABLE: %u regions", n);
        want = 8 + 32 * n;
        want_fds = n;
        break;
    }
    case VFE_VU_GET_MAX_MEM_SLOTS:
        break;
    case VFE_VU_ADD_MEM_REG:
        want = sizeof(struct vfe_vu_mem_reg);
        want_fds = 1;
        break;
    case VFE_VU_REM_MEM_REG:
        want = sizeof(struct vfe_vu_mem_reg); /* QEMU attaches no fd */
        break;
    default:
        return g_strdup_printf("request %u (%s) not expected", req, name);
    }
    if (size != want)
        return g_strdup_printf("%s: payload size %u, the spec's is %u", name, size, want);
    if (nfds != want_fds)
        return g_strdup_printf("%s: %u fds attached, %u expected", name, nfds, want_fds);

    /* When each request is legal. */
    bool pf_offered = f->features & (1ull << VFE_F_PROTOCOL_FEATURES);
    bool mq = f->acked_protocol & (1ull << VFE_VU_PF_MQ);
    uint32_t index = (uint32_t)v; /* state.index / vring index's low bits */
    switch (req) {
    case VFE_VU_GET_PROTOCOL_FEATURES:
    case VFE_VU_SET_PROTOCOL_FEATURES:
        if (!f->got_features || !pf_offered)
            return g_strdup_printf("%s without VHOST_USER_F_PROTOCOL_FEATURES offered", name);
        if (req == VFE_VU_SET_PROTOCOL_FEATURES && (v & ~f->protocol))
            return g_strdup_printf("SET_PROTOCOL_FEATURES 0x%llx beyond the offer",
                                   (unsigned long long)v);
        break;
    case VFE_VU_GET_QUEUE_NUM:
        if (!mq)
            return g_strdup("GET_QUEUE_NUM without MQ negotiated");
        break;
    case VFE_VU_SET_BACKEND_REQ_FD:
        if (!(f->acked_protocol & (1ull << VFE_VU_PF_BACKEND_REQ)))
            return g_strdup("SET_BACKEND_REQ_FD without BACKEND_REQ negotiated");
        break;
    case VFE_VU_RESET_DEVICE:
        if (!(f->acked_protocol & (1ull << VFE_VU_PF_RESET_DEVICE)))
            return g_strdup("RESET_DEVICE without RESET_DEVICE negotiated");
        break;
    case VFE_VU_SET_OWNER:
        if (f->owned)
            return g_strdup("SET_OWNER twice");
        break;
    case VFE_VU_SET_FEATURES:
        if (!f->owned)
            return g_strdup("SET_FEATURES before SET_OWNER");
        if (v & ~f->features)
            return g_strdup_printf("SET_FEATURES 0x%llx beyond the offer", (unsigned long long)v);
        break;
    case VFE_VU_SET_MEM_TABLE:
        if (!f->owned)
            return g_strdup("SET_MEM_TABLE before SET_OWNER");
        break;
    case VFE_VU_GET_MAX_MEM_SLOTS:
    case VFE_VU_ADD_MEM_REG:
    case VFE_VU_REM_MEM_REG:
        if (!(f->acked_protocol & (1ull << VFE_VU_PF_CONFIGURE_MEM_SLOTS)))
            return g_strdup_printf("%s without CONFIGURE_MEM_SLOTS negotiated", name);
        if (req != VFE_VU_GET_MAX_MEM_SLOTS && !f->owned)
            return g_strdup_printf("%s before SET_OWNER", name);
        if (req == VFE_VU_ADD_MEM_REG && f->nregions == FAKE_MAX_REGIONS)
            return g_strdup("ADD_MEM_REG past GET_MAX_MEM_SLOTS");
        if (req == VFE_VU_REM_MEM_REG) {
            struct vfe_vu_region r = m->payload.mem_reg.region;
            bool known = false;
            for (unsigned i = 0; i < f->nregions && !known; i++)
                known = f->regions[i].guest_phys_addr == r.guest_phys_addr &&
                        f->regions[i].memory_size == r.memory_size &&
                        f->regions[i].userspace_addr == r.userspace_addr;
            if (!known)
                return g_strdup("REM_MEM_REG of a region never added");
        }
        break;
    case VFE_VU_SET_VRING_NUM:
    case VFE_VU_SET_VRING_BASE:
    case VFE_VU_GET_VRING_BASE:
    case VFE_VU_SET_VRING_ADDR:
    case VFE_VU_SET_VRING_ENABLE:
    case VFE_VU_SET_VRING_KICK:
    case VFE_VU_SET_VRING_CALL:
    case VFE_VU_SET_VRING_ERR:
        if (req >= VFE_VU_SET_VRING_KICK && req <= VFE_VU_SET_VRING_ERR)
            index = (uint32_t)(v & VFE_VU_VRING_IDX_MASK);
        if (!f->owned)
            return g_strdup_printf("%s before SET_OWNER", name);
        if (index >= (mq ? f->queues : 2))
            return g_strdup_printf("%s: ring %u of %llu", name, index,
                                   (unsigned long long)(mq ? f->queues : 2));
        break;
    default:
        break;
    }
    if (req == VFE_VU_SET_VRING_NUM) {
        uint32_t num = m->payload.state.num;
        if (num == 0 || num > 32768 || (num & (num - 1)))
            return g_strdup_printf("SET_VRING_NUM %u", num);
    }
    if (req == VFE_VU_SET_VRING_ADDR) {
        struct vfe_vu_addr a;
        memcpy(&a, m->payload.raw, sizeof(a));
        if (a.flags & ~1u) /* VHOST_VRING_F_LOG only */
            return g_strdup_printf("SET_VRING_ADDR flags 0x%x", a.flags);
        if (!in_table(f, a.desc_user_addr) || !in_table(f, a.avail_user_addr) ||
            !in_table(f, a.used_user_addr))
            return g_strdup("SET_VRING_ADDR outside the memory table");
    }
    if (req == VFE_VU_SET_VRING_ENABLE) {
        if (!(f->acked_features & (1ull << VFE_F_PROTOCOL_FEATURES)))
            return g_strdup("SET_VRING_ENABLE without VHOST_USER_F_PROTOCOL_FEATURES acked");
        if (m->payload.state.num > 1)
            return g_strdup_printf("SET_VRING_ENABLE %u", m->payload.state.num);
    }
    return NULL;
}

/* The state a request leaves behind (it was accepted). */
static void apply(struct fake *f, const struct vfe_msg *m)
{
    uint64_t v = 0;
    memcpy(&v, m->payload.raw, 8);
    switch (m->request) {
    case VFE_VU_GET_FEATURES:
        f->got_features = true;
        break;
    case VFE_VU_SET_PROTOCOL_FEATURES:
        f->acked_protocol = v;
        break;
    case VFE_VU_SET_OWNER:
        f->owned = true;
        break;
    case VFE_VU_SET_FEATURES:
        f->acked_features = v;
        f->features_set = true;
        break;
    case VFE_VU_SET_MEM_TABLE:
        f->nregions = m->payload.mem.nregions;
        memcpy(f->regions, m->payload.mem.regions, f->nregions * sizeof(f->regions[0]));
        break;
    case VFE_VU_ADD_MEM_REG:
        f->regions[f->nregions++] = m->payload.mem_reg.region;
        break;
    case VFE_VU_REM_MEM_REG:
        for (unsigned i = 0; i < f->nregions; i++)
            if (f->regions[i].guest_phys_addr == m->payload.mem_reg.region.guest_phys_addr) {
                memmove(&f->regions[i], &f->regions[i + 1],
                        (f->nregions - i - 1) * sizeof(f->regions[0]));
                f->nregions--;
                break;
            }
        break;
    case VFE_VU_SET_VRING_BASE:
        f->base[m->payload.state.index] = m->payload.state.num;
        break;
    case VFE_VU_RESET_DEVICE:
        /* The device's state goes, the connection's (owner, protocol) stays. */
        f->acked_features = 0;
        f->features_set = false;
        break;
    default:
        break;
    }
}

static int fake_send(int fd, uint32_t req, const void *payload, uint32_t size)
{
    uint8_t buf[VFE_VU_HDR_SIZE + 16];
    uint32_t h[3] = { req, VFE_VU_VERSION | VFE_VU_FLAG_REPLY, size };
    memcpy(buf, h, sizeof(h));
    memcpy(buf + VFE_VU_HDR_SIZE, payload, size);
    return write(fd, buf, VFE_VU_HDR_SIZE + size) == (ssize_t)(VFE_VU_HDR_SIZE + size) ? 0 : -1;
}

/* Reads exactly len bytes; the fds of the first recvmsg are counted and closed,
 * but the first one is returned in *keep when keep is not NULL (-1 if none). */
static int fake_recv(int fd, void *buf, size_t len, unsigned *nfds, int *keep)
{
    if (keep)
        *keep = -1;
    uint8_t *p = buf;
    while (len > 0) {
        char ctl[CMSG_SPACE(VFE_VU_MAX_FDS * sizeof(int))];
        struct iovec iov = { p, len };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
                             .msg_controllen = sizeof(ctl) };
        ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
        if (n <= 0)
            return -1;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
            if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                continue;
            unsigned k = (unsigned)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            int fds[VFE_VU_MAX_FDS];
            memcpy(fds, CMSG_DATA(cm), k * sizeof(int));
            for (unsigned i = 0; i < k; i++) {
                if (keep && *keep < 0)
                    *keep = fds[i];
                else
                    close(fds[i]);
            }
            if (nfds)
                *nfds += k;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    f->fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
    struct vfe_msg *m = g_new0(struct vfe_msg, 1);
    while (f->fd >= 0) {
        unsigned nfds = 0;
        int fd0;
        memset(m, 0, sizeof(*m));
        if (fake_recv(f->fd, m, VFE_VU_HDR_SIZE, &nfds, &fd0) < 0)
            break;
        struct stat fst = { 0 };
        if (fd0 >= 0 && fstat(fd0, &fst) < 0)
            fst.st_ino = 0;
        if (fd0 >= 0 && m->request == VFE_VU_SET_BACKEND_REQ_FD && f->chan_fd < 0)
            f->chan_fd = fd0; /* the test drives it (fake_chan_call) */
        else if (fd0 >= 0)
            close(fd0);
        if (m->size > VFE_VU_MAX_PAYLOAD ||
            fake_recv(f->fd, m->payload.raw, m->size, NULL, NULL) < 0)
            break;
        char *why = check(f, m, nfds);
        struct rec r = { .req = m->request, .flags = m->flags, .size = m->size, .nfds = nfds,
                         .fd_ino = fst.st_ino, .refused = why != NULL };
        memcpy(&r.u64, m->payload.raw, 8);
        if (m->request == VFE_VU_SET_MEM_TABLE && m->size >= 8)
            r.nregions = m->payload.mem.nregions;
        if (m->request == VFE_VU_ADD_MEM_REG || m->request == VFE_VU_REM_MEM_REG)
            r.region = m->payload.mem_reg.region;
        g_mutex_lock(&f->lock);
        if (m->request == VFE_VU_ADD_MEM_REG || m->request == VFE_VU_REM_MEM_REG) {
            /* A frontend that answers its backend request first gets its
             * answer read by the test meanwhile; one that sends the region
             * first waits for this ack before it answers, so a second is
             * plenty to tell the two apart. */
            gint64 until = g_get_monotonic_time() + G_TIME_SPAN_SECOND;
            while (f->chan_waiting && g_cond_wait_until(&f->chan_cond, &f->lock, until))
                ;
            r.before_map_reply = f->chan_waiting;
        }
        g_array_append_val(f->log, r);
        if (why && !f->why)
            f->why = g_strdup(why);
        g_mutex_unlock(&f->lock);
        if (!why)
            apply(f, m);
        int w = 0;
        if (!why && m->request == VFE_VU_GET_FEATURES)
            w = fake_send(f->fd, m->request, &f->features, 8);
        else if (!why && m->request == VFE_VU_GET_PROTOCOL_FEATURES)
            w = fake_send(f->fd, m->request, &f->protocol, 8);
        else if (!why && m->request == VFE_VU_GET_QUEUE_NUM)
            w = fake_send(f->fd, m->request, &f->queues, 8);
        else if (!why && m->request == VFE_VU_GET_MAX_MEM_SLOTS) {
            uint64_t slots = FAKE_MAX_REGIONS;
            w = fake_send(f->fd, m->request, &slots, 8);
        } else if (!why && m->request == VFE_VU_GET_VRING_BASE) {
            struct vfe_vu_state st = { m->payload.state.index, f->base[m->payload.state.index] };
            w = fake_send(f->fd, m->request, &st, sizeof(st));
        } else if ((m->flags & VFE_VU_FLAG_NEED_REPLY) && !has_own_reply(m->request)) {
            uint64_t ack = why ? 1 : 0;
            w = fake_send(f->fd, m->request, &ack, 8);
        }
        g_free(why);
        /* The rust-vmm backend ends the session on a refused request. */
        if (r.refused || w < 0)
            break;
    }
    g_free(m);
    g_mutex_lock(&f->lock);
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    f->hung_up = true;
    g_mutex_unlock(&f->lock);
    return NULL;
}

static struct fake *fake_new(uint64_t features, uint64_t protocol, uint64_t queues)
{
    struct fake *f = g_new0(struct fake, 1);
    f->features = features;
    f->protocol = protocol;
    f->queues = queues;
    f->fd = -1;
    f->chan_fd = -1;
    g_mutex_init(&f->lock);
    g_cond_init(&f->chan_cond);
    f->log = g_array_new(FALSE, TRUE, sizeof(struct rec));
    f->dir = g_dir_make_tmp("vfe-wire-XXXXXX", NULL);
    assert_non_null(f->dir);
    f->path = g_build_filename(f->dir, "s", NULL);
    f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    strcpy(sa.sun_path, f->path);
    assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(f->lfd, 1), 0);
    assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
    f->running = true;
    return f;
}

/* After the frontend hung up (or the fake did): every message is logged. */
static void fake_join(struct fake *f)
{
    if (f->running)
        pthread_join(f->thread, NULL);
    f->running = false;
}

static void fake_free(struct fake *f)
{
    fake_join(f);
    if (f->chan_fd >= 0)
        close(f->chan_fd);
    g_cond_clear(&f->chan_cond);
    close(f->lfd);
    unlink(f->path);
    rmdir(f->dir);
    g_free(f->path);
    g_free(f->dir);
    g_free(f->why);
    g_array_free(f->log, TRUE);
    g_mutex_clear(&f->lock);
    g_free(f);
}

/* Waits until the fake has logged n messages (it answers them in order, so
 * after a synchronous call returns they are all there but the last's). */
static unsigned fake_count(struct fake *f)
{
    g_mutex_lock(&f->lock);
    unsigned n = f->log->len;
    g_mutex_unlock(&f->lock);
    return n;
}

static void fake_wait_count(struct fake *f, unsigned n)
{
    for (int i = 0; i < 5000 && fake_count(f) < n; i++)
        usleep(1000);
    assert_true(fake_count(f) >= n);
}

static struct rec fake_rec(struct fake *f, unsigned i)
{
    g_mutex_lock(&f->lock);
    assert_true(i < f->log->len);
    struct rec r = g_array_index(f->log, struct rec, i);
    g_mutex_unlock(&f->lock);
    return r;
}

static void assert_no_refusal(struct fake *f)
{
    g_mutex_lock(&f->lock);
    char *why = g_strdup(f->why);
    g_mutex_unlock(&f->lock);
    if (why)
        fail_msg("the strict backend refused: %s", why);
}

static void dump(struct fake *f, unsigned from, unsigned to)
{
    for (unsigned i = from; i < to; i++) {
        struct rec r = fake_rec(f, i);
        print_message("  %2u %-22s flags 0x%x size %u fds %u u64 0x%llx%s\n", i,
                      vfe_msg_name(r.req), r.flags, r.size, r.nfds, (unsigned long long)r.u64,
                      r.refused ? "  REFUSED" : "");
    }
}

/* The log from index from on is exactly want[] (requests), else the log is
 * printed and the test fails. */
static void assert_requests(struct fake *f, unsigned from, const uint32_t *want, unsigned n)
{
    unsigned have = fake_count(f);
    bool ok = have == from + n;
    for (unsigned i = 0; ok && i < n; i++)
        ok = fake_rec(f, from + i).req == want[i];
    if (!ok) {
        print_message("sent:\n");
        dump(f, from, have);
        print_message("expected:\n");
        for (unsigned i = 0; i < n; i++)
            print_message("  %2u %s\n", from + i, vfe_msg_name(want[i]));
        fail_msg("vfe's messages differ from the expected sequence");
    }
}

static struct vfe_dev *connect_fake(struct fake *f, const struct vfe_dev_config *base)
{
    struct vfe_dev_config cfg = base ? *base : (struct vfe_dev_config){ 0 };
    cfg.conn.socket_path = f->path;
    cfg.conn.timeout_ms = 5000;
    if (!cfg.request_queues)
        cfg.request_queues = 1;
    struct vfe_dev *d = NULL;
    int r = vfe_dev_connect(&cfg, &d);
    if (r < 0) {
        dump(f, 0, fake_count(f));
        fail_msg("vfe_dev_connect: %s (%s)", strerror(-r), f->why ? f->why : "");
    }
    return d;
}

/* vfe_dev_start (stop, reset) that must succeed; on failure the log and the
 * fake's reason. */
#define DEV_OK(f, call)                                                                  \
    do {                                                                                 \
        int r_ = (call);                                                                 \
        if (r_ < 0) {                                                                    \
            dump((f), 0, fake_count(f));                                                 \
            g_mutex_lock(&(f)->lock);                                                    \
            g_autofree char *why_ = g_strdup((f)->why);                                  \
            g_mutex_unlock(&(f)->lock);                                                  \
            fail_msg("%s: %s; the strict backend: %s", #call, strerror(-r_),             \
                     why_ ? why_ : "no refusal");                                        \
        }                                                                                \
    } while (0)

/* The projection of a QEMU sequence onto the requests vfe sends: the
 * per-queue SET_VRING_CALL / SET_VRING_ERR of the guest notifiers and the
 * probe's resets go, ADD_MEM_REG is SET_MEM_TABLE. */
static unsigned qemu_projection(const struct qemu_msg *q, unsigned n, uint32_t *out)
{
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++) {
        uint32_t r = q[i].req;
        if (r == VFE_VU_SET_VRING_CALL || r == VFE_VU_SET_VRING_ERR ||
            r == VFE_VU_GET_MAX_MEM_SLOTS)
            continue;
        if (r == 37 /* ADD_MEM_REG */)
            r = VFE_VU_SET_MEM_TABLE;
        out[k++] = r;
    }
    return k;
}

/* Every request QEMU sends with NEED_REPLY, vfe sends with it too; none that
 * has a reply of its own carries it (as with QEMU). */
static void assert_need_reply_like_qemu(struct fake *f)
{
    const struct qemu_msg *all[] = { qemu_connect, qemu_start, qemu_stop };
    const unsigned lens[] = { G_N_ELEMENTS(qemu_connect), G_N_ELEMENTS(qemu_start),
                              G_N_ELEMENTS(qemu_stop) };
    for (unsigned i = 0; i < fake_count(f); i++) {
        struct rec r = fake_rec(f, i);
        if (has_own_reply(r.req))
            assert_false(r.flags & VFE_VU_FLAG_NEED_REPLY);
        for (unsigned s = 0; s < 3; s++)
            for (unsigned k = 0; k < lens[s]; k++)
                if (all[s][k].req == r.req && (all[s][k].flags & VFE_VU_FLAG_NEED_REPLY) &&
                    !(r.flags & VFE_VU_FLAG_NEED_REPLY))
                    fail_msg("%s without NEED_REPLY (QEMU sets it)", vfe_msg_name(r.req));
    }
}

/* ---- Tests against the fake -------------------------------------------------------- */

/* The sequence the Rust daemon refused, message for message: the fake, like
 * the daemon, acks SET_MEM_TABLE with a failure and hangs up. Proves the fake
 * is strict where it matters, so the tests below mean something. */
static void test_fake_refuses_fixed_size_table(void **state)
{
    (void)state;
    struct fake *f = fake_new(RUST_FEATURES, RUST_PROTOCOL, RUST_QUEUES);
    struct vfe_dev *d = connect_fake(f, NULL);
    struct vfe_conn *c = vfe_dev_conn(d);
    assert_int_equal(vfe_conn_set_u64(c, VFE_VU_SET_FEATURES, 0x170000000ull), 0);
    struct vfe_mem *mem = vfe_dev_mem(d);
    unsigned n = vfe_mem_nregions(mem);
    assert_int_equal(n, 4);
    struct vfe_vu_region regs[VFE_VU_MAX_REGIONS];
    int fds[VFE_VU_MAX_REGIONS];
    for (unsigned i = 0; i < n; i++) {
        vfe_mem_region(mem, i, &regs[i]);
        fds[i] = vfe_mem_fd(mem);
    }
    struct vfe_msg m;
    vfe_msg_init(&m, VFE_VU_SET_MEM_TABLE, 0);
    assert_int_equal(vfe_msg_set_mem(&m, regs, n), 0);
    m.size = sizeof(struct vfe_vu_mem); /* 264: the whole 8-entry table, as vfe sent it */
    assert_int_equal(m.size, 264);
    assert_int_equal(vfe_conn_call(c, &m, fds, n, NULL), -EIO);
    assert_true(vfe_conn_wait_closed(c, 5000));
    struct rec r = fake_rec(f, fake_count(f) - 1);
    assert_int_equal(r.req, VFE_VU_SET_MEM_TABLE);
    assert_true(r.refused);
    assert_non_null(strstr(f->why, "payload size 264, the spec's is 136"));
    vfe_dev_close(d);
    fake_free(f);
}

/* Connect and start as QEMU does, with what the Rust daemon offers: every
 * request acceptable, in QEMU's order, SET_MEM_TABLE 8 + 32 per region with one
 * fd each. */
static void test_start_like_qemu(void **state)
{
    (void)state;
    struct fake *f = fake_new(RUST_FEATURES, RUST_PROTOCOL, RUST_QUEUES);
    struct vfe_dev *d = connect_fake(f, NULL);
    unsigned connected = fake_count(f);
    DEV_OK(f, vfe_dev_start(d));
    fake_wait_count(f, connected + 1);
    assert_no_refusal(f);

    /* Connect: QEMU's, but GET_MAX_MEM_SLOTS (vfe does not negotiate
     * CONFIGURE_MEM_SLOTS) and vhost_dev_init's extras. */
    static const uint32_t want_connect[] = {
        VFE_VU_GET_FEATURES, VFE_VU_GET_PROTOCOL_FEATURES, VFE_VU_SET_PROTOCOL_FEATURES,
        VFE_VU_GET_QUEUE_NUM, VFE_VU_SET_BACKEND_REQ_FD, VFE_VU_SET_OWNER,
    };
    uint32_t proj[64];
    unsigned np = qemu_projection(qemu_connect, 7, proj); /* up to SET_OWNER */
    assert_int_equal(np, G_N_ELEMENTS(want_connect));
    assert_memory_equal(proj, want_connect, sizeof(want_connect));
    uint32_t head[G_N_ELEMENTS(want_connect)];
    for (unsigned i = 0; i < G_N_ELEMENTS(head); i++)
        head[i] = fake_rec(f, i).req;
    if (memcmp(head, want_connect, sizeof(head)) || connected != G_N_ELEMENTS(want_connect)) {
        dump(f, 0, fake_count(f));
        fail_msg("connect sequence differs from QEMU's");
    }
    /* The protocol features: what QEMU acks of these, RESET_DEVICE included. */
    uint64_t acked = fake_rec(f, 2).u64;
    assert_int_equal(acked, (1ull << VFE_VU_PF_MQ) | (1ull << VFE_VU_PF_REPLY_ACK) |
                                (1ull << VFE_VU_PF_BACKEND_REQ) |
                                (1ull << VFE_VU_PF_BACKEND_SEND_FD) |
                                (1ull << VFE_VU_PF_RESET_DEVICE));

    /* Start: QEMU's with the rings' call fds set right after their kick fds. */
    uint32_t want_start[64];
    unsigned n = qemu_projection(qemu_start, G_N_ELEMENTS(qemu_start), want_start);
    /* The probe's two RESET_DEVICEs come before SET_FEATURES: a guest's
     * driver, not the device start. */
    assert_int_equal(want_start[0], VFE_VU_RESET_DEVICE);
    assert_int_equal(want_start[1], VFE_VU_RESET_DEVICE);
    uint32_t want[64];
    unsigned k = 0;
    for (unsigned i = 2; i < n; i++) {
        want[k++] = want_start[i];
        if (want_start[i] == VFE_VU_SET_VRING_KICK)
            want[k++] = VFE_VU_SET_VRING_CALL;
    }
    assert_requests(f, connected, want, k);

    /* The message the Rust daemon refused is gone: 4 regions, 136 bytes, 4 fds. */
    for (unsigned i = connected; i < fake_count(f); i++) {
        struct rec r = fake_rec(f, i);
        if (r.req != VFE_VU_SET_MEM_TABLE)
            continue;
        assert_int_equal(r.nregions, vfe_mem_nregions(vfe_dev_mem(d)));
        assert_int_equal(r.size, 8 + 32 * r.nregions);
        assert_int_not_equal(r.size, sizeof(struct vfe_vu_mem));
        assert_int_equal(r.nfds, r.nregions);
    }
    /* Rings enabled with 1, each once, in index order. */
    for (unsigned i = fake_count(f) - 2, q = 0; i < fake_count(f); i++, q++) {
        struct rec r = fake_rec(f, i);
        assert_int_equal(r.req, VFE_VU_SET_VRING_ENABLE);
        assert_int_equal(r.u64, ((uint64_t)1 << 32) | q);
    }
    assert_need_reply_like_qemu(f);
    vfe_dev_close(d);
    fake_free(f);
}

/* Stop as QEMU's vhost_dev_stop: every ring disabled, then every base
 * fetched; a reset adds RESET_DEVICE (negotiated), and the next start is the
 * whole start sequence again, accepted. */
static void test_stop_and_reset_like_qemu(void **state)
{
    (void)state;
    struct fake *f = fake_new(RUST_FEATURES, RUST_PROTOCOL, RUST_QUEUES);
    struct vfe_dev *d = connect_fake(f, NULL);
    DEV_OK(f, vfe_dev_start(d));
    unsigned started = fake_count(f);
    DEV_OK(f, vfe_dev_stop(d));
    uint32_t want[16];
    unsigned n = 0;
    for (unsigned i = 0; i < G_N_ELEMENTS(qemu_stop); i++)
        if (qemu_stop[i].req == VFE_VU_SET_VRING_ENABLE ||
            qemu_stop[i].req == VFE_VU_GET_VRING_BASE)
            want[n++] = qemu_stop[i].req;
    assert_requests(f, started, want, n);
    for (unsigned q = 0; q < 2; q++)
        assert_int_equal(fake_rec(f, started + q).u64, q); /* SET_VRING_ENABLE q, 0 */
    assert_no_refusal(f);

    DEV_OK(f, vfe_dev_start(d));
    unsigned restarted = fake_count(f);
    DEV_OK(f, vfe_dev_reset(d));
    fake_wait_count(f, restarted + n + 1);
    want[n++] = VFE_VU_RESET_DEVICE; /* QEMU's last one, after the masked calls */
    assert_requests(f, restarted, want, n);
    struct rec r = fake_rec(f, restarted + n - 1);
    assert_int_equal(r.flags, VFE_VU_VERSION); /* no NEED_REPLY, as QEMU */
    assert_int_equal(r.size, 0);
    DEV_OK(f, vfe_dev_start(d));
    assert_no_refusal(f);
    assert_int_equal(fake_rec(f, restarted + n).req, VFE_VU_SET_FEATURES);
    assert_need_reply_like_qemu(f);
    for (unsigned i = 0; i < fake_count(f); i++)
        assert_int_not_equal(fake_rec(f, i).req, VFE_VU_RESET_OWNER);
    vfe_dev_close(d);
    fake_free(f);
}

/* A backend without RESET_DEVICE (vufsd, the legacy daemon) still gets the
 * deprecated RESET_OWNER, and nothing illegal. */
static void test_reset_without_reset_device(void **state)
{
    (void)state;
    struct fake *f = fake_new(RUST_FEATURES, RUST_PROTOCOL & ~(1ull << VFE_VU_PF_RESET_DEVICE),
                              RUST_QUEUES);
    struct vfe_dev *d = connect_fake(f, NULL);
    DEV_OK(f, vfe_dev_start(d));
    unsigned before = fake_count(f);
    DEV_OK(f, vfe_dev_reset(d));
    fake_wait_count(f, before + 5);
    assert_int_equal(fake_rec(f, before + 4).req, VFE_VU_RESET_OWNER);
    DEV_OK(f, vfe_dev_start(d));
    assert_no_refusal(f);
    vfe_dev_close(d);
    fake_free(f);
}

/* Without VHOST_USER_F_PROTOCOL_FEATURES: no protocol negotiation, no
 * NEED_REPLY, and no SET_VRING_ENABLE at start or stop (the rings start
 * enabled; the spec allows the request only with the feature). */
static void test_no_protocol_features(void **state)
{
    (void)state;
    struct fake *f = fake_new(RUST_FEATURES & ~(1ull << VFE_F_PROTOCOL_FEATURES), 0, 0);
    struct vfe_dev *d = connect_fake(f, NULL);
    DEV_OK(f, vfe_dev_start(d));
    DEV_OK(f, vfe_dev_stop(d));
    DEV_OK(f, vfe_dev_start(d));
    /* Nothing is acked: the whole log is there once the frontend hung up. */
    vfe_dev_close(d);
    fake_join(f);
    assert_no_refusal(f);
    unsigned bases = 0;
    for (unsigned i = 0; i < fake_count(f); i++) {
        struct rec r = fake_rec(f, i);
        assert_int_not_equal(r.req, VFE_VU_SET_VRING_ENABLE);
        assert_int_not_equal(r.req, VFE_VU_GET_PROTOCOL_FEATURES);
        assert_int_equal(r.flags, VFE_VU_VERSION);
        bases += r.req == VFE_VU_GET_VRING_BASE;
    }
    assert_int_equal(bases, 2 * 2); /* the stop, and the close's */
    fake_free(f);
}

/* Several request queues (vufsd's MQ), one region and eight: the sizes follow
 * the count. */
static void test_queues_and_regions(void **state)
{
    (void)state;
    for (unsigned nreg = 1; nreg <= VFE_VU_MAX_REGIONS; nreg += 7) {
        struct fake *f = fake_new(RUST_FEATURES, RUST_PROTOCOL, 5);
        struct vfe_dev_config cfg = { .request_queues = 4 };
        cfg.mem.nregions = nreg;
        for (unsigned i = 0; i < nreg; i++) {
            cfg.mem.gpa[i] = (uint64_t)i << 32;
            cfg.mem.size[i] = i == 0 ? 16u << 20 : 1u << 20;
        }
        struct vfe_dev *d = connect_fake(f, &cfg);
        DEV_OK(f, vfe_dev_start(d));
        DEV_OK(f, vfe_dev_stop(d));
        assert_no_refusal(f);
        unsigned enables = 0, bases = 0, tables = 0;
        for (unsigned i = 0; i < fake_count(f); i++) {
            struct rec r = fake_rec(f, i);
            enables += r.req == VFE_VU_SET_VRING_ENABLE;
            bases += r.req == VFE_VU_GET_VRING_BASE;
            if (r.req == VFE_VU_SET_MEM_TABLE) {
                tables++;
                assert_int_equal(r.nregions, nreg);
                assert_int_equal(r.size, 8 + 32 * nreg);
                assert_int_equal(r.nfds, nreg);
            }
        }
        assert_int_equal(enables, 2 * 5);
        assert_int_equal(bases, 5);
        assert_int_equal(tables, 1);
        vfe_dev_close(d);
        fake_free(f);
    }
}

/* ---- Guest memory region by region, and a DAX window's mappings as regions -------- */

/* A request on the backend request channel, as the backend sends it (with
 * NEED_REPLY, REPLY_ACK being negotiated), and vfe's u64 answer. */
static uint64_t fake_chan_call(struct fake *f, uint32_t req, const void *payload, uint32_t size,
                               int fd)
{
    g_mutex_lock(&f->lock);
    int cfd = f->chan_fd;
    f->chan_waiting = true;
    g_mutex_unlock(&f->lock);
    assert_true(cfd >= 0);
    uint8_t buf[VFE_VU_HDR_SIZE + 64];
    uint32_t h[3] = { req, VFE_VU_VERSION | VFE_VU_FLAG_NEED_REPLY, size };
    memcpy(buf, h, sizeof(h));
    memcpy(buf + VFE_VU_HDR_SIZE, payload, size);
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl = { 0 };
    struct iovec iov = { buf, VFE_VU_HDR_SIZE + size };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (fd >= 0) {
        mh.msg_control = ctl.b;
        mh.msg_controllen = sizeof(ctl.b);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    }
    assert_int_equal(sendmsg(cfd, &mh, 0), (ssize_t)(VFE_VU_HDR_SIZE + size));
    struct vfe_msg rep;
    assert_int_equal(fake_recv(cfd, &rep, VFE_VU_HDR_SIZE + 8, NULL, NULL), 0);
    g_mutex_lock(&f->lock);
    f->chan_waiting = false;
    g_cond_broadcast(&f->chan_cond);
    g_mutex_unlock(&f->lock);
    assert_int_equal(rep.request, req);
    assert_int_equal(rep.flags, VFE_VU_VERSION | VFE_VU_FLAG_REPLY);
    assert_int_equal(rep.size, 8);
    return rep.payload.u64;
}

/* Index of the first message from `from` on with request req, waiting for it
 * up to 5 s (-1 if none came). */
static int fake_find(struct fake *f, unsigned from, uint32_t req)
{
    for (int t = 0; t < 5000; t++) {
        for (unsigned i = from; i < fake_count(f); i++)
            if (fake_rec(f, i).req == req)
                return (int)i;
        usleep(1000);
    }
    return -1;
}

struct shmem_map {
    uint8_t shmid;
    uint8_t padding[7];
    uint64_t fd_offset, shm_offset, len, flags;
};

#define WIN_GPA 0x10000000000ull /* 1 TiB: no guest RAM there */
#define MiB (1ull << 20)

/*
 * As QEMU 11.1 with CONFIGURE_MEM_SLOTS: GET_MAX_MEM_SLOTS in the connect,
 * ADD_MEM_REG per region where SET_MEM_TABLE went, nothing at a restart; a
 * window's map answered first, then its ADD_MEM_REG (the mapped range: its
 * window address, the file's fd at its offset), an unmap answered, then its
 * REM_MEM_REG (no fd, mmap_offset 0); mappings a reset dropped are removed at
 * the next start, before the rings.
 */
static void test_regions_like_qemu(void **state)
{
    (void)state;
    struct fake *f = fake_new(RUST_FEATURES, RUST_PROTOCOL | (1ull << VFE_VU_PF_SHMEM), RUST_QUEUES);
    struct vfe_dax *x;
    assert_int_equal(vfe_dax_new(8 * MiB, VFE_DAX_SHMEM, &x), 0);
    struct vfe_dev_config cfg = {
        .protocol_features = (1ull << VFE_VU_PF_MQ) | (1ull << VFE_VU_PF_REPLY_ACK) |
                             (1ull << VFE_VU_PF_BACKEND_REQ) | (1ull << VFE_VU_PF_BACKEND_SEND_FD) |
                             (1ull << VFE_VU_PF_RESET_DEVICE) |
                             (1ull << VFE_VU_PF_CONFIGURE_MEM_SLOTS) | (1ull << VFE_VU_PF_SHMEM),
        .backend_req = vfe_dax_handle,
        .backend_post = vfe_dax_post,
        .backend_req_opaque = x,
    };
    struct vfe_dev *d = connect_fake(f, &cfg);
    vfe_dax_report_regions(x, d, WIN_GPA, 100 * 1000);
    unsigned connected = fake_count(f);
    /* Connect: QEMU's up to SET_OWNER, GET_MAX_MEM_SLOTS where QEMU sends it. */
    unsigned k = 0;
    for (unsigned i = 0; i < 7; i++)
        if (fake_rec(f, k).req == qemu_connect[i].req)
            k++;
    if (k != 7 || connected != 7) {
        dump(f, 0, fake_count(f));
        fail_msg("connect differs from QEMU's (GET_MAX_MEM_SLOTS included)");
    }

    DEV_OK(f, vfe_dev_start(d));
    assert_no_refusal(f);
    struct vfe_mem *mem = vfe_dev_mem(d);
    unsigned nram = vfe_mem_nregions(mem);
    /* Start: SET_FEATURES, then one ADD_MEM_REG per region (QEMU recorded one,
     * for its one RAM region), NEED_REPLY, 40 bytes and the region's fd. */
    assert_int_equal(fake_rec(f, connected).req, VFE_VU_SET_FEATURES);
    for (unsigned i = 0; i < nram; i++) {
        struct rec r = fake_rec(f, connected + 1 + i);
        struct vfe_vu_region want;
        vfe_mem_region(mem, i, &want);
        assert_int_equal(r.req, VFE_VU_ADD_MEM_REG);
        assert_int_equal(r.flags, VFE_VU_VERSION | VFE_VU_FLAG_NEED_REPLY);
        assert_int_equal(r.size, 40);
        assert_int_equal(r.nfds, 1);
        assert_memory_equal(&r.region, &want, sizeof(want));
    }
    assert_int_equal(fake_rec(f, connected + 1 + nram).req, VFE_VU_SET_VRING_NUM);
    for (unsigned i = connected; i < fake_count(f); i++)
        assert_int_not_equal(fake_rec(f, i).req, VFE_VU_SET_MEM_TABLE);

    /* A map: answered while the guest still sees zeros, then committed. */
    char path[] = "/tmp/vfe-wire-file-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    assert_int_equal(ftruncate(fd, 4 * MiB), 0);
    assert_int_equal(pwrite(fd, "second range", 12, 2 * MiB), 12);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    unsigned before = fake_count(f);
    struct shmem_map mm = { .fd_offset = 2 * MiB, .shm_offset = 4 * MiB, .len = 2 * MiB, .flags = 1 };
    assert_int_equal(fake_chan_call(f, VFE_VU_BACKEND_SHMEM_MAP, &mm, sizeof(mm), fd), 0);
    int a = fake_find(f, before, VFE_VU_ADD_MEM_REG);
    assert_true(a >= 0);
    struct rec r = fake_rec(f, (unsigned)a);
    if (r.before_map_reply)
        fail_msg("ADD_MEM_REG before the map's reply: QEMU 11.1 answers first");
    assert_int_equal(r.region.guest_phys_addr, WIN_GPA + 4 * MiB);
    assert_int_equal(r.region.memory_size, 2 * MiB);
    assert_int_equal(r.region.userspace_addr,
                     (uint64_t)(uintptr_t)vfe_dax_window(x) + 4 * MiB);
    assert_int_equal(r.region.mmap_offset, 2 * MiB);
    assert_int_equal(r.nfds, 1);
    assert_int_equal(r.fd_ino, st.st_ino);
    assert_true(vfe_dax_is_mapped(x, 4 * MiB, 2 * MiB));
    assert_memory_equal((char *)vfe_dax_window(x) + 4 * MiB, "second range", 12);
    struct vfe_dev_region_stats rs;
    vfe_dev_get_region_stats(d, &rs);
    assert_int_equal(rs.regions, nram + 1);
    assert_int_equal(rs.max_mem_slots, FAKE_MAX_REGIONS);

    /* The unmap: answered, then REM_MEM_REG. */
    before = fake_count(f);
    struct shmem_map um = { .shm_offset = 4 * MiB, .len = 2 * MiB };
    assert_int_equal(fake_chan_call(f, VFE_VU_BACKEND_SHMEM_UNMAP, &um, sizeof(um), -1), 0);
    int rm = fake_find(f, before, VFE_VU_REM_MEM_REG);
    assert_true(rm >= 0);
    r = fake_rec(f, (unsigned)rm);
    assert_false(r.before_map_reply);
    assert_int_equal(r.region.guest_phys_addr, WIN_GPA + 4 * MiB);
    assert_int_equal(r.region.memory_size, 2 * MiB);
    assert_int_equal(r.region.mmap_offset, 0);
    assert_int_equal(r.nfds, 0);
    assert_false(vfe_dax_is_mapped(x, 4 * MiB, 4096));

    /* A restart sends no region; a mapping dropped by a reset goes at the
     * next start, after SET_FEATURES and before the rings. */
    assert_int_equal(fake_chan_call(f, VFE_VU_BACKEND_SHMEM_MAP, &mm, sizeof(mm), fd), 0);
    assert_true(fake_find(f, fake_count(f) - 1, VFE_VU_ADD_MEM_REG) >= 0);
    DEV_OK(f, vfe_dev_stop(d));
    before = fake_count(f);
    DEV_OK(f, vfe_dev_start(d));
    for (unsigned i = before; i < fake_count(f); i++) {
        assert_int_not_equal(fake_rec(f, i).req, VFE_VU_ADD_MEM_REG);
        assert_int_not_equal(fake_rec(f, i).req, VFE_VU_REM_MEM_REG);
    }
    before = fake_count(f);
    DEV_OK(f, vfe_dev_reset(d));
    vfe_dax_reset(x);
    /* RESET_DEVICE has no reply: the fake may record it after the call returns. */
    int reset = fake_find(f, before, VFE_VU_RESET_DEVICE);
    assert_true(reset >= 0);
    before = (unsigned)reset + 1;
    DEV_OK(f, vfe_dev_start(d));
    assert_int_equal(fake_rec(f, before).req, VFE_VU_SET_FEATURES);
    assert_int_equal(fake_rec(f, before + 1).req, VFE_VU_REM_MEM_REG);
    assert_int_equal(fake_rec(f, before + 1).region.guest_phys_addr, WIN_GPA + 4 * MiB);
    assert_int_equal(fake_rec(f, before + 2).req, VFE_VU_SET_VRING_NUM);
    assert_no_refusal(f);
    vfe_dev_get_region_stats(d, &rs);
    assert_int_equal(rs.regions, nram);
    assert_int_equal(rs.adds, nram + 2);
    assert_int_equal(rs.removes, 2);
    assert_int_equal(rs.errors, 0);
    assert_int_equal(rs.overflows, 0);
    assert_need_reply_like_qemu(f);
    vfe_dev_close(d);
    vfe_dax_free(x);
    close(fd);
    fake_free(f);
}

/* QEMU 11.1 aborts past 512 regions: vfe counts the region that would have
 * been the 513th as an overflow and sends nothing for it. */
static void test_region_overflow(void **state)
{
    (void)state;
    struct fake *f = fake_new(RUST_FEATURES, RUST_PROTOCOL, RUST_QUEUES);
    struct vfe_dev_config cfg = {
        .protocol_features = (1ull << VFE_VU_PF_MQ) | (1ull << VFE_VU_PF_REPLY_ACK) |
                             (1ull << VFE_VU_PF_CONFIGURE_MEM_SLOTS),
    };
    struct vfe_dev *d = connect_fake(f, &cfg);
    unsigned nram = vfe_mem_nregions(vfe_dev_mem(d));
    int fd = vfe_mem_fd(vfe_dev_mem(d));
    /* Before the start: kept for it (the guest RAM counts). */
    for (unsigned i = nram; i < VFE_VU_QEMU_MAX_SLOTS; i++) {
        struct vfe_vu_region r = { .guest_phys_addr = WIN_GPA + i * 4096ull, .memory_size = 4096,
                                   .userspace_addr = 0x500000000000ull + i * 4096ull };
        assert_int_equal(vfe_dev_add_region(d, &r, fd), 0);
    }
    struct vfe_vu_region last = { .guest_phys_addr = WIN_GPA - 4096, .memory_size = 4096,
                                  .userspace_addr = 0x4f0000000000ull };
    assert_int_equal(vfe_dev_add_region(d, &last, fd), -ENOSPC);
    struct vfe_dev_region_stats rs;
    vfe_dev_get_region_stats(d, &rs);
    assert_int_equal(rs.regions, VFE_VU_QEMU_MAX_SLOTS);
    assert_int_equal(rs.overflows, 1);
    assert_int_equal(rs.adds, 0);
    assert_int_equal(vfe_dev_remove_region(d, &last), -ENOENT);
    vfe_dev_close(d);
    fake_free(f);
}

/* ---- Against a real backend (--backend) ---------------------------------------- */

static char *make_share(void)
{
    char *dir = g_dir_make_tmp("vfe-wire-share-XXXXXX", NULL);
    assert_non_null(dir);
    chmod(dir, 0755);
    g_autofree char *p = g_build_filename(dir, "hello.txt", NULL);
    assert_true(g_file_set_contents(p, "hello\n", 6, NULL));
    return dir;
}

static struct vfe_dev *connect_backend(const char *dir)
{
    struct vfe_dev_config cfg = {
        .conn = { .backend_cmd = opt_backend, .dir = dir, .backend_log = opt_log,
                  .timeout_ms = 30000 },
        .request_queues = 1,
    };
    struct vfe_dev *d = NULL;
    int r = vfe_dev_connect(&cfg, &d);
    if (r < 0)
        fail_msg("connect to '%s': %s", opt_backend, strerror(-r));
    return d;
}

/* The message as vfe used to send it: the backend refuses it and ends the
 * session (the Rust daemon: "HandleRequest(InvalidMessage)"). */
static void test_peer_refuses_fixed_size_table(void **state)
{
    (void)state;
    g_autofree char *dir = make_share();
    struct vfe_dev *d = connect_backend(dir);
    struct vfe_conn *c = vfe_dev_conn(d);
    uint64_t feat = vfe_dev_offered_features(d) &
                    ((1ull << VFE_F_VERSION_1) | (1ull << VFE_F_PROTOCOL_FEATURES));
    assert_int_equal(vfe_conn_set_u64(c, VFE_VU_SET_FEATURES, feat), 0);
    struct vfe_mem *mem = vfe_dev_mem(d);
    unsigned n = vfe_mem_nregions(mem);
    struct vfe_vu_region regs[VFE_VU_MAX_REGIONS];
    int fds[VFE_VU_MAX_REGIONS];
    for (unsigned i = 0; i < n; i++) {
        vfe_mem_region(mem, i, &regs[i]);
        fds[i] = vfe_mem_fd(mem);
    }
    struct vfe_msg m;
    vfe_msg_init(&m, VFE_VU_SET_MEM_TABLE, 0);
    assert_int_equal(vfe_msg_set_mem(&m, regs, n), 0);
    m.size = sizeof(struct vfe_vu_mem);
    int r = vfe_conn_call(c, &m, fds, n, NULL);
    assert_true(r == -EIO || r == -ECONNRESET);
    assert_true(vfe_conn_wait_closed(c, 10000));
    int status = 0;
    for (int i = 0; i < 1000 && !vfe_conn_backend_exited(c, &status); i++)
        usleep(10000);
    assert_true(vfe_conn_backend_exited(c, &status));
    print_message("backend refused the 264-byte SET_MEM_TABLE and exited (status 0x%x)\n",
                  status);
    vfe_dev_close(d);
    it_rm_tree(dir);
}

/* vfe's sequence now: start, INIT, stop and start again (a paused VM), then a
 * driver reset and a fresh start with INIT, and the backend exits 0 by itself
 * when the frontend hangs up. */
static void test_peer_accepts_sequence(void **state)
{
    (void)state;
    g_autofree char *dir = make_share();
    struct vfe_dev *d = connect_backend(dir);
    for (int boot = 0; boot < 2; boot++) {
        assert_int_equal(vfe_dev_start(d), 0);
        struct vfe_fuse_config fc = { .depth = 4, .timeout_ms = 20000 };
        struct vfe_fuse *f = NULL;
        assert_int_equal(vfe_fuse_new(d, &fc, &f), 0);
        struct vfe_fuse_init_result init;
        assert_int_equal(vfe_fuse_init(f, &init), 0);
        struct fuse_entry_out e;
        assert_int_equal(vfe_fuse_lookup(f, FUSE_ROOT_ID, "hello.txt", &e), 0);
        assert_int_equal(e.attr.size, 6);
        assert_int_equal(vfe_dev_stop(d), 0);
        assert_int_equal(vfe_dev_start(d), 0);
        assert_int_equal(vfe_fuse_lookup(f, FUSE_ROOT_ID, "hello.txt", &e), 0);
        vfe_fuse_free(f);
        if (boot == 0)
            assert_int_equal(vfe_dev_reset(d), 0);
    }
    int status = -1;
    bool own = false;
    assert_int_equal(vfe_dev_close_status(d, &status, &own), 0);
    if (!own || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("backend did not exit 0 by itself: %s, status 0x%x",
                 own ? "exited" : "had to be killed", status);
    it_rm_tree(dir);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "backend", required_argument, NULL, 'b' },
        { "backend-log", required_argument, NULL, 'l' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            opt_backend = optarg;
            break;
        case 'l':
            opt_log = optarg;
            break;
        default:
            fprintf(stderr, "usage: %s [--backend CMD [--backend-log F]]\n", argv[0]);
            return 2;
        }
    }
    if (opt_backend) {
        const struct CMUnitTest peer[] = {
            cmocka_unit_test(test_peer_refuses_fixed_size_table),
            cmocka_unit_test(test_peer_accepts_sequence),
        };
        return cmocka_run_group_tests(peer, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fake_refuses_fixed_size_table),
        cmocka_unit_test(test_start_like_qemu),
        cmocka_unit_test(test_stop_and_reset_like_qemu),
        cmocka_unit_test(test_reset_without_reset_device),
        cmocka_unit_test(test_no_protocol_features),
        cmocka_unit_test(test_queues_and_regions),
        cmocka_unit_test(test_regions_like_qemu),
        cmocka_unit_test(test_region_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
