#!/usr/bin/env python3
"""Peak memory and wall time of cold runs, two versions interleaved, every process measured.

    python benchmarks/peak_memory.py TREE --base /tmp/base [--rounds 3] [--jobs default 1]

Runs `python -m torchrepro_lint check . --no-cache --statistics [--jobs N]` in TREE (which
holds its own pyproject), alternating the version under --base (put first on PYTHONPATH) and
this checkout (head): base, head, base, head... so that both see the same load on a shared
machine. For each run it prints the wall time, the CPU time (user and system, the workers'
included), the load average when it ended, the peak RSS of the largest process (the main one
or any worker) and of the main one, and a digest of the output (the two versions must print
the same).

The largest process: its peak resident size (VmHWM) is read from /proc every few
milliseconds for every process of the run's session, and os.wait4 gives the largest among
the main process and the children it reaped; the larger of the two is shown. (A forked
worker's peak counts the pages it shares with the main process, as `ps` would.) Linux only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def session_peaks(session: int) -> dict[int, int]:
    """pid -> VmHWM in KiB of every live process whose session is `session`."""
    peaks = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            if int(fields[3]) != session:  # (after the name: state, ppid, pgrp, session)
                continue
            with open(f"/proc/{name}/status") as handle:
                for line in handle:
                    if line.startswith("VmHWM:"):
                        peaks[int(name)] = int(line.split()[1])
                        break
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return peaks


def run_once(command: list[str], cwd: Path, env: dict) -> dict:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True)
        peaks: dict[int, int] = {}
        done = threading.Event()

        def poll() -> None:
            while not done.is_set():
                for pid, peak in session_peaks(proc.pid).items():
                    peaks[pid] = max(peaks.get(pid, 0), peak)
                done.wait(0.02)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        done.set()
        poller.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read().decode(errors="replace")
    largest_kib = max([usage.ru_maxrss, *peaks.values()])
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),  # with the workers it reaped
        "largest_mib": round(largest_kib / 1024),
        "main_mib": round(peaks.get(proc.pid, 0) / 1024),
        "processes": len(peaks),
        "returncode": proc.returncode,
        "output": hashlib.sha256(stdout).hexdigest()[:12],
        "stderr_tail": stderr.strip().splitlines()[-1:] if proc.returncode not in (0, 1) else [],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", type=Path)
    parser.add_argument("--base", type=Path, required=True, help="a checkout of the version to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", nargs="+", default=["default", "1"], help="'default' or a number, each measured")
    parser.add_argument("--only", choices=["base", "head"], help="measure one version only")
    parser.add_argument("--json", type=Path, help="write every run here")
    args = parser.parse_args(argv)

    versions = {"base": str(args.base.resolve()), "head": str(REPO)}
    if args.only:
        versions = {args.only: versions[args.only]}
    runs = []
    for round_ in range(1, args.rounds + 1):
        for jobs in args.jobs:
            for name, path in versions.items():
                env = dict(os.environ, PYTHONPATH=path)
                command = [sys.executable, "-m", "torchrepro_lint", "check", ".", "--no-cache", "--statistics"]
                if jobs != "default":
                    command += ["--jobs", jobs]
                run = {"round": round_, "jobs": jobs, "version": name, **run_once(command, args.tree, env)}
                runs.append(run)
                print(f"round {round_}  jobs {jobs:>7}  {name}:  wall {run['wall_s']:6.1f} s  cpu {run['cpu_s']:6.1f} s  "
                      f"load {os.getloadavg()[0]:4.1f}  largest process "
                      f"{run['largest_mib']:5d} MiB  main {run['main_mib']:5d} MiB  ({run['processes']} processes)  "
                      f"output {run['output']}  exit {run['returncode']} {' '.join(run['stderr_tail'])}", flush=True)
    for jobs in args.jobs:
        for name in versions:
            mine = [r for r in runs if r["jobs"] == jobs and r["version"] == name]
            walls = sorted(r["wall_s"] for r in mine)
            cpus = sorted(r["cpu_s"] for r in mine)
            rss = sorted(r["largest_mib"] for r in mine)
            print(f"jobs {jobs:>7}  {name}:  wall {walls[0]}-{walls[-1]} s  cpu {cpus[0]}-{cpus[-1]} s  "
                  f"largest process {rss[0]}-{rss[-1]} MiB")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))
    outputs = {r["output"] for r in runs}
    return 0 if len(outputs) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
