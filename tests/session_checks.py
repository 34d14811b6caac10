"""A language-server session's analysis checked against a fresh session's (tests of what the
server keeps from one analysis to the next)."""

from __future__ import annotations

from pathlib import Path

from torchrepro_lint.project.interpreter.kept_calls import _modules_of
from torchrepro_lint.server.session import Workspace


def fresh_findings(root: Path, session):
    """What a new session with the same buffers finds: what the kept session must find."""
    fresh = Workspace(root, persistent=False)
    for buffer, text in session.buffers.items():
        fresh.open(buffer, text)
    return fresh.sessions[session.root].analyse().findings


def analysed_like_fresh(root: Path, session):
    """The session's findings, which must be what a new session with the same buffers finds.
    (A new session's only analysis keeps nothing: what is counted is the session's own.)"""
    found = session.analyse().findings
    assert found == fresh_findings(root, session)
    kept_calls_on_current_modules(session)
    return found


def kept_calls_on_current_modules(session) -> None:
    """Every call kept for the next analysis points at this analysis's module objects, in its
    paths too (kept_calls._moved puts the previous analysis's recordings on them)."""
    current = session._modules
    for runs in (session._recorded[2] if session._recorded is not None else {}).values():
        for run in runs:
            named = (*run.looked_up, *run.imported_then, *run.imported, *run.modules, *_modules_of(run))
            for module in named:
                assert current.get(module.path) is module, module.path
