#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""What a user, a packager or a management stack sees of vufsd before any guest:
the man page renders cleanly and documents exactly the options vufsd has, bad
command lines fail with status 1 and a message naming the culprit,
--print-capabilities claims only what vufsd does, and `meson install` lays out
the binary, the vhost-user descriptor, the man page and a systemd unit pair
that systemd accepts.

    test_cli.py man|options|unknown|capabilities|install
Environment: VUFSD (the binary), MANPAGE (docs/vufsd.1), BUILD_ROOT, PREFIX,
BINDIR (for install), MESON (the meson command)."""
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile

VUFSD = os.environ.get("VUFSD", "")
MANPAGE = os.environ.get("MANPAGE", "")
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg)
    return cond


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=60, **kw)


def rendered_man():
    env = dict(os.environ, MANWIDTH="200", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
    r = run(["man", "-l", MANPAGE], env=env)
    check(r.returncode == 0, "man -l exited %d: %s" % (r.returncode, r.stderr))
    return re.sub(r".\x08", "", r.stdout)  # overstrike bold/underline


def test_man():
    """`man -l docs/vufsd.1` renders, and neither man nor groff warns."""
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8")
    r = run(["man", "-l", MANPAGE], env=env)
    check(r.returncode == 0, "man -l exited %d" % r.returncode)
    check(r.stderr == "", "man -l warned:\n" + r.stderr)
    check("vufsd" in r.stdout and "SYNOPSIS" in r.stdout, "man -l rendered no page")
    # Every groff warning category (-ww), no output (-z).
    for dev in (["-Tutf8"], []):  # the terminal, and the default (PostScript) device
        r = run(["groff", "-ww", "-z", "-man"] + dev + [MANPAGE])
        check(r.returncode == 0 and r.stderr == "",
              "groff -ww %s: rc %d\n%s" % (" ".join(dev), r.returncode, r.stderr))
    r = run(["man", "--warnings=all", "-l", MANPAGE], env=env)
    check(r.stderr == "", "man --warnings=all:\n" + r.stderr)


def help_options():
    """The options vufsd --help lists: long names, and the short forms."""
    r = run([VUFSD, "--help"])
    check(r.returncode == 0, "--help exited %d" % r.returncode)
    longs, shorts = set(), set()
    for line in r.stdout.splitlines():
        m = re.match(r"^\s+(?:-(\w), )?--([a-z][a-z0-9-]*)", line)
        if not m:
            continue
        if m.group(1):
            shorts.add("-" + m.group(1))
        if len(m.group(2)) > 1:  # GOption's "--o" twin of -o is not an option name
            longs.add("--" + m.group(2))
    check(len(longs) > 30, "--help lists only %d long options" % len(longs))
    return longs, shorts


def test_options():
    """Every option --help lists is in the man page, and the man page documents no
    option vufsd does not have (so the two cannot drift apart)."""
    longs, shorts = help_options()
    text = rendered_man()
    for o in sorted(longs):
        check(re.search(re.escape(o) + r"(?![a-z0-9-])", text) is not None,
              "%s is in --help but not in the man page" % o)
    for o in sorted(shorts):
        check(re.search(r"(?<![\w-])" + re.escape(o) + r"\b", text) is not None,
              "%s is in --help but not in the man page" % o)
    hidden = {"-d", "-f"}  # legacy switches, accepted without being listed
    # The option sections (DESCRIPTION and EXAMPLES quote other programs too).
    check("\nTRANSPORT OPTIONS" in text, "no TRANSPORT OPTIONS section")
    text = text.split("\nTRANSPORT OPTIONS", 1)[-1].split("\nEXAMPLES", 1)[0]
    for o in sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", text))):
        check(o in longs, "the man page documents %s, which vufsd --help does not list" % o)
    for o in sorted(set(re.findall(r"(?<![\w-])-[a-zA-Z](?![\w-])", text))):
        check(o in shorts or o in hidden or o == "-o",
              "the man page documents %s, which vufsd does not have" % o)
    # Each legacy -o key (and each value) the man page names must parse: vufsd
    # parses the whole command line before --print-capabilities ends it.
    section = " ".join(text.split("LEGACY -o OPTIONS", 1)[-1].split("SIGNALS", 1)[0].split())
    body = section.split("accepts these keys:", 1)[-1].split("(which", 1)[0]
    placeholders = {"DIR": "/", "RULES": ":ok:all:::", "CAPS": "+chown", "N": "2"}
    forms = []
    for item in body.split(","):
        item = item.strip()
        if item.startswith("and "):
            item = item[4:].strip()
        key, eq, vals = item.partition("=")
        for v in (vals.split("|") if eq else [None]):
            forms.append(key if v is None else key + "=" + placeholders.get(v, v))
    check(len(forms) >= 20, "the LEGACY -o OPTIONS section names only %r" % forms)
    for opt in forms:
        r = run([VUFSD, "-o", opt, "--shared-dir", "/", "--print-capabilities"])
        check(r.returncode == 0, "the man page names -o %s, vufsd refuses it: %s" %
              (opt, r.stderr.strip()))


def test_unknown():
    """Unknown options, long or -o, exit 1 with a message naming them; nothing
    is left behind."""
    work = tempfile.mkdtemp(prefix="vufsd-cli-")
    base = ["--shared-dir", work, "--socket-path", work + "/s"]
    cases = [
        (["--bogus"], "--bogus"),
        (base + ["--no-such-option=1"], "--no-such-option"),
        (base + ["-o", "nonsense"], "nonsense"),
        (base + ["-o", "source=" + work + ",cache=auto,nonsense_key=1"], "nonsense_key"),
        (["-o", "source=" + work, "--socket-path", work + "/s", "-o", "posix_lock,bogus"],
         "bogus"),
        (base + ["-Z"], "-Z"),
        (base + ["--cache", "sometimes"], "sometimes"),
        (base + ["--thread-pool-size", "-1"], "thread-pool-size"),
        (base + ["stray-argument"], "stray-argument"),
    ]
    for args, name in cases:
        r = run([VUFSD] + args)
        check(r.returncode == 1, "%s: exit status %d, wanted 1" % (shlex.join(args), r.returncode))
        check(name in r.stderr, "%s: message does not name %s: %r" % (shlex.join(args), name,
                                                                    r.stderr))
        check(r.stdout == "", "%s: wrote to stdout: %r" % (shlex.join(args), r.stdout))
        check(not os.path.exists(work + "/s"), "%s: left a socket behind" % shlex.join(args))
    shutil.rmtree(work, ignore_errors=True)


def test_capabilities():
    """--print-capabilities prints one JSON object QEMU and libvirt can read, with
    only the features vufsd has: "separate-options" means libvirt's long-option
    command line parses (it then starts vufsd with it), and "migrate-precopy"
    that QEMU's pre-copy live migration works (dirty logging and the device
    state transfer; tests/integration/transport checks the offer behind it)."""
    r = run([VUFSD, "--print-capabilities"])
    check(r.returncode == 0 and r.stderr == "", "rc %d, stderr %r" % (r.returncode, r.stderr))
    caps = json.loads(r.stdout)
    check(set(caps) == {"type", "features"}, "unexpected keys in %r" % caps)
    check(caps.get("type") == "fs", "type is %r, wanted fs" % caps.get("type"))
    feats = caps.get("features")
    check(isinstance(feats, list) and all(isinstance(f, str) for f in feats),
          "features is not a list of strings: %r" % feats)
    check(len(set(feats)) == len(feats), "repeated features: %r" % feats)
    check(set(feats) <= {"separate-options", "migrate-precopy"},
          "features libvirt does not know: %r" % feats)
    check("migrate-precopy" in feats, "migrate-precopy not claimed: %r" % feats)
    if "separate-options" in feats:
        # libvirt's qemuVirtioFSBuildCommandLine for such a daemon: everything but the
        # listening socket is well formed, so vufsd must get as far as the socket.
        work = tempfile.mkdtemp(prefix="vufsd-cli-")
        s = socket.socket(socket.AF_UNIX)  # bound, never listening: refused at start-up
        s.bind(work + "/s")
        r = subprocess.run([VUFSD, "--fd=%d" % s.fileno(), "--shared-dir", work, "--cache",
                            "always", "--sandbox", "chroot", "--xattr", "--thread-pool-size=2",
                            "--rlimit-nofile=4096", "--log-level", "debug"],
                           pass_fds=[s.fileno()], capture_output=True, text=True, timeout=30)
        s.close()
        check(r.returncode == 1 and "not a listening socket" in r.stderr,
              "libvirt's separate-options command line: rc %d: %s" % (r.returncode, r.stderr))
        shutil.rmtree(work, ignore_errors=True)


def test_install():
    """meson install --destdir: the binary in libexec, share/qemu/vhost-user/40-vufsd.json
    (valid JSON naming the installed binary, sorting before Debian's 50-qemu-virtiofsd.json
    and 50-virtiofsd.json), the man page, and the systemd socket/service pair, which
    systemd-analyze verify accepts."""
    prefix, libexecdir = os.environ["PREFIX"], os.environ["LIBEXECDIR"]
    dest = tempfile.mkdtemp(prefix="vufsd-install-")
    r = run(shlex.split(os.environ.get("MESON", "meson")) +
            ["install", "-C", os.environ["BUILD_ROOT"], "--destdir", dest, "--no-rebuild",
             "--quiet"])
    check(r.returncode == 0, "meson install: rc %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
    root = dest + prefix
    binary = os.path.join(prefix, libexecdir, "vufsd")
    installed = dest + binary
    check(os.access(installed, os.X_OK), "%s not installed" % binary)
    r = run([installed, "--version"])
    check(r.returncode == 0 and r.stdout.startswith("vufsd "), "installed --version: %r" % r.stdout)

    desc_path = os.path.join(root, "share/qemu/vhost-user/40-vufsd.json")
    if check(os.path.isfile(desc_path), "no share/qemu/vhost-user/40-vufsd.json"):
        with open(desc_path) as f:
            desc = json.load(f)
        # docs/interop/vhost-user.json: description, type, binary (absolute).
        check(desc.get("type") == "fs", "descriptor type %r" % desc.get("type"))
        check(desc.get("binary") == binary, "descriptor binary %r, installed at %s" %
              (desc.get("binary"), binary))
        check(isinstance(desc.get("description"), str) and desc["description"],
              "descriptor without a description")
        check(set(desc) <= {"description", "type", "binary", "tags"},
              "descriptor keys outside QEMU's schema: %r" % sorted(desc))

    man = os.path.join(root, "share/man/man1/vufsd.1")
    check(os.path.isfile(man), "man page not installed at share/man/man1/vufsd.1")

    unitdir = os.path.join(root, "lib/systemd/system")
    if os.environ.get("UNITDIR"):
        unitdir = dest + os.environ["UNITDIR"]
    units = [os.path.join(unitdir, u) for u in ("vufsd@.socket", "vufsd@.service")]
    if all(check(os.path.isfile(u), "%s not installed" % u) for u in units):
        service = open(units[1]).read()
        check("@BINDIR@" not in service and "ExecStart=%s " % binary in service,
              "ExecStart does not run %s:\n%s" % (binary, service))
        check(re.search(r"ExecStart=\S+ --fd[= ]3\b", service) is not None,
              "the service does not take the socket as --fd 3")
        analyze = shutil.which("systemd-analyze")
        if check(analyze is not None, "systemd-analyze is missing (package systemd)"):
            # systemd checks that ExecStart's binary exists: point it into DESTDIR,
            # change nothing else.
            vdir = tempfile.mkdtemp(prefix="vufsd-units-")
            for u in units:
                with open(u) as f, open(os.path.join(vdir, os.path.basename(u)), "w") as g:
                    g.write(f.read().replace("ExecStart=" + binary, "ExecStart=" + installed))
            r = run([analyze, "verify", "--man=no"] +
                    [os.path.join(vdir, os.path.basename(u)) for u in units], cwd=vdir)
            check(r.returncode == 0 and r.stderr.strip() == "" and r.stdout.strip() == "",
                  "systemd-analyze verify: rc %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
            shutil.rmtree(vdir, ignore_errors=True)
    shutil.rmtree(dest, ignore_errors=True)


TESTS = {"man": test_man, "options": test_options, "unknown": test_unknown,
         "capabilities": test_capabilities, "install": test_install}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in TESTS:
        sys.exit("usage: test_cli.py " + "|".join(TESTS))
    TESTS[sys.argv[1]]()
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("ok")
