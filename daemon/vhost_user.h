/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The vhost-user message loop (prefix vu_): reads messages from the frontend,
 * validates them with vu_msg_check(), runs one handler per request from a
 * dispatch table and sends replies (own replies for GET_*, REPLY_ACK otherwise).
 */
#ifndef VUFSD_VHOST_USER_H
#define VUFSD_VHOST_USER_H

#include "device.h"

/* What besides the frontend's messages ends vu_serve (each -1: not watched). */
struct vu_wake {
    int stop_fd;    /* readable: SIGTERM/SIGINT */
    int listen_fd;  /* a second frontend connecting is refused */
    int restart_fd; /* readable: a restart was asked for (SIGHUP) */
    int save_fd;    /* readable: a saved state was asked for (SIGUSR2) */
};

enum {
    VU_SERVE_GONE = 0,    /* the frontend disconnected */
    VU_SERVE_STOP = 1,    /* stop_fd */
    VU_SERVE_RESTART = 2, /* restart_fd (drained) */
    VU_SERVE_SAVE = 3,    /* save_fd (drained); call vu_serve again to go on */
};

/*
 * Serves one connected frontend on conn_fd, between whole messages, until one
 * of the VU_SERVE_* events, or the byte stream is corrupt beyond
 * resynchronisation (returns -EBADMSG). Does not close conn_fd. A second
 * frontend connecting to w->listen_fd meanwhile is accepted and closed at
 * once: one frontend at a time.
 */
int vu_serve(struct vufsd_dev *dev, int conn_fd, const struct vu_wake *w);

#endif
