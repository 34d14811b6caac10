"""What running code reads of the project's modules, recorded for caching its results.

A cached result (a program's facts, a file's findings) stays valid while everything it read is
unchanged. Inside a `record()` block every read is collected as (kind, key): ("ir", path) for a
module's IR, or a part of it (IR_TOP, IR_FUNCTION, IR_CODE), ("content", path) for its text or
tree, and what `note_read` adds (a summary, the modules mentioning a word, a missing import).
ProjectModule records the reads of modules; the pipeline values them (pipeline/digests.py).
"""

from __future__ import annotations

from contextlib import contextmanager

# What the code running now reads of each module, for caching its results: one set for each
# `record()` block open, the innermost last.
RECORDING: list[set] = []

# Reads of one part of a module's IR: IR_TOP of all but its functions' bodies (running its top
# level reads its statements, resolving a name in it reads its table: ProjectModule.top, .table),
# IR_FUNCTION of one function (ProjectModule.function: a function the program ran), IR_CODE of
# one function without its node refs (ProjectModule.code: a function the program only asked
# whether it does anything tracked, where no ref of it can reach the program's facts); and
# IR_FUNCTIONS, IR_CODES of several of one module, as cached results keep them
# (digests.Digests). A program that never ran the function an edit changed keeps its cached
# facts, and so does one that only asked about functions whose refs the edit shifted.
IR_TOP, IR_FUNCTION, IR_CODE = "ir.top", "ir.function", "ir.code"
IR_FUNCTIONS, IR_CODES = "ir.functions", "ir.codes"


# For each block of RECORDING: the sets of reads `note_reads` added to it, by id (kept alive).
_NOTED: list[dict] = []
# For each block: whether noted sets are merged into its own (False: a `record(kept_apart=True)`)
_MERGED: list[bool] = []


class Reads:
    """A block's reads kept apart (`record(kept_apart=True)`): its own, and the sets that
    `note_reads` noted, each the same object for every taker. A program re-run on an edit
    notes about 2,400 reads of kept walks and answers, the same as its last run's: merging them
    into one set cost 2 ms of an edit of a timm model file, and the union is needed only when
    they changed (ProgramRunner._values_of)."""

    __slots__ = ("own", "noted")

    def __init__(self, own: set, noted: tuple) -> None:
        self.own, self.noted = own, noted

    def union(self) -> set:
        return self.own.union(*self.noted)

    def same_as(self, other: Reads) -> bool:
        """The same reads as `other` (False may still be the same union: then it is built)."""
        return (
            self.own == other.own and len(self.noted) == len(other.noted)
            and all(a is b or a == b for a, b in zip(self.noted, other.noted))
        )  # fmt: skip


@contextmanager
def record(kept_apart: bool = False):
    """Collect the (kind, key) of every module part read inside the block: ("ir", path) for a
    module's lowered summary (or a part of it: IR_TOP, IR_FUNCTION, IR_CODE), ("content", path)
    for its text or tree, and the reads of `note_read`. A cached result stays valid while every
    part it read is unchanged. `kept_apart`: a Reads, whose noted sets are not merged."""
    reads: set = set()
    noted: dict = {}
    RECORDING.append(reads)
    _NOTED.append(noted)
    _MERGED.append(not kept_apart)
    try:
        if kept_apart:
            found = Reads(reads, ())
            yield found
            found.noted = tuple(noted.values())
        else:
            yield reads
    finally:
        RECORDING.pop()
        _NOTED.pop()
        _MERGED.pop()


def note_read(kind: str, key) -> None:
    """Record a read of something other than a module's IR or text: ("mentions", word), or
    ("uses", (path, name)) for a module's summary of the uses of a name."""
    if RECORDING:
        RECORDING[-1].add((kind, key))


def note_reads(reads) -> None:
    """Record again the reads made when an answer kept for the run was found (a frozenset, the
    same object for each taker): each asker's cached results depend on them. Added once per
    block: the same answer is taken thousands of times in a program."""
    if RECORDING:
        noted = _NOTED[-1]
        if id(reads) not in noted:
            noted[id(reads)] = reads
            if _MERGED[-1]:
                RECORDING[-1].update(reads)


@contextmanager
def record_into(reads: set):
    """`record()` into a set of the caller's: one whose `add` refuses a read stops the code
    running at that read (server/first_findings.py keeps a rule to its own file so)."""
    RECORDING.append(reads)
    _NOTED.append({})
    _MERGED.append(True)
    try:
        yield reads
    finally:
        RECORDING.pop()
        _NOTED.pop()
        _MERGED.pop()


@contextmanager
def unrecorded():
    """Reads inside the block are not recorded: for computing a summary whose own read the
    caller records instead."""
    RECORDING.append(set())
    _NOTED.append({})
    _MERGED.append(True)
    try:
        yield
    finally:
        RECORDING.pop()
        _NOTED.pop()
        _MERGED.pop()
