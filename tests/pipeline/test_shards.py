"""Sharded cold runs (shards/): several processes parse and check their own shares, and the
result is the one-process result, also when a worker fails."""

import multiprocessing
import os
from multiprocessing.connection import wait

import pytest

from conftest import check_json
from shard_support import FILES, assign_ops_and_train_apart, shard_project
from torchrepro_lint import memory
from torchrepro_lint.pipeline import lowered_store, staging, tree_budget
from torchrepro_lint.pipeline.shards import hub, protocol, worker
from torchrepro_lint.rules.trp102_partial_seed import PartialSeed


@pytest.fixture
def root(tmp_path, monkeypatch):
    return shard_project(tmp_path, monkeypatch)


def test_shares_report_what_one_process_reports(root, capsys, monkeypatch):
    code, alone, stats = check_json(capsys, root, "--no-cache", "--jobs", "1")[:3]
    assert code == 1 and stats["workers"] == 0
    assert {f["code"] for f in alone} >= {"TRP000", "TRP301", "TRP402", "TRP501"}
    for jobs in ("2", "3"):
        monkeypatch.setattr(protocol, "ASSIGNED", assign_ops_and_train_apart(int(jobs)))
        code, sharded, stats = check_json(capsys, root, "--no-cache", "--jobs", jobs)[:3]
        assert sharded == alone
        assert stats["workers"] == int(jobs) - 1
        assert stats["summaries_asked"] >= 1  # a share asked another instead of parsing its file
        assert stats["parsed"] == len(FILES) - 1  # each file that parses, parsed once


@pytest.mark.parametrize("budget", [0, 300], ids=["no-tree-kept", "some-trees-kept"])
def test_files_whose_tree_was_dropped_are_checked_by_any_process(root, capsys, monkeypatch, budget):
    # Trees dropped within budget are parsed again by whichever process takes the file; a
    # question about such a file is answered by the process that lowered it, parsing it again.
    _, alone, _ = check_json(capsys, root, "--no-cache", "--jobs", "1")[:3]
    monkeypatch.setattr(tree_budget, "SHARDED_TREE_BUDGET", budget)
    code, sharded, stats = check_json(capsys, root, "--no-cache", "--jobs", "2")[:3]
    assert code == 1 and sharded == alone and stats["workers"] == 1
    assert stats["parsed"] > len(FILES) - 1  # some files were parsed twice


def test_a_sharded_run_fills_the_cache_for_the_next(root, capsys):
    cache = str(root.parent / "cache")
    _, alone, _ = check_json(capsys, root, "--no-cache", "--jobs", "1")[:3]
    _, cold, stats = check_json(capsys, root, "--cache-dir", cache, "--jobs", "2")[:3]
    assert cold == alone and stats["workers"] == 1
    with (root / "part3.py").open("a") as handle:
        handle.write("# a comment\n")
    _, warm, stats = check_json(capsys, root, "--cache-dir", cache, "--jobs", "2")[:3]
    assert warm == alone
    assert (stats["parsed"], stats["programs_resolved"], stats["workers"]) == (1, 0, 0)


def _dies_at_once(connection, *args):
    os._exit(3)


def _fails_after_lowering(*args):
    raise RuntimeError("worker bug")


def _in_workers_only(function):
    """`function`, failing when called in a forked worker rather than in the main process."""
    main_process = os.getpid()

    def failing(*args, **kwargs):
        if os.getpid() != main_process:
            raise RuntimeError("worker bug")
        return function(*args, **kwargs)

    return failing


def _fails_answering(handle):
    def failing(self, message):
        if message[0] == "compute":
            raise RuntimeError("worker bug")
        return handle(self, message)

    return failing


