"""A language-server session's analysis checked against a fresh session's (tests of what the
server keeps from one analysis to the next)."""

from __future__ import annotations

from pathlib import Path

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
    return found
