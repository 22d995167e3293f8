/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Real locks: POSIX (OFD) locks per lock owner, flock per open, and SETLKW that
 * parks the request (FLL_ASYNC) and completes it through fll_reply_err().
 * Waiting is always for an event the test causes (an unlock, a release, an
 * INTERRUPT), never for a time.
 */
#include <sys/file.h>

#include "pt_test.h"

#define OFFSET_MAX 0x7fffffffffffffffull

struct lk {
    struct pt_t *t;
    uint64_t node;
    uint64_t fh;
};

static int setlk(struct lk *l, struct pt_t_req *q, uint64_t owner, uint32_t type, uint64_t start,
                 uint64_t end, bool sleep, bool is_flock)
{
    struct fuse_lk_in in = { .fh = l->fh, .owner = owner,
                             .lk = { .start = start, .end = end, .type = type,
                                     .pid = (uint32_t)(owner + 100) },
                             .lk_flags = is_flock ? FUSE_LK_FLOCK : 0 };
    return l->t->ops->setlk(&q->r, l->node, &in, sleep);
}

static int setlk_now(struct lk *l, uint64_t owner, uint32_t type, bool is_flock)
{
    PT_REQ(l->t, q);
    return setlk(l, &q, owner, type, 0, OFFSET_MAX, false, is_flock);
}

static struct pt_t *setup(struct lk *a, struct lk *b)
{
    struct pt_t *t = pt_t_up();

    pt_t_write_file(t, "f", "0123456789");
    a->t = b->t = t;
    a->node = b->node = pt_t_lookup(t, FUSE_ROOT_ID, "f");
    a->fh = pt_t_open(t, a->node, O_RDWR);
    b->fh = pt_t_open(t, b->node, O_RDWR);
    return t;
}

static void test_two_owners_conflict(void **state)
{
    struct lk a, b;
    struct pt_t *t = setup(&a, &b);
    PT_REQ(t, q);

    /* Same handle, two owners (two client processes sharing an open file). */
    assert_int_equal(setlk_now(&a, 1, F_WRLCK, false), 0);
    assert_int_equal(setlk_now(&a, 2, F_WRLCK, false), -EAGAIN);
    assert_int_equal(setlk_now(&a, 2, F_RDLCK, false), -EAGAIN);
    /* The owner itself may change its lock. */
    assert_int_equal(setlk_now(&a, 1, F_RDLCK, false), 0);
    assert_int_equal(setlk_now(&a, 2, F_RDLCK, false), 0);

    struct fuse_lk_in gi = { .fh = a.fh, .owner = 3,
                             .lk = { .start = 0, .end = OFFSET_MAX, .type = F_WRLCK } };
    struct fuse_lk_out go;
    assert_int_equal(t->ops->getlk(&q.r, a.node, &gi, &go), 0);
    assert_int_equal(go.lk.type, F_RDLCK);
    assert_int_equal(go.lk.end, OFFSET_MAX);
    /* Two identical read locks: either holder, never 0 (nobody). */
    assert_true(go.lk.pid == 101 || go.lk.pid == 102);
    /* A third owner with a lock elsewhere is never named for this one. */
    PT_REQ(t, q3);
    assert_int_equal(setlk(&a, &q3, 4, F_RDLCK, 50, 60, false, false), 0);
    gi.lk.end = 20;
    assert_int_equal(t->ops->getlk(&q.r, a.node, &gi, &go), 0);
    assert_true(go.lk.pid == 101 || go.lk.pid == 102);
    gi.lk.end = OFFSET_MAX;
    /* Three identical holders, the asking owner among them: another one. */
    struct fuse_lk_in gi2 = gi;
    gi2.owner = 4;
    assert_int_equal(setlk(&a, &q3, 4, F_RDLCK, 0, OFFSET_MAX, false, false), 0);
    assert_int_equal(t->ops->getlk(&q.r, a.node, &gi2, &go), 0);
    assert_int_equal(go.lk.type, F_RDLCK);
    assert_true(go.lk.pid == 101 || go.lk.pid == 102);
    assert_int_equal(setlk(&a, &q3, 4, F_UNLCK, 0, OFFSET_MAX, false, false), 0);
    /* Identical bounded ranges too. */
    assert_int_equal(setlk(&a, &q3, 5, F_RDLCK, 70, 79, false, false), 0);
    assert_int_equal(setlk(&a, &q3, 6, F_RDLCK, 70, 79, false, false), 0);
    gi.lk.start = 75;
    assert_int_equal(t->ops->getlk(&q.r, a.node, &gi, &go), 0);
    assert_int_equal(go.lk.start, 0); /* owners 1 and 2 still hold [0, EOF) */
    assert_int_equal(setlk_now(&a, 1, F_UNLCK, false), 0);
    assert_int_equal(setlk_now(&a, 2, F_UNLCK, false), 0);
    assert_int_equal(t->ops->getlk(&q.r, a.node, &gi, &go), 0);
    assert_int_equal(go.lk.start, 70);
    assert_int_equal(go.lk.end, 79);
    assert_true(go.lk.pid == 105 || go.lk.pid == 106);
    assert_int_equal(setlk(&a, &q3, 5, F_UNLCK, 0, OFFSET_MAX, false, false), 0);
    assert_int_equal(setlk(&a, &q3, 6, F_UNLCK, 0, OFFSET_MAX, false, false), 0);
    gi.lk.start = 0;
    assert_int_equal(setlk_now(&a, 1, F_RDLCK, false), 0);
    assert_int_equal(setlk_now(&a, 2, F_RDLCK, false), 0);
    /* One holder: its pid exactly (F_GETLK's l_pid). */
    assert_int_equal(setlk_now(&a, 2, F_UNLCK, false), 0);
    assert_int_equal(t->ops->getlk(&q.r, a.node, &gi, &go), 0);
    assert_int_equal(go.lk.pid, 101);
    assert_int_equal(setlk_now(&a, 2, F_RDLCK, false), 0);
    assert_int_equal(setlk_now(&a, 1, F_UNLCK, false), 0);
    assert_int_equal(setlk_now(&a, 2, F_UNLCK, false), 0);
    assert_int_equal(t->ops->getlk(&q.r, a.node, &gi, &go), 0);
    assert_int_equal(go.lk.type, F_UNLCK);

    /* Ranges: disjoint locks of two owners coexist. */
    PT_REQ(t, q2);
    assert_int_equal(setlk(&a, &q2, 1, F_WRLCK, 0, 4, false, false), 0);
    assert_int_equal(setlk(&a, &q2, 2, F_WRLCK, 5, 9, false, false), 0);
    assert_int_equal(setlk(&a, &q2, 2, F_WRLCK, 4, 4, false, false), -EAGAIN);
    /* Bad input. */
    assert_int_equal(setlk(&a, &q2, 2, 77, 0, 1, false, false), -EINVAL);
    assert_int_equal(setlk(&a, &q2, 2, F_WRLCK, 9, 1, false, false), -EINVAL);
    assert_int_equal(setlk(&a, &q2, 2, F_WRLCK, 1ull << 63, OFFSET_MAX, false, false), -EINVAL);

    /* FLUSH with the owner drops that owner's locks. */
    struct fuse_flush_in fl = { .fh = a.fh, .lock_owner = 1 };
    assert_int_equal(t->ops->flush(&q.r, a.node, &fl), 0);
    assert_int_equal(setlk(&a, &q2, 2, F_WRLCK, 4, 4, false, false), 0);
    pt_t_down(t);
}

