"""An open buffer's source for the engine: parsed by reusing the tree of its previous text
where the edit allows (parsing/reparse.py), and compiled by CPython once per text (recompile.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from torchrepro_lint.parsing.reparse import ParsedText, reparse
from torchrepro_lint.parsing.source import SourceFile
from torchrepro_lint.server.recompile import Compiled


@dataclass
class EditedSource(SourceFile):
    """`previous`: the buffer's last parsed text. After the engine parsed this one, `parsed`
    holds it for the next edit (the engine may drop the tree; the session keeps it)."""

    previous: ParsedText | None = field(default=None, repr=False)
    parsed: ParsedText | None = field(default=None, repr=False)
    reparsed_from: ParsedText | None = field(default=None, repr=False)  # whose statements the tree shares

    keeps_walk = True

    @cached_property
    def module(self) -> cst.Module:
        # The session compiled the text (a buffer that does not compile never gets here), so
        # only the statements the edit touched need LibCST.
        found = reparse(self.previous, self.text) if self.previous is not None else None
        if found is None:
            found = ParsedText(self.text, SourceFile.module.func(self))
        else:
            self.reparsed_from = self.previous
        self.parsed = self.previous = found
        return found.module

    def walk_before(self):
        # This tree's own walk, where an index of it was built already; else the previous tree's
        if self.parsed is not None and self.parsed.walk is not None:
            return self.parsed.walk
        before = self.reparsed_from
        return before.walk if before is not None else None

    def keep_walk(self, walk) -> None:
        if self.parsed is not None:
            self.parsed.walk = walk
            self.reparsed_from = None  # (the previous tree: of no more use)

    def forget_positions(self) -> None:
        # CPython's tree came from the session, which keeps it for the next edit: forgetting it
        # here frees nothing and would compile the whole text again to place a finding.
        tree, offsets = self.syntax_tree, self.syntax_offsets
        super().forget_positions()
        self.syntax_tree, self.syntax_offsets = tree, offsets


def edited_source(path, text: str, previous: ParsedText | None, compiled: Compiled | None) -> EditedSource:
    """`compiled`: CPython's tree of `text`, where the session has it (recompile.py)."""
    if compiled is None or compiled.text != text:
        return EditedSource(path, text, previous=previous)
    if compiled.tree is None:  # newer syntax: LibCST's tree of this text, from the syntax gate
        if previous is None or previous.text != text:
            previous = ParsedText(text, compiled.module)
        return EditedSource(path, text, _compiles=True, _newer_syntax=True, previous=previous)
    return EditedSource(
        path, text, syntax_tree=compiled.tree, syntax_offsets=compiled.line_offsets(), _compiles=True, previous=previous
    )
