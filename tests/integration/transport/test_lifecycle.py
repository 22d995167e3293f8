#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Process lifecycle: the pid file refuses a second daemon on the same socket,
stale sockets are replaced, SIGTERM/SIGINT end the daemon with status 0 (idle or
with a frontend connected), and the command line fails loudly on bad input."""
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from vutest import Daemon, VUFSD, UNSANDBOXED, check, fail


def test_pidfile():
    d1 = Daemon()
    d1.wait_listening()
    with open(d1.sock + ".pid") as f:
        check(f.read().strip() == str(d1.proc.pid), "pid file does not hold the daemon's pid")
    d2 = Daemon(workdir=d1.dir, sock=d1.sock)
    rc = d2.wait_exit(30)
    check(rc == 1, "second daemon on the same socket exited %d:\n%s" % (rc, d2.text()))
    check("already serves" in d2.text(), "refusal not explained:\n" + d2.text())
    # The refused daemon must not have removed the first one's socket or pid file.
    check(os.path.exists(d1.sock) and os.path.exists(d1.sock + ".pid"),
          "refused daemon removed the live daemon's files")
    c = d1.connect()
    feats, _ = c.handshake()
    check(feats & (1 << 32), "VERSION_1 not offered")
    c.close()
    rc = d1.wait_exit(30)  # disconnect without --reconnect: exit 0
    check(rc == 0, "exit status %d after disconnect" % rc)
    shutil.rmtree(d1.dir, ignore_errors=True)

    # With the pid namespace (root only), the pid file names the process outside
    # the namespace that forwards signals, not the daemon's pid 1 inside it.
    if os.geteuid() == 0:
        # LeakSanitizer's exit-time scan cannot run inside the seccomp sandbox.
        d3 = Daemon(extra=["--sandbox", "namespace"], sandboxed=True,
                    env={"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"})
        d3.wait_log("security:")
        with open(d3.sock + ".pid") as f:
            text = f.read().strip()
        check(text == str(d3.proc.pid),
              "pid file holds %r, not the host pid %d of the namespace parent" % (text, d3.proc.pid))
        os.kill(int(text), signal.SIGTERM)
        rc = d3.wait_exit(30)
        check(rc == 0, "exit status %d after SIGTERM to the pid file's pid:\n%s" % (rc, d3.text()))
        check(not os.path.exists(d3.sock + ".pid"), "pid file left behind")
        shutil.rmtree(d3.dir, ignore_errors=True)


def test_stale_socket():
    work = tempfile.mkdtemp(prefix="vufsd-transport-")
    sock = os.path.join(work, "vhost.sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(sock)
    s.close()  # a socket file nobody listens on
    with open(sock + ".pid", "w") as f:
        f.write("999999\n")  # a pid file nobody holds locked
    d = Daemon(workdir=work, sock=sock)
    d.wait_listening()
    check("removed a stale socket" in d.text(), "stale socket not reported:\n" + d.text())
    c = d.connect()
    c.handshake()
    c.close()
    check(d.wait_exit(30) == 0, "exit status after disconnect")
    shutil.rmtree(work, ignore_errors=True)


def test_signals():
    for sig in (signal.SIGTERM, signal.SIGINT):
        d = Daemon()
        d.wait_listening()
        d.proc.send_signal(sig)
        rc = d.wait_exit(30)
        check(rc == 0, "idle daemon exited %d on %s:\n%s" % (rc, sig.name, d.text()))
        check(not os.path.exists(d.sock), "socket left behind after %s" % sig.name)
        shutil.rmtree(d.dir, ignore_errors=True)
    # With a frontend connected and mid-handshake.
    d = Daemon()
    d.wait_listening()
    c = d.connect()
    c.handshake()
    d.wait_log("SET_OWNER done")
    d.term()
    rc = d.wait_exit(30)
    check(rc == 0, "connected daemon exited %d on SIGTERM:\n%s" % (rc, d.text()))
    c.close()
    shutil.rmtree(d.dir, ignore_errors=True)


def test_socket_group():
    import grp
    import stat
    candidates = [g for g in grp.getgrall() if g.gr_gid != os.getegid()]
    if os.geteuid() != 0:
        candidates = [g for g in candidates if g.gr_gid in os.getgroups()]
    if candidates:
        g = candidates[0]
        d = Daemon(["--socket-group", g.gr_name])
        d.wait_listening()
        st = os.stat(d.sock)
        check(st.st_gid == g.gr_gid, "socket group %d, wanted %d" % (st.st_gid, g.gr_gid))
        check(stat.S_IMODE(st.st_mode) == 0o660, "socket mode %o" % stat.S_IMODE(st.st_mode))
        d.term()
        check(d.wait_exit(30) == 0, "exit status")
        shutil.rmtree(d.dir, ignore_errors=True)
    d = Daemon(["--socket-group", "no-such-group-vufsd"])
    rc = d.wait_exit(30)
    check(rc == 1 and "no group named" in d.text(), "unknown group: %d\n%s" % (rc, d.text()))
    check(not os.path.exists(d.sock), "socket left behind by a failed start")
    shutil.rmtree(d.dir, ignore_errors=True)


def run(args):
    return subprocess.run([VUFSD] + args, capture_output=True, text=True, timeout=30)


def test_command_line():
    r = run(["--print-capabilities"])
    check(r.returncode == 0, "--print-capabilities exited %d" % r.returncode)
    caps = json.loads(r.stdout)
    check(caps.get("type") == "fs", "capabilities: %r" % caps)
    check(isinstance(caps.get("features"), list), "capabilities without a feature list")
    # Claim only what exists: the features the Rust virtiofsd defines for "fs",
    # each matching what vufsd really does.
    feats = set(caps["features"])
    check(feats <= {"separate-options", "migrate-precopy"}, "unknown capability in %r" % caps)
    check("separate-options" in feats, "--shared-dir/--socket-path exist: %r" % caps)
    d = Daemon()
    d.wait_listening()
    c = d.connect()
    vfeats, pfeats = c.handshake()
    c.close()
    check(d.wait_exit(30) == 0, "exit status after disconnect")
    shutil.rmtree(d.dir, ignore_errors=True)
    # Pre-copy migration of a vhost-user-fs device needs dirty logging
    # (VHOST_F_LOG_ALL and LOG_SHMFD) and the device state transfer
    # (DEVICE_STATE): QEMU 11.1 refuses to migrate without either.
    migrates = (bool(vfeats & (1 << 26)) and bool(pfeats & (1 << 1)) and
                bool(pfeats & (1 << 19)))
    check(("migrate-precopy" in feats) == migrates,
          "migrate-precopy claimed=%s but logging and state transfer offered=%s" %
          ("migrate-precopy" in feats, migrates))
    r = run(["--version"])
    check(r.returncode == 0 and "vufsd" in r.stdout, "--version: %r" % r.stdout)
    r = run(["-V"])
    check(r.returncode == 0, "-V")
    r = run(["--help"])
    check(r.returncode == 0 and "--shared-dir" in r.stdout, "--help")
    work = tempfile.mkdtemp(prefix="vufsd-transport-")
    bad = [
        ["--bogus"],
        ["--shared-dir", work],
        ["--shared-dir", work, "--socket-path", work + "/s", "--cache", "sometimes"],
        ["--shared-dir", work, "--socket-path", work + "/s", "-o", "nonsense"],
        ["--shared-dir", work, "--socket-path", work + "/s", "--sandbox", "none",
         "--seccomp", "none"],
    ]
    for args in bad:
        r = run(args)
        check(r.returncode == 1, "%r exited %d" % (args, r.returncode))
        check(r.stderr.strip() != "", "%r failed without a message" % (args,))
    # --poll-us polls virtqueues: refused with --mount, with a reason.
    r = run(["--shared-dir", work, "--mount", work + "/m", "--poll-us", "10"])
    check(r.returncode == 1 and "poll-us" in r.stderr, "--poll-us: %r" % r.stderr)
    # DAX statistics without a window.
    r = run(["--shared-dir", work, "--socket-path", work + "/s", "--stats-file", work + "/st"]
            + UNSANDBOXED)
    check(r.returncode == 1 and "dax-window" in r.stderr, "--stats-file: %r" % r.stderr)
    # --fd that is not a listening socket.
    r = run(["--shared-dir", work, "--fd", "0"] + UNSANDBOXED)
    check(r.returncode == 1 and "not a listening socket" in r.stderr, "--fd 0: %r" % r.stderr)
    shutil.rmtree(work, ignore_errors=True)


def test_fd_handover():
    work = tempfile.mkdtemp(prefix="vufsd-transport-")
    sock = os.path.join(work, "handed.sock")
    ls = socket.socket(socket.AF_UNIX)
    ls.bind(sock)
    ls.listen(1)
    share = os.path.join(work, "share")
    os.mkdir(share)
    p = subprocess.Popen([VUFSD, "--fd", str(ls.fileno()), "--shared-dir", share,
                          "--log-level", "debug"] + UNSANDBOXED, pass_fds=[ls.fileno()],
                         stderr=subprocess.PIPE, text=True)
    ls.close()
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(sock)
    from vutest import Conn
    c = Conn(s)
    feats, _ = c.handshake()
    check(feats & (1 << 32), "VERSION_1 missing over --fd")
    c.close()
    rc = p.wait(30)
    err = p.stderr.read()
    check(rc == 0, "--fd daemon exited %d: %s" % (rc, err))
    check("SET_OWNER done" in err, "handshake over --fd not logged")
    shutil.rmtree(work, ignore_errors=True)


def mounted(path):
    """The filesystem type mounted at path, from mountinfo, or None."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == path:
                return fields[fields.index("-") + 1]
    return None


