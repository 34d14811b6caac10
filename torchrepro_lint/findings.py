"""What a rule reports: findings, their severity, and the fixes they may carry."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Severity(str, enum.Enum):
    ERROR = "error"  # will raise, or is certainly wrong
    WARNING = "warning"  # a reproducibility hazard
    NOTE = "note"  # hygiene: reproducible today but fragile

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Edit:
    """Replace the text between two 1-based (row, column) positions with `content`."""

    content: str
    start: tuple[int, int]
    end: tuple[int, int]


@dataclass(frozen=True)
class Fix:
    applicability: str  # "safe" | "unsafe"
    message: str
    edits: tuple[Edit, ...] = ()
    cell: int | None = None  # notebooks: the cell the edits count in (not always the finding's)


@dataclass(frozen=True)
class Finding:
    """One reported hazard. Rows and columns are 1-based; columns count code points."""

    code: str
    message: str
    severity: Severity
    path: str
    row: int
    column: int
    end_row: int
    end_column: int
    fix: Fix | None = None
    # Notebooks: the cell (1-based over all cells) that rows, columns and fix edits count in, and
    # the first and last line of the .ipynb file that store the reported lines.
    cell: int | None = None
    file_rows: tuple[int, int] | None = None

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.row, self.column, self.code, self.message)

    @property
    def location(self) -> str:
        """`path:row:column`, or `path:cell N:row:column` in a notebook (as ruff writes it)."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.row}:{self.column}"


@dataclass
class Statistics:
    """What a run did (`--statistics`): how much came from the cache and how much was redone."""

    files: int = 0
    parsed: int = 0  # files LibCST parsed in this run
    programs: int = 0
    programs_resolved: int = 0  # programs interpreted in this run rather than taken from the cache
    cache_hits: int = 0  # linted files whose per-file results came from the cache
    replayed: bool = False  # the whole result came from the cache
    workers: int = 0  # processes besides the main one that parsed and checked a share of files
    summaries_asked: int = 0  # summaries one process asked of another instead of parsing
    program_rules_in_workers: int = 0  # programs whose program rules a worker ran
    workers_peak_rss_mib: int = 0  # the largest worker's peak memory (the main process's is the OS's to tell)


@dataclass
class LintResult:
    """Everything one run produced: findings plus the files that could not be linted."""

    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # one clear line per problem file
    files_checked: int = 0
