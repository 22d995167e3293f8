/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Daemon logging (prefix vlog_). One line per notable event; per-request detail
 * only at debug level. Output goes to stderr, or to syslog with --syslog.
 *
 * Thread safe: each call formats into a local buffer and writes it with one
 * write(2) (or one syslog(3) call), so lines from several threads never mix.
 */
#ifndef VUFSD_LOG_H
#define VUFSD_LOG_H

#include <stdbool.h>

#include "config.h"

void vlog_init(enum vufsd_log_level level, bool use_syslog);
bool vlog_enabled(enum vufsd_log_level level);
void vlog(enum vufsd_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One line "label text" of any length, at every log level (what an operator asked
 * for explicitly, e.g. the statistics on SIGUSR1), labelled info. One writev(2). */
void vlog_text(const char *label, const char *text);

#define vlog_err(...)  vlog(VUFSD_LOG_ERROR, __VA_ARGS__)
#define vlog_warn(...) vlog(VUFSD_LOG_WARN, __VA_ARGS__)
#define vlog_info(...) vlog(VUFSD_LOG_INFO, __VA_ARGS__)
#define vlog_debug(...)                                                                            \
    do {                                                                                           \
        if (vlog_enabled(VUFSD_LOG_DEBUG))                                                         \
            vlog(VUFSD_LOG_DEBUG, __VA_ARGS__);                                                    \
    } while (0)

#endif
