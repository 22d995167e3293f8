#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""listen-fd.py SOCKET FD CMD [ARG...]

Start a vhost-user backend the way libvirt, Kata and systemd socket activation
do: the caller creates the listening UNIX socket at SOCKET, hands it to the
backend as file descriptor FD (for `--fd=FD`) and the frontend connects to the
path. The backend never sees the path. Execs CMD, so CMD keeps this pid.
"""
import os
import socket
import sys


def main():
    if len(sys.argv) < 4:
        sys.stderr.write(__doc__)
        return 2
    path, fd, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    if fd < 3:
        sys.stderr.write("listen-fd: FD must be 3 or more\n")
        return 2
    if os.path.lexists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(16)
    if s.fileno() == fd:
        os.set_inheritable(fd, True)
    else:
        os.dup2(s.fileno(), fd, inheritable=True)
        s.close()
    os.execvp(cmd[0], cmd)
    return 127


if __name__ == "__main__":
    sys.exit(main())