def test_mount():
    """--mount with the default sandbox: mounts in the host's namespace (sandbox
    none, with a warning, seccomp on), serves, and unmounts on SIGTERM; an
    explicit --sandbox namespace or chroot is refused."""
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("SKIP: --mount needs root and /dev/fuse")
        sys.exit(77)
    work = tempfile.mkdtemp(prefix="vufsd-transport-")
    os.chmod(work, 0o755)
    share, mnt = os.path.join(work, "share"), os.path.join(work, "mnt")
    os.mkdir(share)
    os.mkdir(mnt)
    with open(os.path.join(share, "hello"), "w") as f:
        f.write("through the mount\n")
    for mode in ("namespace", "chroot"):
        r = run(["--mount", mnt, "--shared-dir", share, "--sandbox", mode])
        check(r.returncode == 1 and "--mount works only with --sandbox none" in r.stderr,
              "--mount --sandbox %s: %d %r" % (mode, r.returncode, r.stderr))
        check(mounted(mnt) is None, "refused --mount left a mount")
    log = os.path.join(work, "vufsd.log")
    with open(log, "w") as logf:
        # LeakSanitizer's exit-time scan cannot run under the seccomp filter.
        env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
        p = subprocess.Popen([VUFSD, "--mount", mnt, "--shared-dir", share, "--log-level", "debug"],
                             stdout=logf, stderr=subprocess.STDOUT, env=env)
    text = lambda: open(log).read()
    try:
        deadline = time.monotonic() + 30
        while "security:" not in text():
            check(p.poll() is None, "vufsd --mount exited %s:\n%s" % (p.returncode, text()))
            check(time.monotonic() < deadline, "vufsd --mount did not start:\n" + text())
            time.sleep(0.05)
        check((mounted(mnt) or "").startswith("fuse"), "no fuse mount on %s:\n%s" % (mnt, text()))
        with open(os.path.join(mnt, "hello")) as f:
            check(f.read() == "through the mount\n", "wrong content through the mount")
        check("--mount: no sandbox" in text(), "implied --sandbox none not logged:\n" + text())
        check("seccomp=kill" in text(), "seccomp not applied with --mount:\n" + text())
        p.send_signal(signal.SIGTERM)
        rc = p.wait(30)
        check(rc == 0, "vufsd --mount exited %d after SIGTERM:\n%s" % (rc, text()))
        check(mounted(mnt) is None, "mount left behind after SIGTERM:\n" + text())
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if mounted(mnt):
            subprocess.run(["umount", "-l", mnt])
    shutil.rmtree(work, ignore_errors=True)


