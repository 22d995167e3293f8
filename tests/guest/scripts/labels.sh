#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Guest script: new inodes on the virtio-fs mount ($1) while the guest runs
# SELinux (booted with security=selinux, no policy loaded: every new inode gets
# the "unlabeled" context). The guest sends that context with each CREATE,
# MKDIR, SYMLINK and MKNOD; tests/guest/creds-host.sh finds it on the host.
MNT=$1
grep -q selinux /sys/kernel/security/lsm 2>/dev/null ||
    { mount -t securityfs none /sys/kernel/security 2>/dev/null; grep -q selinux /sys/kernel/security/lsm; } ||
    { echo "labels: SELinux is not active in the guest"; exit 1; }
D=$MNT/labels
mkdir "$D" && echo x > "$D/f" && mkdir "$D/d" && ln -s f "$D/l" && mknod "$D/p" p || exit 1
ls -l "$D"