@pytest.mark.parametrize(
    "where, name, replacement, jobs",
    [
        (worker, "work", _dies_at_once, "2"),
        (worker, "_rebuild", _fails_after_lowering, "2"),
        (staging.ProgramRunner, "run", _in_workers_only(staging.ProgramRunner.run), "2"),
        (staging.ModuleChecker, "check", _in_workers_only(staging.ModuleChecker.check), "2"),
        # a worker that fails answering another's question: that one gets its answer from main
        (worker._Questions, "_handle", _fails_answering(worker._Questions._handle), "3"),
    ],
    ids=["dies-before-lowering", "fails-before-programs", "fails-in-programs", "fails-checking", "fails-answering"],
)
def test_a_lost_worker_changes_nothing_but_the_time(root, capsys, monkeypatch, where, name, replacement, jobs):
    _, alone, _ = check_json(capsys, root, "--no-cache", "--jobs", "1")[:3]
    monkeypatch.setattr(where, name, replacement)
    # (with three processes, worker 2 surely gets worker 1's question about train.py)
    monkeypatch.setattr(protocol, "ASSIGNED", assign_ops_and_train_apart(int(jobs)))
    code, sharded, stats = check_json(capsys, root, "--no-cache", "--jobs", jobs)[:3]
    assert code == 1 and sharded == alone
    assert stats["workers"] == int(jobs) - 1  # started, then lost: the main process did their shares


def test_programs_are_interpreted_once_whichever_process_takes_them(root, capsys):
    _, _, alone = check_json(capsys, root, "--no-cache", "--jobs", "1")[:3]
    _, _, sharded = check_json(capsys, root, "--no-cache", "--jobs", "2")[:3]
    assert sharded["programs"] == alone["programs"] >= 1
    assert sharded["programs_resolved"] == alone["programs_resolved"]


def test_no_more_processes_than_the_files_to_parse_pay_for(root, capsys, monkeypatch):
    _, alone, _ = check_json(capsys, root, "--no-cache", "--jobs", "1")[:3]
    monkeypatch.setattr(protocol, "FILES_PER_PROCESS", 5)  # 10 files to parse: two processes
    _, sharded, stats = check_json(capsys, root, "--no-cache", "--jobs", "4")[:3]
    assert sharded == alone and stats["workers"] == 1


# Entry scripts: programs that program rules report on (TRP102, TRP101, TRP201).
PROGRAMS = {
    "shuffle.py": """
import random
import torch

def main():
    torch.manual_seed(0)
    files = ["a.jpg", "b.jpg"]
    random.shuffle(files)

if __name__ == "__main__":
    main()
""",
    "unseeded.py": """
import torch
from ops import upsample

if __name__ == "__main__":
    print(upsample(torch.randn(1, 1, 2, 2)))
""",
    "bench.py": """
import torch

if __name__ == "__main__":
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = True
""",
}


def _with_programs(root):
    for name, code in PROGRAMS.items():
        (root / name).write_text(code.lstrip("\n"))
    return root


def _programs_lowered_by_worker_1(source) -> int:
    """Every program's entry file lowered (so its tree kept) by worker 1: the rules of a program
    whose entry module is large run where its tree is."""
    return 1 if "__main__" in source.text else protocol.MAIN


def _program_rules(monkeypatch, in_main=None, in_workers=None) -> None:
    """Patch ProgramChecker.check so that the main process starts on a program only once a
    worker has started on one (answering the workers' questions meanwhile), and lower every
    entry file in worker 1 (_programs_lowered_by_worker_1): then the workers surely take
    programs. `in_main` / `in_workers` (index) are called first in each."""
    monkeypatch.setattr(protocol, "ASSIGNED", _programs_lowered_by_worker_1)
    main_process = os.getpid()
    started, starting = multiprocessing.get_context("fork").Pipe(duplex=False)  # a worker's "I began"
    hubs = []
    check, share = staging.ProgramChecker.check, hub.Hub.share_program_rules

    def sharing(hub, *args):
        # Called before the workers are told to check (so none of this run has begun a program):
        # a word still in the pipe is from an earlier run's workers, and would let the main
        # process start at once (it made this test fail 1 run in 20 when run twice in a row).
        while started.poll():
            started.recv()
        hubs.append(hub)
        return share(hub, *args)

    def checking(self, index):
        if os.getpid() != main_process:
            starting.send(index)
            if in_workers:
                in_workers(index)
            return check(self, index)
        # Wait for that word, answering the workers meanwhile (no timing: a blocking wait).
        while hubs and hubs[-1].workers and not started.poll():
            ready = wait([started, *(worker.connection for worker in hubs[-1].workers.values())])
            if started not in ready:
                hubs[-1]._pump(block=False)
        if in_main:
            in_main(index)
        return check(self, index)

    monkeypatch.setattr(hub.Hub, "share_program_rules", sharing)
    monkeypatch.setattr(staging.ProgramChecker, "check", checking)


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("torchrepro-lint: error:")]