def budget_line(d):
    """(budget, nofile) from the daemon's debug line."""
    d.wait_log("fd budget for the guest:")
    m = re.search(r"fd budget for the guest: (\d+) \(RLIMIT_NOFILE (\d+)\)", d.text())
    check(m is not None, "fd budget line malformed:\n" + d.text())
    return int(m.group(1)), int(m.group(2))


def test_fd_budget():
    """The guest's fd budget follows the RLIMIT_NOFILE vufsd sets, not the limit it
    was started with: about a million by default (as root), below N with
    --rlimit-nofile N. 64 + 5 % stay with the daemon."""
    # Start the daemon with a small soft limit: a budget taken from the limit in
    # force at start-up instead of the one vufsd sets would show.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, soft), hard))
    with open("/proc/sys/fs/nr_open") as f:
        default = min(1000000, int(f.read()))
    with open("/proc/self/status") as f:
        capeff = int(re.search(r"CapEff:\s*([0-9a-f]+)", f.read()).group(1), 16)
    if not capeff & (1 << 24) and hard != resource.RLIM_INFINITY and hard < default:
        default = hard  # without CAP_SYS_RESOURCE the hard limit is the ceiling
    for extra, want in (([], default), (["--rlimit-nofile", "5000"], 5000)):
        d = Daemon(extra=extra)
        budget, nofile = budget_line(d)
        check(nofile == want, "RLIMIT_NOFILE %d, expected %d" % (nofile, want))
        check(budget == nofile - 64 - nofile * 5 // 100,
              "fd budget %d does not follow RLIMIT_NOFILE %d:\n%s" % (budget, nofile, d.text()))
        check(budget < nofile, "fd budget %d not below the limit %d" % (budget, nofile))
        d.term()
        check(d.wait_exit(30) == 0, "exit status after SIGTERM")
        shutil.rmtree(d.dir, ignore_errors=True)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_syslog():
    """--syslog reaches /dev/log from inside the namespace sandbox: the log socket
    is connected before pivot_root, not on the first message (here a warning sent
    after the sandbox is in place, with --log-level warn). Runs in a private mount
    namespace whose /dev holds the test's own /dev/log."""
    if os.geteuid() != 0:
        print("SKIP: --syslog in the namespace sandbox needs root")
        sys.exit(77)
    if os.environ.get("VUFSD_TEST_PRIVATE_DEV") != "1":
        env = dict(os.environ, VUFSD_TEST_PRIVATE_DEV="1")
        os.execvpe("unshare", ["unshare", "--mount", "--propagation", "private", sys.executable,
                               os.path.abspath(__file__), "syslog"], env)
    work = tempfile.mkdtemp(prefix="vufsd-transport-")
    dev = os.path.join(work, "dev")
    os.mkdir(dev)
    open(os.path.join(dev, "null"), "w").close()
    check(subprocess.run(["mount", "--bind", "/dev/null", os.path.join(dev, "null")]).returncode == 0,
          "cannot bind /dev/null")
    check(subprocess.run(["mount", "--rbind", dev, "/dev"]).returncode == 0, "cannot cover /dev")
    logsock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    logsock.bind("/dev/log")
    logsock.settimeout(30)
    d = Daemon(extra=["--syslog", "--log-level", "warn", "--sandbox", "namespace"], sandboxed=True,
               workdir=work, env={"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") +
                                  ":detect_leaks=0"})
    deadline = time.monotonic() + 30
    while not os.path.exists(d.sock):
        check(d.alive(), "vufsd --syslog exited %s" % d.proc.returncode)
        check(time.monotonic() < deadline, "vufsd --syslog did not listen")
        time.sleep(0.05)
    c = d.connect()  # accepted only once the sandbox is in place
    c.handshake()
    check(c.call(99) != 0, "unknown request acknowledged as success")
    got = []
    while not any("unsupported request 99" in m for m in got):
        try:
            got.append(logsock.recv(4096).decode(errors="replace"))
        except socket.timeout:
            fail("no syslog message from inside the sandbox; got %r" % got)
    c.close()
    check(d.wait_exit(30) == 0, "exit status after disconnect")
    logsock.close()
    subprocess.run(["umount", "-R", "/dev"])
    subprocess.run(["umount", os.path.join(dev, "null")])
    shutil.rmtree(work, ignore_errors=True)


