"""What both sides of a sharded run share: its sizes and test hook, the deadline for a silent
worker, lowering one file, the shared counters, and the stages a worker builds."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from torchrepro_lint.parsing.source import ParseFailure, SourceFile
from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.project.modules import ProjectModule



# Below this many files to parse, forking costs more than it saves; and each process of a
# sharded run should have at least this many (every one receives the whole project's IR).
MIN_FILES = 24
FILES_PER_PROCESS = 12
MAIN = 0
# Test hook: `protocol.ASSIGNED(source) -> shard` fixes which process lowers (and so keeps the tree of)
# each file, instead of whichever takes it first, so that a test can make questions cross
# processes. None in real runs.
ASSIGNED: Callable[[SourceFile], int] | None = None


# A worker that sends nothing for this long while the main process waits on it is hung: it is
# killed and its share done by the main process. Generous (LibCST parses about 1 MB a second),
# plus this much per megabyte of the work the worker may still hold when the wait begins.
HUNG_AFTER_SECONDS = 120.0
HUNG_AFTER_SECONDS_PER_MB = 60.0


class WorkerLost(Exception):
    """A worker exited or failed: the main process does its share instead."""


class WorkerHung(WorkerLost):
    """A worker sent nothing within its allowance while the main process waited on it."""


def allowance(characters: int = 0) -> float:
    """How long a worker may stay silent while it holds `characters` of source to work on."""
    return HUNG_AFTER_SECONDS + HUNG_AFTER_SECONDS_PER_MB * characters / 1_000_000


# -- lowering, in every process ----------------------------------------------------------------
def lower(project: ProjectIndex, source: SourceFile, budget):
    """Add `source` to the project: its module, or the ParseFailure that stopped it."""
    try:
        module = project.add(source)
    except RecursionError:
        return ParseFailure("file is too deeply nested to analyse")
    except ParseFailure as exc:
        return exc
    if budget is not None:
        budget.after_indexing(module)
    return module


def lowered_outcome(project: ProjectIndex, outcome):
    """What a worker sends for one file: its IR and digest and whether it kept the tree, or
    its parse failure."""
    if isinstance(outcome, ParseFailure):
        return ("failure", (outcome.message, outcome.row, outcome.column))
    return ("ir", outcome._ir, project.lowered.ir_digests.get(outcome.path), outcome.has_tree)


# The IR that crosses between processes (a worker's lowered files, the main process's share of
# the project) goes this many modules to a message: a message is pickled and unpickled whole,
# and all of one process's IR in one message took the main process 200 MB past its level for a
# moment on torch's source (the bytes, and the pickler's memo of every object).
MODULES_PER_MESSAGE = 64


def chunks(items: list, size: int | None = None):
    """`items` in consecutive pieces of `size` (MODULES_PER_MESSAGE); one empty piece if none."""
    size = size or MODULES_PER_MESSAGE
    return [items[i : i + size] for i in range(0, len(items), size)] or [[]]


# Held while a worker is forked (hub.py) and lifted first thing in it (worker.py).
INTERRUPTS = {signal.SIGINT, signal.SIGTERM}


def take(counter) -> int:
    """The next number from a counter shared by all processes."""
    with counter.get_lock():
        value = counter.value
        counter.value = value + 1
    return value


class ModulesByPath:
    """Modules by path, for unpickling facts: a module that another process loaded from disk
    is loaded here too."""

    def __init__(self, project: ProjectIndex) -> None:
        self.project = project

    def __getitem__(self, path: Path) -> ProjectModule:
        module = self.project.modules.get(path) or self.project.load_path(path)
        if module is None:
            raise KeyError(path)
        return module


@dataclass(frozen=True)
class Stages:
    """How a worker builds what the engine would: (all called in the worker)."""

    budget: Callable  # (processes in the run) -> TreeBudget
    runner: Callable  # (project) -> ProgramRunner
    checker: Callable  # (project, programs, budget) -> a staging.ModuleChecker
    program_checker: Callable  # (project, programs) -> check(program's index) -> (findings, errors, reads)