def test_program_rules_run_in_every_process(root, capsys, monkeypatch):
    _with_programs(root)
    _, alone, stats, _ = check_json(capsys, root, "--no-cache", "--jobs", "1")
    assert {"TRP101", "TRP102", "TRP201"} <= {f["code"] for f in alone}
    assert (stats["programs"], stats["program_rules_in_workers"]) == (4, 0)
    _program_rules(monkeypatch)
    for jobs in ("2", "3"):
        _, sharded, stats, _ = check_json(capsys, root, "--no-cache", "--jobs", jobs)
        assert sharded == alone
        assert 1 <= stats["program_rules_in_workers"] <= 4


def test_a_large_entry_modules_program_rules_run_where_its_tree_is(root, capsys, monkeypatch):
    _with_programs(root)
    _, alone, _, _ = check_json(capsys, root, "--no-cache", "--jobs", "1")
    checked_in_main = []
    checking = staging.ProgramChecker.check

    def check(self, index):
        if os.getpid() == main_process:
            checked_in_main.append(index)
        return checking(self, index)

    main_process = os.getpid()
    monkeypatch.setattr(staging.ProgramChecker, "check", check)
    monkeypatch.setattr(protocol, "ASSIGNED", _programs_lowered_by_worker_1)
    monkeypatch.setattr(memory, "LARGE_PARSE", 0)  # every entry module counts as large
    _, sharded, stats, _ = check_json(capsys, root, "--no-cache", "--jobs", "2")
    assert sharded == alone and (stats["program_rules_in_workers"], checked_in_main) == (4, [])
    # No tree kept anywhere: any process takes them (here the main one may take them all).
    monkeypatch.setattr(tree_budget, "SHARDED_TREE_BUDGET", 0)
    _, sharded, stats, _ = check_json(capsys, root, "--no-cache", "--jobs", "2")
    assert sharded == alone and stats["program_rules_in_workers"] + len(checked_in_main) == 4


def test_a_worker_is_sent_only_the_facts_of_programs_it_did_not_interpret(root, capsys, monkeypatch):
    # It keeps those it interpreted: sending every program's facts to every worker made the
    # main process pickle them all at once, its peak on torch's source.
    _with_programs(root)
    _, alone, _, _ = check_json(capsys, root, "--no-cache", "--jobs", "1")
    main_process = os.getpid()
    began, beginning = multiprocessing.get_context("fork").Pipe(duplex=False)  # (worker pid, entry path)
    words, seen = [], []
    run, check = staging.ProgramRunner.run, hub.Hub.check

    def running(self, project, module, as_main, function=None):
        if os.getpid() != main_process:
            beginning.send((os.getpid(), module.path))
        elif not words:  # the main process waits for a worker to take a program (no timing)
            words.append(began.recv())
        return run(self, project, module, as_main, function)

    def checking(self, modules, programs, checker):
        seen.append(({shard: w.process.pid for shard, w in self.workers.items()}, programs, self))
        return check(self, modules, programs, checker)

    monkeypatch.setattr(staging.ProgramRunner, "run", running)
    monkeypatch.setattr(hub.Hub, "check", checking)
    _, sharded, stats, _ = check_json(capsys, root, "--no-cache", "--jobs", "3")
    assert sharded == alone and stats["workers"] == 2
    while began.poll():  # (sent before the workers sent their facts: all here by now)
        words.append(began.recv())
    [(pids, programs, the_hub)] = seen
    every = {program.entry.path for program in programs}
    for shard, pid in pids.items():
        interpreted = {path for sender, path in words if sender == pid}
        sent = {programs[i].entry.path for i in the_hub.facts_sent[shard]}
        assert not interpreted & sent and interpreted | sent == every
    assert len(every) == 4 and len(words) >= 1  # (a worker interpreted one at least)