def test_file_handles():
    """--inode-file-handles: opening a handle needs CAP_DAC_READ_SEARCH. Without
    it (here taken away with --modcaps), mandatory refuses to start with exit
    status 1 and a message, prefer warns and serves with O_PATH fds; with it,
    both serve. Each case runs in the default (namespace) sandbox and without."""
    if os.geteuid() != 0:
        print("SKIP: capabilities are dropped only by a daemon that has them (root)")
        sys.exit(77)
    for sandbox in (UNSANDBOXED, ["--sandbox", "namespace"]):
        sandboxed = sandbox != UNSANDBOXED
        env = {"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"}
        d = Daemon(extra=sandbox + ["--inode-file-handles=mandatory",
                                    "--modcaps=-dac_read_search"], sandboxed=sandboxed, env=env)
        check(d.wait_exit(30) == 1, "mandatory without the capability: exit status")
        check("CAP_DAC_READ_SEARCH" in d.text(), "no reason given:\n" + d.text())
        shutil.rmtree(d.dir, ignore_errors=True)
        for mode, caps, warned in (("prefer", ["--modcaps=-dac_read_search"], True),
                                   ("prefer", [], False), ("mandatory", [], False)):
            d = Daemon(extra=sandbox + ["--inode-file-handles=" + mode] + caps,
                       sandboxed=sandboxed, env=env)
            deadline = time.monotonic() + 30
            while not os.path.exists(d.sock):
                check(d.alive(), "--inode-file-handles=%s %s exited:\n%s" % (mode, caps, d.text()))
                check(time.monotonic() < deadline, "vufsd did not listen")
                time.sleep(0.05)
            c = d.connect()  # served once the sandbox and the check are done
            c.handshake()
            c.close()
            check(d.wait_exit(30) == 0, "exit status after disconnect:\n" + d.text())
            check(("file handles do not open" in d.text()) == warned,
                  "--inode-file-handles=%s %s: warning expected=%s:\n%s"
                  % (mode, caps, warned, d.text()))
            shutil.rmtree(d.dir, ignore_errors=True)


if __name__ == "__main__":
    tests = {"pidfile": test_pidfile, "stale": test_stale_socket, "signals": test_signals,
             "cli": test_command_line, "fd": test_fd_handover, "group": test_socket_group, "mount": test_mount,
             "fd-budget": test_fd_budget, "syslog": test_syslog, "file-handles": test_file_handles}
    tests[sys.argv[1]]()
    print("PASS")
