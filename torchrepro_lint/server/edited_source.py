"""An open buffer's source for the engine: parsed by reusing the tree of its previous text
where the edit allows (pipeline/reparse.py), and compiled by CPython once per text."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from torchrepro_lint.pipeline.reparse import ParsedText, reparse
from torchrepro_lint.pipeline.source import SourceFile


@dataclass
class EditedSource(SourceFile):
    """`previous`: the buffer's last parsed text. After the engine parsed this one, `parsed`
    holds it for the next edit (the engine may drop the tree; the session keeps it)."""

    previous: ParsedText | None = field(default=None, repr=False)
    parsed: ParsedText | None = field(default=None, repr=False)

    @cached_property
    def module(self) -> cst.Module:
        # The session compiled the text (a buffer that does not compile never gets here), so
        # only the statements the edit touched need LibCST.
        found = reparse(self.previous, self.text) if self.previous is not None else None
        if found is None:
            found = ParsedText(self.text, SourceFile.module.func(self))
        self.parsed = self.previous = found
        return found.module


def edited_source(path, text: str, previous: ParsedText | None, syntax_tree: ast.Module | None) -> EditedSource:
    """`syntax_tree`: CPython's tree of `text`, where the session has it (it compiled it)."""
    return EditedSource(path, text, syntax_tree=syntax_tree, _compiles=syntax_tree is not None, previous=previous)
