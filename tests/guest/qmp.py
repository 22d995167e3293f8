#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""qmp.py SOCKET COMMAND [JSON-ARGUMENTS]
qmp.py SOCKET --wait-migration SECONDS

Talks to a QEMU monitor (QMP) on a UNIX socket, as the migration test drives
two QEMUs. The first form runs one command and prints its "return" value as
JSON (exit 0), or its error (exit 1). The second polls query-migrate every
0.2 s until the migration completes (prints the final query-migrate answer,
exit 0), fails or is cancelled (prints it, exit 1), or SECONDS pass (exit 1).
"""
import json
import socket
import sys
import time


class Qmp:
    def __init__(self, path, timeout=30.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""
        greeting = self._read()
        if "QMP" not in greeting:
            raise RuntimeError("no QMP greeting: %r" % greeting)
        self.command("qmp_capabilities")

    def _read(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("QMP socket closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def command(self, name, args=None):
        msg = {"execute": name}
        if args:
            msg["arguments"] = args
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            answer = self._read()
            if "event" in answer:
                continue  # asynchronous events are not answers
            if "error" in answer:
                raise RuntimeError("%s: %s" % (name, answer["error"].get("desc", answer)))
            return answer.get("return")


def main():
    if len(sys.argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    path = sys.argv[1]
    try:
        qmp = Qmp(path)
        if sys.argv[2] == "--wait-migration":
            deadline = time.monotonic() + float(sys.argv[3])
            while True:
                info = qmp.command("query-migrate")
                status = info.get("status")
                if status in ("completed", "failed", "cancelled"):
                    print(json.dumps(info))
                    return 0 if status == "completed" else 1
                if time.monotonic() > deadline:
                    print(json.dumps(info))
                    sys.stderr.write("qmp: migration still %s after %s s\n" % (status, sys.argv[3]))
                    return 1
                time.sleep(0.2)
        args = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
        print(json.dumps(qmp.command(sys.argv[2], args)))
        return 0
    except (OSError, RuntimeError, ValueError) as e:
        sys.stderr.write("qmp: %s\n" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