static void test_owner_spans_opens(void **state)
{
    struct lk a, b;
    struct pt_t *t = setup(&a, &b);
    PT_REQ(t, q);

    /* One client process (owner 1) locking through two opens: no conflict with itself. */
    assert_int_equal(setlk_now(&a, 1, F_WRLCK, false), 0);
    assert_int_equal(setlk_now(&b, 1, F_WRLCK, false), 0);
    assert_int_equal(setlk_now(&b, 2, F_RDLCK, false), -EAGAIN);
    /* Its close() of either open (FLUSH) drops all its locks on the file. */
    struct fuse_flush_in fl = { .fh = b.fh, .lock_owner = 1 };
    assert_int_equal(t->ops->flush(&q.r, b.node, &fl), 0);
    assert_int_equal(setlk_now(&a, 2, F_WRLCK, false), 0);
    /* Releasing every open drops the remaining owners' locks. */
    assert_int_equal(pt_t_release(t, a.node, a.fh), 0);
    assert_int_equal(pt_t_release(t, b.node, b.fh), 0);
    assert_int_equal(pt_t_fds_in_use(t->fs), pt_t_fds_for(t, 2)); /* root + the known inode */
    uint64_t c = pt_t_open(t, a.node, O_RDONLY);
    struct lk lc = { .t = t, .node = a.node, .fh = c };
    assert_int_equal(setlk_now(&lc, 3, F_RDLCK, false), 0);
    /* The open's mode decides which locks it may take. */
    assert_int_equal(setlk_now(&lc, 3, F_WRLCK, false), -EBADF);
    pt_t_down(t);
}

