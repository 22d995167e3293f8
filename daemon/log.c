/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* Written once by vlog_init() before any thread starts; read-only afterwards. */
static enum vufsd_log_level vlog_level = VUFSD_LOG_INFO;
static bool vlog_syslog;

static const char *const vlog_names[] = {
    [VUFSD_LOG_ERROR] = "error",
    [VUFSD_LOG_WARN] = "warn",
    [VUFSD_LOG_INFO] = "info",
    [VUFSD_LOG_DEBUG] = "debug",
};

static const int vlog_prio[] = {
    [VUFSD_LOG_ERROR] = LOG_ERR,
    [VUFSD_LOG_WARN] = LOG_WARNING,
    [VUFSD_LOG_INFO] = LOG_INFO,
    [VUFSD_LOG_DEBUG] = LOG_DEBUG,
};

void vlog_init(enum vufsd_log_level level, bool use_syslog)
{
    vlog_level = level;
    vlog_syslog = use_syslog;
    /*
     * LOG_NDELAY: connect to /dev/log now, before the sandbox; after pivot_root or
     * chroot /dev/log is out of reach, and a lazy connect on the first message
     * (which may come after the sandbox, with --log-level warn) would fail.
     */
    if (use_syslog)
        openlog("vufsd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

bool vlog_enabled(enum vufsd_log_level level)
{
    return level <= vlog_level;
}

/* "HH:MM:SS.mmm vufsd[PID] LEVEL: " into buf; its length (0 on error). */
static int vlog_prefix(char *buf, size_t size, enum vufsd_log_level level)
{
    struct timespec ts;
    struct tm tm;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(buf, size, "%02d:%02d:%02d.%03ld vufsd[%d] %s: ", tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, (int)getpid(), vlog_names[level]);
    return n < 0 || (size_t)n >= size ? 0 : n;
}

void vlog_text(const char *label, const char *text)
{
    if (vlog_syslog) {
        syslog(LOG_INFO, "%s%s", label, text);
        return;
    }
    char prefix[96], nl[] = "\n";
    struct iovec iov[4] = {
        {.iov_base = prefix, .iov_len = (size_t)vlog_prefix(prefix, sizeof(prefix), VUFSD_LOG_INFO)},
        {.iov_base = (void *)label, .iov_len = strlen(label)},
        {.iov_base = (void *)text, .iov_len = strlen(text)},
        {.iov_base = nl, .iov_len = 1},
    };
    ssize_t w = writev(STDERR_FILENO, iov, 4);
    (void)w;
}

void vlog(enum vufsd_log_level level, const char *fmt, ...)
{
    char line[1024];
    int n = 0;
    va_list ap;

    if (!vlog_enabled(level) || (unsigned)level >= sizeof(vlog_names) / sizeof(vlog_names[0]))
        return;

    if (!vlog_syslog)
        n = vlog_prefix(line, sizeof(line), level);
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof(line) - 2)
        len = sizeof(line) - 2;

    if (vlog_syslog) {
        line[len] = '\0';
        syslog(vlog_prio[level], "%s", line);
        return;
    }
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}