def test_ir_sent_in_pieces_of_one_module_changes_nothing(root, capsys, monkeypatch):
    _, alone, _, _ = check_json(capsys, root, "--no-cache", "--jobs", "1")
    monkeypatch.setattr(protocol, "MODULES_PER_MESSAGE", 1)  # (the workers fork with it)
    monkeypatch.setattr(protocol, "ASSIGNED", assign_ops_and_train_apart(3))
    _, sharded, stats, _ = check_json(capsys, root, "--no-cache", "--jobs", "3")
    assert sharded == alone and stats["workers"] == 2
    assert protocol.chunks([1, 2, 3], 2) == [[1, 2], [3]] and protocol.chunks([], 2) == [[]]


def test_a_program_rule_bug_is_reported_once_whichever_processes_met_it(root, capsys, monkeypatch):
    def bug(self, context):
        raise RuntimeError("rule bug")

    _with_programs(root)
    monkeypatch.setattr(PartialSeed, "check_programs", bug)
    code, alone, _, err = check_json(capsys, root, "--no-cache", "--jobs", "1")
    assert _errors(err) == ["torchrepro-lint: error: internal error in TRP102: RuntimeError: rule bug"]
    _program_rules(monkeypatch)
    sharded_code, sharded, stats, sharded_err = check_json(capsys, root, "--no-cache", "--jobs", "2")
    assert (sharded_code, sharded, _errors(sharded_err)) == (code, alone, _errors(err))
    assert stats["program_rules_in_workers"] >= 1


def _dies(index):
    os._exit(3)


def _raises(index):
    raise RuntimeError("worker bug")


@pytest.mark.parametrize("failure", [_dies, _raises], ids=["dies", "raises"])
def test_a_worker_lost_in_the_program_rules_changes_nothing(root, capsys, monkeypatch, failure):
    # The programs it took and never reported are checked by the main process.
    _with_programs(root)
    _, alone, _, _ = check_json(capsys, root, "--no-cache", "--jobs", "1")
    marker = root.parent / "lost"

    def lost(index):
        marker.touch()
        failure(index)

    _program_rules(monkeypatch, in_workers=lost)
    code, sharded, stats, _ = check_json(capsys, root, "--no-cache", "--jobs", "2")
    assert code == 1 and sharded == alone and marker.exists()
    assert (stats["workers"], stats["program_rules_in_workers"]) == (1, 0)


def test_program_findings_of_a_sharded_run_are_cached_for_the_next(root, capsys, monkeypatch):
    _with_programs(root)
    cache = str(root.parent / "cache")
    _, alone, _, _ = check_json(capsys, root, "--no-cache", "--jobs", "1")
    checked_in_main = []
    _program_rules(monkeypatch, in_main=checked_in_main.append)
    _, cold, stats, _ = check_json(capsys, root, "--cache-dir", cache, "--jobs", "2")
    assert cold == alone and stats["program_rules_in_workers"] >= 1
    assert stats["program_rules_in_workers"] + len(checked_in_main) == 4
    # Edits that change no program's facts: the program findings come from the cache, in a
    # sharded run (enough files to parse again) and in a one-process run alike.
    checked_in_main.clear()
    for i in range(4):
        with (root / f"part{i}.py").open("a") as handle:
            handle.write("# a comment\n")
    _, warm, stats, _ = check_json(capsys, root, "--cache-dir", cache, "--jobs", "2")
    assert warm == alone and stats["workers"] == 1 and stats["programs_resolved"] == 0
    assert (stats["program_rules_in_workers"], checked_in_main) == (0, [])
    with (root / "part5.py").open("a") as handle:
        handle.write("# a comment\n")
    _, warm, stats, _ = check_json(capsys, root, "--cache-dir", cache, "--jobs", "1")
    assert warm == alone and (stats["workers"], stats["replayed"], checked_in_main) == (0, False, [])


