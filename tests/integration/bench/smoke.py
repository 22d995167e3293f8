#!/usr/bin/env python3
# vufs-bench smoke test: a short run of each workload against vufsd, the legacy
# virtiofsd and the host pseudo-backend, checking that it exits 0 and prints a
# JSON array with one object per backend carrying the documented keys, that
# every backend completed requests without errors and that the effective queue
# layout is what the tool documents; then the DAX variants, through a backend
# without a window (plain path) and vufsd with one. No timing is asserted.
# usage: smoke.py VUFS_BENCH VUFSD LEGACY_VIRTIOFSD
import json
import os
import shutil
import subprocess
import sys
import tempfile

KEYS = ("backend", "workload", "bs", "queues", "depth", "iops", "mib_s", "p50_us",
        "p99_us", "ratio")


def run(bench, args):
    p = subprocess.run([bench] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=240)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit(f"vufs-bench {' '.join(args)} exited {p.returncode}")
    return p


def main():
    bench, vufsd, legacy = sys.argv[1:4]
    for exe in (bench, vufsd, legacy):
        if not os.access(exe, os.X_OK):
            raise SystemExit(f"{exe}: not executable")
    env_prefix = os.environ.get("VUFSD_PREFIX", "")
    vcmd = (f"{env_prefix}{vufsd} --socket-path {{socket}} --shared-dir {{dir}} --cache auto "
            "--sandbox none --seccomp none --unsafe-no-isolation --log-level error")
    lcmd = f"{legacy} --socket-path={{socket}} -o source={{dir}} -o cache=auto"
    d = tempfile.mkdtemp(prefix="vufs-bench-smoke-")
    try:
        cases = [
            ("randread", ["--bs", "4k", "--size", "4M", "--queues", "2", "--depth", "4"]),
            ("randwrite", ["--bs", "4k", "--size", "4M", "--halt-poll-us", "0"]),
            ("seqread", ["--bs", "128k", "--size", "4M", "--files", "2"]),
            ("randrw", ["--bs", "4k", "--size", "4M", "--depth", "2"]),
            ("lookup", ["--files", "50"]),
            ("stat", ["--files", "50"]),
            ("create", ["--depth", "2"]),
            ("create-unlink", ["--depth", "2"]),
        ]
        for workload, extra in cases:
            args = ["--backend", f"vufsd={vcmd}", "--backend", f"legacy={lcmd}",
                    "--backend", "host", "--dir", d, "--workload", workload,
                    "--runtime", "0.3", "--repeat", "2", "--json"] + extra
            p = run(bench, args)
            objs = json.loads(p.stdout)
            assert isinstance(objs, list) and len(objs) == 3, p.stdout
            assert [o["backend"] for o in objs] == ["vufsd", "legacy", "host"], objs
            for o in objs:
                for k in KEYS:
                    assert k in o, f"{workload}: key {k} missing in {o}"
                assert o["workload"] == workload
                assert o["halt_poll_us"] == (0 if "--halt-poll-us" in extra else 200), o
                assert o["runs"] == 2, o
                assert o["errors"] == 0, o
                assert o["iops"] > 0, o
                assert all(x > 0 for x in o["iops_runs"]), o
                assert o["p99_us"] >= o["p50_us"] > 0, o
                assert "dax_window" not in o
                if workload in ("randread", "randwrite", "seqread", "randrw"):
                    assert o["mib_s"] > 0, o
            assert objs[0]["ratio"] == 1.0, objs[0]
            # The legacy daemon serves one request queue: it gets one queue with
            # the same number of requests in flight.
            if workload == "randread":
                assert (objs[0]["queues"], objs[0]["depth"]) == (2, 4), objs[0]
                assert (objs[1]["queues"], objs[1]["depth"]) == (1, 8), objs[1]
                assert (objs[2]["queues"], objs[2]["depth"]) == (8, 1), objs[2]
            # A spawned backend's CPU time and RSS are sampled; the host has none.
            assert objs[0]["cpu_s"] >= 0 and objs[0]["rss_kib_max"] > 0, objs[0]
            assert objs[2]["cpu_s"] == -1, objs[2]
            assert objs[0]["cpu_pct"] >= 0 and objs[2]["cpu_pct"] == -1, objs
            # The per-run progress lines reach stderr.
            assert p.stderr.count("[run ") >= 6, p.stderr
            print(f"{workload}: " + ", ".join(f"{o['backend']} {o['iops']:.0f}" for o in objs))
        # Pinned (two CPUs or more): the backend runs on its own set and the
        # report says which; a directory per queue, cleaned up as well.
        if len(os.sched_getaffinity(0)) >= 2:
            p = run(bench, ["--backend", f"vufsd={vcmd}", "--backend", f"legacy={lcmd}",
                            "--backend", "host", "--dir", d, "--workload", "create-unlink",
                            "--queues", "2", "--depth", "2", "--runtime", "0.3", "--repeat", "1",
                            "--pin", "auto", "--create-dirs", "per-queue", "--json"])
            objs = json.loads(p.stdout)
            assert len(objs) == 3, objs
            for o in objs:
                assert o["errors"] == 0 and o["iops"] > 0, o
                assert o["frontend_cpus"] and o["backend_cpus"], o
                assert o["create_dirs"] == "per-queue", o
            for o in objs[:2]:
                assert o["backend_cpus_seen"] == o["backend_cpus"], o
            assert "pinned: frontend threads on CPUs" in p.stderr, p.stderr
        else:
            print("pinning: one CPU only, the pinned run is left out")
        # Create runs clean up after themselves.
        assert os.listdir(os.path.join(d, "vufs-bench", "create")) == []

        # DAX flags: every combination of the lists is a variant, run through
        # the emulated guest. A backend without a window (the legacy daemon)
        # runs the plain path: no setups, every request a FUSE READ.
        p = run(bench, ["--backend", f"legacy={lcmd}", "--dir", d,
                        "--workload", "randread", "--size", "4M", "--runtime", "0.2",
                        "--repeat", "1", "--dax-window", "32M,64M", "--dax-policy",
                        "never,always", "--dax-guest", "lru", "--json"])
        objs = json.loads(p.stdout)
        assert len(objs) == 4, objs
        got = [(o["dax_window"], o["dax_policy"], o["dax_guest"]) for o in objs]
        assert got == [(32 << 20, "never", "lru"), (32 << 20, "always", "lru"),
                       (64 << 20, "never", "lru"), (64 << 20, "always", "lru")], got
        for o in objs:
            assert o["dax_window_offered"] == 0 and o["dax_files"] == 0, o
            assert o["dax_setups"] == 0 and o["dax_plain_ops"] > 0, o
            assert o["errors"] == 0 and o["iops"] > 0, o
        assert p.stderr.count("[run ") >= 4, p.stderr

        # vufsd with a window: {dax_window}/{dax_policy} reach it, the guest
        # maps through the frontend's window, and under "never" nothing is.
        # {stats_file}: the map miss path's latency, from the guest's side and
        # from the window's statistics the daemon leaves behind.
        dcmd = vcmd + " --dax-window {dax_window} --dax-policy {dax_policy} --stats-file {stats_file}"
        for workload in ("randread", "randwrite"):
            p = run(bench, ["--backend", f"vufsd={dcmd}", "--dir", d, "--workload", workload,
                            "--size", "4M", "--files", "2", "--runtime", "0.3", "--repeat", "1",
                            "--queues", "2", "--dax-window", "4M,16M",
                            "--dax-policy", "never,always", "--json"])
            objs = json.loads(p.stdout)
            assert len(objs) == 4, objs
            for o in objs:
                assert o["errors"] == 0 and o["iops"] > 0, o
                assert o["dax_window_offered"] == o["dax_window"], o
                if o["dax_policy"] == "never":
                    assert o["dax_files"] == 0 and o["dax_setups"] == 0, o
                    assert o["dax_setup_rtt_us"] == -1 and o["dax_map_us"] == -1, o
                else:
                    assert o["dax_files"] == 2 and o["dax_setups"] > 0, o
                    assert o["dax_setup_rtt_us"] >= o["dax_map_us"] > 0, o
                    assert o["dax_map_max_us"] >= o["dax_map_us"], o
                    if o["dax_window"] == 4 << 20:   # 2 ranges for 4 of data
                        assert o["dax_removes"] > 0, o
                    else:                            # everything fits
                        assert o["dax_hits"] > 0 and o["dax_removes"] == 0, o
            print(f"dax {workload}: " + ", ".join(
                f"{o['dax_window'] >> 20}M {o['dax_policy']} {o['iops']:.0f}" for o in objs))

        # Bad command lines are refused before anything runs.
        for bad in (["--dir", d, "--workload", "randread"],
                    ["--backend", "host", "--dir", d, "--workload", "nosuch"],
                    ["--backend", "host", "--dir", d, "--bs", "0"],
                    ["--backend", "host", "--dir", d, "--queues", "0"],
                    ["--backend", "host", "--dir", d, "--queues", "65"],
                    ["--backend", "host", "--dir", d, "--depth", "0"],
                    ["--backend", "host", "--dir", d, "--files", "0"],
                    ["--backend", "host", "--dir", d, "--repeat", "0"],
                    ["--backend", "host", "--dir", d, "--dax-policy", "always"],
                    ["--backend", "host", "--dir", d, "--dax-window", "4M", "--dax-guest", "x"],
                    ["--backend", "host", "--dir", d, "--dax-window", "3M"],
                    ["--backend", "host", "--dir", d, "--dax-window", "4M,0"],
                    ["--backend", "host", "--dir", d, "--dax-window", "4M",
                     "--dax-policy", "auto,sometimes"],
                    ["--backend", "host", "--dir", d, "--dax-window", "4M",
                     "--workload", "stat"],
                    ["--backend", "host", "--dir", d, "--dax-protocol", "legacy"],
                    ["--backend", "host", "--dir", d, "--halt-poll-us", "x"],
                    ["--backend", "host", "--dir", d, "--halt-poll-us", "2000000"],
                    ["--backend", "host", "--dir", d, "--pin", "0:0"],
                    ["--backend", "host", "--dir", d, "--pin", "0"],
                    ["--backend", "host", "--dir", d, "--create-dirs", "some"]):
            p = subprocess.run([bench] + bad, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=30)
            assert p.returncode == 2, (bad, p.returncode)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("vufs-bench smoke: ok")


if __name__ == "__main__":
    main()
