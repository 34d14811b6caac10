"""Chains of random edits, as a user types them, for the tests that compare an incremental
result (reparse, walk_reuse, function_reuse) with the whole one."""

from __future__ import annotations

import random

from torchrepro_lint.pipeline.source import physical_lines


def edit_chain(rng: random.Random, text: str, snippets: list[str], edits: int):
    """Up to `edits` texts, each made from the last one that compiled by one edit: a snippet
    inserted at a random line, a line deleted, or a comment added to a line. Texts that do not
    compile are skipped (the chain goes on from the last one that did)."""
    for _ in range(edits):
        lines = physical_lines(text)
        at = rng.randrange(len(lines) + 1)
        choice = rng.random()
        if choice < 0.5:
            lines.insert(at, rng.choice(snippets))
        elif choice < 0.75 and at < len(lines):
            del lines[at]
        elif at < len(lines):
            lines[at] = lines[at].rstrip("\n") + "  # changed\n"
        edited = "".join(lines)
        try:
            compile(edited, "script.py", "exec")
        except SyntaxError:
            continue
        text = edited
        yield text
