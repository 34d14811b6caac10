"""The findings of one open file that the whole project's analysis cannot take back: what the
language server publishes for a file before the program model is built (13 s cold on
pytorch-image-models), on evidence from that file alone.

The file is parsed into a project that holds it alone, with no programs, and each per-file rule
runs on it while every read it makes is checked (project/reads.py records them for the cache;
here the recording set refuses any read outside the file). A rule whose run read only the file
itself (its text, tree, IR, its own summaries) reaches the same findings in the full analysis:
the cache already relies on a result being the same while everything it read is (`check`
replays a file's findings on exactly that condition), and each of those reads has the same value
in both projects. A rule that asks for anything else is stopped at that read, and what it would
have found after it waits for the full analysis: the programs (`context.programs`, `programs_for`:
TRP101's seeds, TRP301's level), another module's IR, text or summary, which modules mention a
word, an import that finds a module of the project, and the project's set of modules itself
(iterating `project.modules`, which the cache does not record).

An import that finds no module is the one read of the project taken as local: both projects look
for its files on disk under the same root, so it finds nothing in both, unless an open buffer
stands for a file that is not on disk (`buffers_on_disk`).

A file that does not compile is TRP000 alone, as in the full analysis. Notebooks, and files the
analysis does not lint (no .py or .pyi name), are left to it.
"""

from __future__ import annotations

from pathlib import Path

from torchrepro_lint.config import Config
from torchrepro_lint.findings import Finding
from torchrepro_lint.parsing.source import ParseFailure, SourceError, SourceFile
from torchrepro_lint.pipeline.discovery import PYTHON_SUFFIXES
from torchrepro_lint.project.index import ProjectIndex
from torchrepro_lint.project.reads import IR_CODE, IR_FUNCTION, IR_TOP, record_into

_OF_A_MODULE = frozenset({"ir", "content", "reported", "display", IR_TOP})
_OF_A_PART = frozenset({IR_FUNCTION, IR_CODE, "summary"})  # keyed (path, ...)


class _Crossed(BaseException):
    """A rule read something outside the file: its findings wait for the full analysis.
    (A BaseException: no rule's `except Exception` swallows it.)"""


class _Watch:
    """The rule running now: whether it read outside the file."""

    crossed = False


_WATCH = _Watch()


def _cross():
    _WATCH.crossed = True
    raise _Crossed


class _LocalReads(set):
    """A recording set that takes the reads of one module and stops the rule at any other."""

    def __init__(self, path: Path, missing_is_local: bool) -> None:
        super().__init__()
        self.path, self.missing_is_local = path, missing_is_local

    def add(self, read) -> None:
        kind, key = read
        if kind in _OF_A_MODULE:
            local = key == self.path
        elif kind in _OF_A_PART:
            local = key[0] == self.path
        else:  # programs, mentions, missing imports, and anything new: not the file's alone
            local = kind == "missing" and self.missing_is_local
        if not local:
            _cross()
        super().add(read)

    def update(self, *others) -> None:
        for other in others:
            for read in other:
                self.add(read)


class _OneModule(dict):
    """The project's modules, holding the file alone: looking one up by path is local (an
    absent one is then loaded from disk, which `_Alone` refuses), going over them all is not."""

    def __iter__(self):
        _cross()

    def __len__(self):
        _cross()

    def keys(self):
        _cross()

    def values(self):
        _cross()

    def items(self):
        _cross()


class _Alone(ProjectIndex):
    """A project of one file: an import that would load another module from disk stops the
    rule; one that finds no file stays local (the full project finds none either)."""

    def _load_from_disk(self, candidate: Path):
        if self._on_disk(candidate):
            _cross()
        return None


def first_findings(config: Config, display: Path, text: str, buffers_on_disk: bool = True) -> list[Finding] | None:
    """The per-file findings of `text` (the file `display`, as `check` names it) that need
    nothing outside it, sorted and filtered as the engine filters them (noqa, per-file-ignores);
    TRP000 alone where it does not compile. None where the file cannot be read as Python
    (the full analysis says why)."""
    from torchrepro_lint.pipeline.engine import (
        PARSE_ERROR, _config_helpers, _filtered, enabled_rules, parse_error_finding, selection_from,
    )
    from torchrepro_lint.rules.base import Rule
    from torchrepro_lint.rules.context import LintContext

    if not display.name.endswith(PYTHON_SUFFIXES):
        return None  # a notebook (the full analysis maps it to cells), or a file it does not lint
    source = SourceFile(display, text)
    project = _Alone(config.root, _config_helpers(config))
    try:
        module = project.add(source)
    except ParseFailure as failure:
        finding = parse_error_finding(display, failure)
        return _filtered([finding], project, config) if selection_from(config).enabled(PARSE_ERROR, True) else []
    except (SourceError, RecursionError):
        return None
    modules, project.modules = project.modules, _OneModule(project.modules)
    context = LintContext(project, [], config)
    found: list[Finding] = []
    for rule in enabled_rules(config):
        if type(rule).check_module is Rule.check_module or not rule.may_fire_in(text):
            continue
        found += _run(rule, module, context, buffers_on_disk)
    project.modules = modules  # (for the filter: noqa comments are read from the module's source)
    return _filtered(found, project, config)


def _run(rule, module, context, buffers_on_disk: bool) -> list[Finding]:
    """The findings the rule gives in `module` before it reads anything outside it: up to that
    read it runs as in the full analysis, which keeps every finding a rule yields (a rule that
    fails later keeps those it yielded before, there too)."""
    _WATCH.crossed = False
    found: list[Finding] = []
    try:
        with record_into(_LocalReads(module.path, buffers_on_disk)):
            for finding in rule.check_module(module, context):
                if _WATCH.crossed:  # (a rule that caught the stop: nothing after it counts)
                    break
                if finding is not None:
                    found.append(finding)
    except _Crossed:
        pass
    except Exception:  # a rule's bug: the full analysis reports it, with what came before
        pass
    return found


def warm_up(root: Path) -> None:
    """Import what an answer needs (the rules, LibCST's parser) before the first is asked."""
    from torchrepro_lint.config import installed_torch_version

    first_findings(Config(root=root, torch_version=installed_torch_version()), root / "warm_up.py", "import os\n")
