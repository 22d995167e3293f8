#!/usr/bin/env python3
# vufs-bench against all three daemons: vufsd, QEMU 7.2's legacy C virtiofsd and
# the Rust virtiofsd (Debian 13's, run through tests/guest/trixie-run.sh), one
# short invocation per workload the targets of docs/benchmarks.md use (tiny
# files, 0.2 s runs). Fails when any daemon fails a run or completes a request
# with an error, when the queue fallback is not what vufs-bench documents, or
# when a spawned daemon's CPU time and RSS were not sampled. Each daemon runs as
# it starts by default: vufsd in its namespace sandbox (a pid namespace, so its
# CPU time is that of two processes) with seccomp, adaptive polling and a
# queue thread per CPU. Before that it
# checks that trixie-run.sh keeps the pid: the process vufs-bench spawns (and
# whose process group it samples) is the Rust daemon itself. No timing is
# asserted. Run through tests/integration/rust_peer.sh (root, the Debian 13 root).
# usage: peers.py VUFS_BENCH VUFSD LEGACY_VIRTIOFSD TRIXIE_RUN
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BACKENDS = ("vufsd", "legacy", "rust")
# (name, workload, options): the targets' workloads (scripts/bench.sh).
CASES = [
    ("randread-2x4", "randread", ["--bs", "4k", "--size", "4M", "--queues", "2", "--depth", "4"]),
    ("randread-qd1", "randread", ["--bs", "4k", "--size", "4M"]),
    ("seqread-1m", "seqread", ["--bs", "1M", "--size", "4M"]),
    ("randwrite-qd1", "randwrite", ["--bs", "4k", "--size", "4M"]),
    ("lookup", "lookup", ["--files", "50", "--queues", "2", "--depth", "2"]),
    ("stat", "stat", ["--files", "50"]),
    ("create", "create", ["--depth", "2"]),
    ("create-unlink", "create-unlink", ["--depth", "2"]),
]


def rust_cmd(trixie_run, sock, d):
    return [trixie_run, "--bind", d, "/usr/libexec/virtiofsd", f"--socket-path={sock}",
            f"--shared-dir={d}", "--sandbox=chroot"]


def check_pid_kept(trixie_run, d):
    """The spawned pid is virtiofsd itself, alone in its process group."""
    sock = os.path.join(d, "pid-check.sock")
    p = subprocess.Popen(rust_cmd(trixie_run, sock, d), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(sock):
            if p.poll() is not None:
                raise SystemExit("the Rust virtiofsd exited before creating its socket: "
                                 + p.stderr.read().decode(errors="replace"))
            if time.monotonic() > deadline:
                raise SystemExit("the Rust virtiofsd did not create its socket within 60 s")
            time.sleep(0.05)
        with open(f"/proc/{p.pid}/comm") as f:
            comm = f.read().strip()
        assert comm == "virtiofsd", f"pid {p.pid} is {comm!r}, not the daemon"
        group = []
        for e in os.listdir("/proc"):
            if e.isdigit():
                try:
                    if os.getpgid(int(e)) == p.pid:
                        group.append(int(e))
                except ProcessLookupError:
                    pass
        assert group == [p.pid], f"process group {p.pid}: {group}"
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        if os.path.exists(sock):
            os.unlink(sock)
    print(f"trixie-run keeps the pid: {p.pid} is virtiofsd, alone in its process group")


def run(bench, args):
    p = subprocess.run([bench] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=300)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit(f"vufs-bench {' '.join(args)} exited {p.returncode}")
    return p


def main():
    bench, vufsd, legacy, trixie_run = sys.argv[1:5]
    for exe in (bench, vufsd, legacy, trixie_run):
        if not os.access(exe, os.X_OK):
            raise SystemExit(f"{exe}: not executable")
    env_prefix = os.environ.get("VUFSD_PREFIX", "")
    cmds = {
        "vufsd": f"{env_prefix}{vufsd} --socket-path {{socket}} --shared-dir {{dir}}",
        "legacy": f"{legacy} --socket-path={{socket}} -o source={{dir}} -o cache=auto",
        "rust": " ".join(rust_cmd(trixie_run, "{socket}", "{dir}")),
    }
    d = tempfile.mkdtemp(prefix="vufs-bench-peers-")
    try:
        check_pid_kept(trixie_run, d)
        for name, workload, extra in CASES:
            args = []
            for b in BACKENDS:
                args += ["--backend", f"{b}={cmds[b]}"]
            args += ["--dir", d, "--workload", workload, "--runtime", "0.2", "--repeat", "1",
                     "--json"] + extra
            p = run(bench, args)
            objs = json.loads(p.stdout)
            assert [o["backend"] for o in objs] == list(BACKENDS), objs
            for o in objs:
                assert o["workload"] == workload, o
                assert o["runs"] == 1 and o["errors"] == 0, o
                assert o["iops"] > 0 and o["p99_us"] >= o["p50_us"] > 0, o
                if workload in ("randread", "seqread", "randwrite"):
                    assert o["mib_s"] > 0, o
                # The backend's process group was sampled: the daemon's CPU
                # time over the timed loop and its RSS.
                assert o["cpu_s"] > 0 and o["rss_kib_max"] > 0, o
            by = {o["backend"]: o for o in objs}
            q, qd = by["vufsd"]["queues_requested"], by["vufsd"]["depth_requested"]
            assert (by["vufsd"]["queues"], by["vufsd"]["depth"]) == (q, qd), by["vufsd"]
            # The legacy and the Rust daemon serve one request queue: with more
            # asked, one queue with the same requests in flight.
            for b in ("legacy", "rust"):
                assert (by[b]["queues"], by[b]["depth"]) == (1, q * qd), by[b]
            print(f"{name}: " + ", ".join(
                f"{o['backend']} {o['iops']:.0f} IOPS cpu {o['cpu_us_per_op']:.1f} us/op "
                f"rss {o['rss_kib_max'] / 1024:.1f} MiB" for o in objs))
        assert os.listdir(os.path.join(d, "vufs-bench", "create")) == []
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("vufs-bench peers: ok")


if __name__ == "__main__":
    main()