static void test_setlkw_completes_after_unlock(void **state)
{
    struct lk a, b;
    struct pt_t *t = setup(&a, &b);
    struct pt_t_req w;

    assert_int_equal(setlk_now(&a, 1, F_WRLCK, false), 0);
    pt_t_req_init(t, &w, 0, 0);
    assert_int_equal(setlk(&b, &w, 2, F_WRLCK, 0, OFFSET_MAX, true, false), FLL_ASYNC);
    /* Owner 1 still holds the lock: the waiter cannot have been answered. */
    assert_false(pt_t_is_done(&w));
    assert_int_equal(setlk_now(&a, 1, F_UNLCK, false), 0);
    assert_int_equal(pt_t_wait(&w), 0);
    /* Owner 2 holds it now, and GETLK names its pid. */
    assert_int_equal(setlk_now(&a, 1, F_WRLCK, false), -EAGAIN);
    {
        PT_REQ(t, q);
        struct fuse_lk_in gi = { .fh = a.fh, .owner = 1,
                                 .lk = { .start = 0, .end = OFFSET_MAX, .type = F_RDLCK } };
        struct fuse_lk_out go;
        assert_int_equal(t->ops->getlk(&q.r, a.node, &gi, &go), 0);
        assert_int_equal(go.lk.type, F_WRLCK);
        assert_int_equal(go.lk.pid, 102);
    }
    pt_t_down(t);
}

static void test_setlkw_completes_after_close_of_holder(void **state)
{
    struct lk a, b;
    struct pt_t *t = setup(&a, &b);
    struct pt_t_req w;

    assert_int_equal(setlk_now(&a, 1, F_WRLCK, false), 0);
    pt_t_req_init(t, &w, 0, 0);
    assert_int_equal(setlk(&b, &w, 2, F_WRLCK, 0, OFFSET_MAX, true, false), FLL_ASYNC);
    assert_false(pt_t_is_done(&w));
    /* The holder's close() in the client: FLUSH with its owner, then RELEASE. */
    {
        PT_REQ(t, q);
        struct fuse_flush_in fl = { .fh = a.fh, .lock_owner = 1 };
        assert_int_equal(t->ops->flush(&q.r, a.node, &fl), 0);
    }
    assert_int_equal(pt_t_release(t, a.node, a.fh), 0);
    assert_int_equal(pt_t_wait(&w), 0);
    pt_t_down(t);
}

static void test_setlkw_ends_when_its_handle_is_released(void **state)
{
    struct lk a, b;
    struct pt_t *t = setup(&a, &b);
    struct pt_t_req w;

    assert_int_equal(setlk_now(&a, 1, F_WRLCK, false), 0);
    pt_t_req_init(t, &w, 0, 0);
    assert_int_equal(setlk(&b, &w, 2, F_WRLCK, 0, OFFSET_MAX, true, false), FLL_ASYNC);
    assert_int_equal(pt_t_release(t, b.node, b.fh), 0);
    assert_int_equal(pt_t_wait(&w), -EBADF);
    assert_int_equal(setlk_now(&a, 1, F_UNLCK, false), 0);
    pt_t_down(t);
}

static void test_setlkw_interrupted(void **state)
{
    struct lk a, b;
    struct pt_t *t = setup(&a, &b);
    struct pt_t_req w;

    assert_int_equal(setlk_now(&a, 1, F_WRLCK, false), 0);
    pt_t_req_init(t, &w, 0, 0);
    assert_int_equal(setlk(&b, &w, 2, F_WRLCK, 0, OFFSET_MAX, true, false), FLL_ASYNC);
    {
        PT_REQ(t, q);
        /* Another request's INTERRUPT leaves the waiter alone. */
        assert_int_equal(t->ops->interrupt(&q.r, w.r.hdr.unique + 1000), 0);
        assert_int_equal(setlk_now(&b, 4, F_WRLCK, false), -EAGAIN);
        assert_false(pt_t_is_done(&w));
        assert_int_equal(t->ops->interrupt(&q.r, w.r.hdr.unique), 0);
    }
    assert_int_equal(pt_t_wait(&w), -EINTR);
    /* The interrupted request took nothing. */
    assert_int_equal(setlk_now(&b, 3, F_WRLCK, false), -EAGAIN);
    pt_t_down(t);
}

static void test_setlkw_cancelled_by_reset(void **state)
{
    struct lk a, b;
    struct pt_t *t = setup(&a, &b);
    struct pt_t_req w1, w2;

    assert_int_equal(setlk_now(&a, 1, F_WRLCK, false), 0);
    pt_t_req_init(t, &w1, 0, 0);
    pt_t_req_init(t, &w2, 0, 0);
    assert_int_equal(setlk(&b, &w1, 2, F_WRLCK, 0, OFFSET_MAX, true, false), FLL_ASYNC);
    assert_int_equal(setlk(&b, &w2, 3, F_RDLCK, 0, OFFSET_MAX, true, false), FLL_ASYNC);
    pt_fs_reset(t->fs);
    assert_int_equal(pt_t_wait(&w1), -EINTR);
    assert_int_equal(pt_t_wait(&w2), -EINTR);
    assert_int_equal(pt_t_fds_in_use(t->fs), pt_t_fds_for(t, 1));
    pt_t_down(t);
}

