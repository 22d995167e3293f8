/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The confinement the fuzz targets that run the real passthrough share: the
 * process in its own mount namespace where every host mount is read-only
 * (only libFuzzer's output directories and the scratch tmpfs are writable),
 * a fresh scratch tmpfs with bait per input, and the escape oracle: every
 * inode the passthrough holds must be on the scratch tmpfs. Needs root.
 */
#ifndef FUZZ_SCRATCH_H
#define FUZZ_SCRATCH_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/mount.h>

#include "pt_fs_i.h"
#include "pt_inode_i.h"
#include "pt_slots_i.h"

static char fz_share[64];
static dev_t fz_share_dev;
static const char *fz_name = "fuzz";

static void fz_die(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", fz_name, what, strerror(errno));
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

/* LLVMFuzzerInitialize's work: the read-only host, the scratch mount point. */
static void fz_confine(const char *name, const char *scratch, int *argc, char ***argv)
{
    fz_name = name;
    if (geteuid() != 0) {
        fprintf(stderr, "%s: needs root (mount namespace, credential switching)\n", name);
        exit(77); /* meson: SKIP (the replay test runs with -error_exitcode=1) */
    }
    /* One fixed, empty mount point: each fuzzer mounts its tmpfs on it in its own
     * mount namespace, so parallel runs do not meet and nothing is left behind. */
    snprintf(fz_share, sizeof(fz_share), "%s", scratch);
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
    char probe_path[96];
    snprintf(probe_path, sizeof(probe_path), "%s-probe", scratch);
    int probe = open(probe_path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (probe >= 0 || errno != EROFS) {
        fprintf(stderr, "%s: /tmp is still writable; refusing to fuzz the host\n", name);
        exit(1);
    }
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
            fprintf(stderr, "%s: inode %u (ino %llu) is outside the share\n", fz_name, idx,
                    (unsigned long long)i->ino);
            abort();
        }
    }
    pthread_mutex_unlock(&t->lock);
}

#endif