ORPHAN = """
import os, sys
from torchrepro_lint.pipeline.shards import hub, protocol, worker

def die(self):  # the main process dies as soon as it has lowered its share
    os._exit(9)
    yield

hub.Hub.collect = die
from torchrepro_lint.cli import run
sys.argv = ["torchrepro-lint", "check", "--no-cache", "--jobs", "2", sys.argv[1]]
run()
"""


def test_workers_exit_when_the_main_process_dies(tmp_path):
    import subprocess
    import sys

    for i in range(30):  # enough files for a sharded run with the real thresholds
        (tmp_path / f"m{i}.py").write_text(f"import torch\n\nx{i} = torch.randn({i + 1})\n")
    (tmp_path / "pyproject.toml").write_text("[tool.torchrepro-lint]\n")
    process = subprocess.Popen(
        [sys.executable, "-c", ORPHAN, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    # The worker inherited these pipes: they close only when it has exited too.
    process.communicate(timeout=120)
    assert process.returncode == 9



def test_questions_are_answered_between_the_rules_of_one_file():
    """A worker checking a large file answers the main process before each rule, not only
    after the file (ModuleChecker.pause, set by shards/worker.py)."""
    from types import SimpleNamespace

    calls = []

    class Rule:
        def __init__(self, code):
            self.code = code

        def may_fire_in(self, text):
            return True

        def check_module(self, module, context):
            calls.append(self.code)
            return ()

    checker = staging.ModuleChecker(None, [Rule("A"), Rule("B")], None, "", None, None, None)
    checker.pause = lambda: calls.append("answered")
    module = SimpleNamespace(source=SimpleNamespace(text="x = 1\n", path=None))
    checker.check(module)
    assert calls == ["answered", "A", "answered", "B"]


def test_the_tree_a_files_rules_read_is_never_dropped_while_they_run(tmp_path, monkeypatch):
    """Summaries computed while a file's rules run (for those rules, or for another process's
    question, answered in ModuleChecker.pause) parse other modules and drop the oldest trees
    parsed for summaries. The file being checked may be one of them: its tree stays pinned."""
    from torchrepro_lint.project import summaries
    from torchrepro_lint.project.index import ProjectIndex
    from torchrepro_lint.parsing.source import SourceFile

    monkeypatch.setattr(lowered_store, "SUMMARISED_TREES", 1)
    monkeypatch.setitem(summaries._KINDS, "test: statements", lambda module, argument: len(module.index.module.body))
    project = ProjectIndex(tmp_path)
    project.lowered = lowered_store.LoweredStore(None)
    checked, others = [project.add(SourceFile(tmp_path / f"{name}.py", "x = 1\ny = 2\n")) for name in "abc"][0], []
    others = [m for m in project.modules.values() if m is not checked]
    for module in project.modules.values():
        module.release_tree()
    summaries.current(checked, "test: statements")  # parsed for a summary: the oldest tree kept
    seen = []

    class ReadsWhileOthersAreSummarised:
        code = "TRP999"

        def may_fire_in(self, text):
            return True

        def check_module(self, module, context):
            index = module.index
            for other in others:  # each pushes the oldest summarised tree out of the store
                summaries.current(other, "test: statements")
            seen.append((module.has_tree, module.index is index))
            return ()

    checker = staging.ModuleChecker(None, [ReadsWhileOthersAreSummarised()], None, "", project.lowered, None, None)
    assert checker.check(checked)[:2] == ([], [])
    assert seen == [(True, True)]
    assert not others[0].has_tree  # the store still drops unpinned trees past its limit
    later = project.add(SourceFile(tmp_path / "d.py", "z = 3\n"))
    later.release_tree()
    summaries.current(later, "test: statements")
    assert not checked.has_tree  # unpinned once its rules ended: dropped like any other