static void test_cancel_waits(void **state)
{
    struct lk a, b;
    struct pt_t *t = setup(&a, &b);
    struct pt_t_req w;

    assert_int_equal(setlk_now(&a, 1, F_WRLCK, false), 0);
    pt_t_req_init(t, &w, 0, 0);
    assert_int_equal(setlk(&b, &w, 2, F_WRLCK, 0, OFFSET_MAX, true, false), FLL_ASYNC);
    pt_fs_cancel_waits(t->fs);
    assert_int_equal(pt_t_wait(&w), -EINTR);
    /* Nothing else changed: the holder still holds, the handles still work. */
    assert_int_equal(setlk_now(&b, 2, F_WRLCK, false), -EAGAIN);
    assert_int_equal(setlk_now(&a, 1, F_UNLCK, false), 0);
    assert_int_equal(setlk_now(&b, 2, F_WRLCK, false), 0);
    pt_t_down(t);
}

static void test_flock(void **state)
{
    struct lk a, b;
    struct pt_t *t = setup(&a, &b);
    struct pt_t_req w;

    /* flock belongs to the open: two handles conflict, whatever the owner. */
    assert_int_equal(setlk_now(&a, 1, F_WRLCK, true), 0);
    assert_int_equal(setlk_now(&b, 1, F_WRLCK, true), -EAGAIN);
    assert_int_equal(setlk_now(&b, 1, F_RDLCK, true), -EAGAIN);
    pt_t_req_init(t, &w, 0, 0);
    assert_int_equal(setlk(&b, &w, 1, F_WRLCK, 0, OFFSET_MAX, true, true), FLL_ASYNC);
    assert_false(pt_t_is_done(&w));
    /* RELEASE with FUSE_RELEASE_FLOCK_UNLOCK. */
    {
        PT_REQ(t, q);
        struct fuse_release_in ri = { .fh = a.fh, .release_flags = FUSE_RELEASE_FLOCK_UNLOCK };
        assert_int_equal(t->ops->release(&q.r, a.node, &ri), 0);
    }
    assert_int_equal(pt_t_wait(&w), 0);
    uint64_t c = pt_t_open(t, a.node, O_RDONLY);
    struct lk lc = { .t = t, .node = a.node, .fh = c };
    assert_int_equal(setlk_now(&lc, 9, F_RDLCK, true), -EAGAIN);
    assert_int_equal(setlk_now(&b, 1, F_UNLCK, true), 0);
    assert_int_equal(setlk_now(&lc, 9, F_RDLCK, true), 0);
    pt_t_down(t);
}

/* A holder on the host (not a client): the waiter retries until it unlocks. */
static void test_setlkw_host_holder(void **state)
{
    struct lk a, b;
    struct pt_t *t = setup(&a, &b);
    struct pt_t_req w;
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
    int hfd = open(pt_t_path(t, "f"), O_RDWR);

    assert_true(hfd >= 0);
    assert_int_equal(fcntl(hfd, F_OFD_SETLK, &fl), 0);
    pt_t_req_init(t, &w, 0, 0);
    assert_int_equal(setlk(&a, &w, 1, F_RDLCK, 0, OFFSET_MAX, true, false), FLL_ASYNC);
    assert_false(pt_t_is_done(&w));
    fl.l_type = F_UNLCK;
    assert_int_equal(fcntl(hfd, F_OFD_SETLK, &fl), 0);
    assert_int_equal(pt_t_wait(&w), 0);
    /* The client's read lock is real on the host. */
    fl.l_type = F_WRLCK;
    assert_int_equal(fcntl(hfd, F_OFD_SETLK, &fl), -1);
    assert_true(errno == EAGAIN || errno == EACCES);
    close(hfd);
    pt_t_down(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_owners_conflict),
        cmocka_unit_test(test_owner_spans_opens),
        cmocka_unit_test(test_setlkw_completes_after_unlock),
        cmocka_unit_test(test_setlkw_completes_after_close_of_holder),
        cmocka_unit_test(test_setlkw_ends_when_its_handle_is_released),
        cmocka_unit_test(test_setlkw_interrupted),
        cmocka_unit_test(test_setlkw_cancelled_by_reset),
        cmocka_unit_test(test_cancel_waits),
        cmocka_unit_test(test_flock),
        cmocka_unit_test(test_setlkw_host_holder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
