"""A sharded run that a worker stops answering, or that the user interrupts: the findings are
the one-process findings, or the run ends at once leaving no worker and no partial cache entry."""

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import check_json
from shard_support import assign_ops_and_train_apart, shard_project
from torchrepro_lint.pipeline import staging
from torchrepro_lint.pipeline.shards import protocol, worker


@pytest.fixture
def root(tmp_path, monkeypatch):
    return shard_project(tmp_path, monkeypatch)


def _hangs_in_workers(function):
    """`function`, blocking for ever when called in a forked worker: alive, never answering."""
    main_process = os.getpid()

    def hanging(*args, **kwargs):
        if os.getpid() != main_process:
            threading.Event().wait()
        return function(*args, **kwargs)

    return hanging


def _hangs_answering(handle):
    def hanging(self, message):
        if message[0] == "compute":
            threading.Event().wait()
        return handle(self, message)

    return hanging


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("torchrepro-lint: warning:")]


@pytest.mark.parametrize(
    "where, name, replacement, jobs",
    [
        (protocol, "lower", _hangs_in_workers(protocol.lower), "2"),
        (staging.ModuleChecker, "check", _hangs_in_workers(staging.ModuleChecker.check), "2"),
        # a worker asked another's question never answers: the asker gets it from main
        (worker._Questions, "_handle", _hangs_answering(worker._Questions._handle), "3"),
    ],
    ids=["hangs-lowering", "hangs-checking", "hangs-answering"],
)
def test_a_hung_worker_is_stopped_and_its_share_done_by_the_main_process(
    root, capsys, monkeypatch, where, name, replacement, jobs
):
    _, alone, _, _ = check_json(capsys, root, "--no-cache", "--jobs", "1")
    monkeypatch.setattr(protocol, "HUNG_AFTER_SECONDS", 0.5)  # (the real deadline is minutes)
    monkeypatch.setattr(protocol, "HUNG_AFTER_SECONDS_PER_MB", 0.0)
    monkeypatch.setattr(where, name, replacement)
    # worker 1 surely lowers ops.py and checks it (and, with three processes, asks worker 2)
    monkeypatch.setattr(protocol, "ASSIGNED", assign_ops_and_train_apart(int(jobs)))
    code, sharded, stats, err = check_json(capsys, root, "--no-cache", "--jobs", jobs)
    assert code == 1 and sharded == alone and stats["workers"] == int(jobs) - 1
    said = _warnings(err)
    assert said and len(said) == len(set(said))  # said, and once for each worker stopped
    assert all("sent nothing for" in line and "done by the main process" in line for line in said)


def test_the_deadline_grows_with_the_work_a_worker_holds(monkeypatch):
    monkeypatch.setattr(protocol, "HUNG_AFTER_SECONDS", 120.0)
    monkeypatch.setattr(protocol, "HUNG_AFTER_SECONDS_PER_MB", 60.0)
    assert protocol.allowance() == 120.0
    assert protocol.allowance(20_000_000) == 120.0 + 20 * 60.0


# Run as the console script does (cli.run: its SIGTERM handler, os._exit), with a worker that
# announces itself and then blocks while lowering, so that the signal surely comes mid-run.
INTERRUPTED = """
import os, signal, sys, threading
# As an interactive shell starts a command: Ctrl-C raises KeyboardInterrupt. A process started
# in the background of a non-interactive shell (`cmd &`, CI runners, nohup) inherits SIGINT
# ignored, and so would this one: the test would then wait for an exit that never comes.
signal.signal(signal.SIGINT, signal.default_int_handler)
from torchrepro_lint.pipeline.shards import protocol

main_process = os.getpid()
lower = protocol.lower

def announcing(project, source, budget):
    if os.getpid() != main_process:
        print(os.getpid(), flush=True)
        threading.Event().wait()
    return lower(project, source, budget)

protocol.lower = announcing
protocol.ASSIGNED = lambda source: 1 if source.path.name == "m0.py" else 0
from torchrepro_lint.cli import run
sys.argv = ["torchrepro-lint", "check", "--jobs", "2", "--cache-dir", sys.argv[2], sys.argv[1]]
run()
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited: only its exit status is left


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
@pytest.mark.parametrize(
    "send, code",
    [
        (lambda process: os.killpg(process.pid, signal.SIGINT), 130),  # Ctrl-C: the whole process group
        (lambda process: os.kill(process.pid, signal.SIGTERM), 143),  # `kill`, a CI job cancelled
    ],
    ids=["ctrl-c", "sigterm"],
)
def test_an_interrupted_sharded_run_leaves_no_worker_and_no_partial_cache_entry(tmp_path, send, code):
    project, cache = tmp_path / "proj", tmp_path / "cache"
    project.mkdir()
    for i in range(30):  # enough files for a sharded run with the real thresholds
        (project / f"m{i}.py").write_text(f"import torch\n\nx{i} = torch.randn({i + 1})\n")
    (project / "pyproject.toml").write_text("[tool.torchrepro-lint]\n")
    process = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED, str(project), str(cache)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell gives a command
    )
    worker = int(process.stdout.readline())  # the worker is mid-lowering now
    send(process)
    out, err = process.communicate(timeout=120)
    assert process.returncode == code, err
    assert "Traceback" not in err and out == ""
    assert not _running(worker)
    assert not [p for p in cache.rglob("*") if p.name.startswith(".tmp-")]
    # what the interrupted run cached is whole: the next run reports what an uncached one does
    rerun = [sys.executable, "-m", "torchrepro_lint", "check", "--output-format", "json", str(project)]
    cached = subprocess.run([*rerun, "--cache-dir", str(cache)], capture_output=True, text=True)
    fresh = subprocess.run([*rerun, "--no-cache"], capture_output=True, text=True)
    assert cached.returncode == fresh.returncode and cached.stdout == fresh.stdout
    assert "warning" not in cached.stderr


# A project too small to shard: with --jobs 2 and no cache, only the per-file rules run in a
# process pool (staging.ModuleChecker._check_all). A pool worker blocks inside its file's rules.
INTERRUPTED_POOL = """
import os, sys, threading
from torchrepro_lint.pipeline import staging

main_process = os.getpid()
check = staging.ModuleChecker.check

def announcing(self, module):
    if os.getpid() != main_process:
        print(os.getpid(), flush=True)
        threading.Event().wait()
    return check(self, module)

staging.ModuleChecker.check = announcing
from torchrepro_lint.cli import run
sys.argv = ["torchrepro-lint", "check", "--jobs", "2", "--no-cache", sys.argv[1]]
run()
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_sigterm_while_a_pool_checks_files_stops_its_workers(tmp_path):
    for i in range(3):
        (tmp_path / f"m{i}.py").write_text(f"import torch\n\nx{i} = torch.randn({i + 1})\n")
    process = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED_POOL, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    worker = int(process.stdout.readline())  # a pool worker is inside a file's rules now
    os.kill(process.pid, signal.SIGTERM)  # the main process only: it must stop the pool itself
    out, err = process.communicate(timeout=120)  # (the pool's own shutdown waited for ever here)
    assert process.returncode == 143, err
    assert "Traceback" not in err
    assert not _running(worker)
