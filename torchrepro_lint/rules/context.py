"""What rules see: the project, its programs, the configuration, and how to report."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from torchrepro_lint.config import Config
from torchrepro_lint.findings import Finding, Fix, Severity
from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.project.modules import ProjectModule
from torchrepro_lint.project.reads import RECORDING, note_read
from torchrepro_lint.project.programs import Program
from torchrepro_lint.project.summaries import summary, summary_kind
from torchrepro_lint.rules.base import Rule


def independent(a: frozenset, b: frozenset) -> bool:
    """Two settings made under unrelated runtime conditions (their guards: `if cfg.benchmark:` /
    `if args.det:`), as exclusive branches are: neither path's guards hold the other's."""
    return not (a <= b or b <= a)


@dataclass
class LintContext:
    project: ProjectIndex
    _programs: list[Program]
    config: Config
    _reaching: dict[object, list[Program]] = field(default_factory=dict, repr=False)  # module path -> programs

    @property
    def programs(self) -> list[Program]:
        if RECORDING:
            RECORDING[-1].add(("programs", "*"))
        return self._programs

    def programs_reaching(self, module: ProjectModule) -> list[Program]:
        """The programs whose code runs something in `module` (for severities and messages)."""
        if RECORDING:
            RECORDING[-1].add(("programs", module.path))
        # Asked per module, not built for all: on torch's source every program runs most of its
        # 2,285 modules, and an edit asks of a few (the map for all cost 7M insertions an edit).
        found = self._reaching.get(module.path)
        if found is None:
            found = self._reaching[module.path] = [p for p in self._programs if module.path in p.facts.modules]
        return found

    def programs_running(self, module: ProjectModule, node: cst.CSTNode) -> list[Program]:
        """The programs that run the code around `node`: its module's top level, or the
        function or method (outermost `def`) that contains it. Finer than programs_reaching."""
        path = []
        for ancestor in module.index.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                path.append((ancestor, ancestor.name.value))
        functions = [i for i, (n, _) in enumerate(path) if isinstance(n, cst.FunctionDef)]
        programs = self.programs_reaching(module)
        if not functions:
            return programs
        outer = functions[-1]
        key = (module.path, ".".join(name for _, name in reversed(path[outer:])))
        return [p for p in programs if key in p.facts.functions]

    def report(
        self,
        rule: Rule,
        module: ProjectModule,
        node: cst.CSTNode | int | None,
        message: str,
        severity: Severity | None = None,
        fix: Fix | None = None,
    ) -> Finding | None:
        """A finding at `node` (a CST node, a ref into the module's IR table, or None for line 1).

        None when the module was only loaded to follow imports: findings belong to linted files.
        """
        note_read("reported", module.path)  # see digests.Digests
        if not module.linted:
            return None
        if isinstance(node, int):
            node = module.nodes[node]
        row, column, end_row, end_column = module.source.span(node)
        path = module.source.path.as_posix()
        return Finding(rule.code, message, severity or rule.severity, path, row, column, end_row, end_column, fix)

    def line_of(self, site) -> str:
        """`train.py:12` for messages that point at another place."""
        module, ref = site
        note_read("display", module.path)
        row = summary(module, "site", str(ref))[0] if ref is not None else 1
        return f"{module.source.path.as_posix()}:{row}"


def shown_path(module: ProjectModule) -> str:
    """A module as findings show paths: a module found by following an import (read from its
    resolved, absolute path) is shown relative to the working directory, like the files linted."""
    path = module.source.path
    if path.is_absolute() and not module.linted:  # linted files keep the path they were given
        try:
            return Path(os.path.relpath(path, Path.cwd())).as_posix()  # `../src/lib/x.py` outside it
        except ValueError:  # another drive (Windows)
            pass
    return path.as_posix()


def describe(site, limit: int = 48) -> str:
    """"`nn.Linear(10, 2)` at train.py:12": a short quote of the code at a site, and where.

    From the site's summary: a message quoting another module stays cached while that line
    of code stays the same, whatever else changes there."""
    module, ref = site
    note_read("display", module.path)
    if ref is None:
        return f"{shown_path(module)}:1"
    row, text = summary(module, "site", str(ref))
    where = f"{shown_path(module)}:{row}"
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"`{text}` at {where}"


@summary_kind("site")
def _site(module: ProjectModule, ref: str) -> tuple[int, str]:
    """(line, code on one line) of the node an IR ref points at."""
    node = module.nodes[int(ref)]
    row = module.source.span(node)[0]
    if isinstance(node, cst.SimpleStatementLine):
        node = node.body[0]
    return row, " ".join(module.source.module.code_for_node(node).split())
