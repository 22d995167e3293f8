/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The vhost-user message loop (prefix vu_): reads messages from the frontend,
 * validates them with vu_msg_check(), runs one handler per request from a
 * dispatch table and sends replies (own replies for GET_*, REPLY_ACK otherwise).
 */
#ifndef VUFSD_VHOST_USER_H
#define VUFSD_VHOST_USER_H

#include "device.h"

/*
 * Serves one connected frontend on conn_fd until it disconnects (returns 0),
 * stop_fd becomes readable (returns 1), or the byte stream is corrupt beyond
 * resynchronisation (returns -EBADMSG). Does not close conn_fd. A second
 * frontend connecting to listen_fd (-1: none) meanwhile is accepted and closed
 * at once: one frontend at a time.
 */
int vu_serve(struct vufsd_dev *dev, int conn_fd, int stop_fd, int listen_fd);

/* The virtio and protocol features vufsd offers. VHOST_USER_PROTOCOL_F_SHMEM
 * (bit 22) only with a DAX window (--dax-window) over the mainline protocol. */
uint64_t vu_offered_features(void);
uint64_t vu_offered_protocol_features(const struct vufsd_config *cfg);

#endif
