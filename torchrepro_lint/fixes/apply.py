"""Apply fixes to one file's text: dedupe identical edits, defer overlapping ones, never break syntax."""

from __future__ import annotations

import ast

import libcst as cst

from torchrepro_lint.findings import Edit, Finding
from torchrepro_lint.parsing.lines import line_starts
from torchrepro_lint.parsing.source import NEVER_VALID


def _offset(starts: list[int], position: tuple[int, int]) -> int:
    """The offset of a 1-based (row, column) in a text whose `line_starts` are `starts`."""
    row, column = position
    if row > len(starts):
        return starts[-1]
    return min(starts[row - 1] + column - 1, starts[-1])


def parses(text: str) -> bool:
    """LibCST reads `text`, and CPython compiles it or refuses it only as newer syntax than its
    own (the verdict a linted file gets: parsing/source.py)."""
    try:
        cst.parse_module(text)
        ast.parse(text)
    except SyntaxError as error:  # (after LibCST read it)
        return not error.msg.startswith(NEVER_VALID)
    except (cst.ParserSyntaxError, ValueError, RecursionError):
        return False
    return True


def apply_fixes(text: str, findings: list[Finding], *, accept=parses) -> tuple[str, list[Finding]]:
    """(new text, findings whose fix was applied). Overlapping fixes wait for the next round;
    a fix whose result does not parse (`accept(candidate)` is false) is dropped."""
    starts = line_starts(text)
    taken: list[tuple[int, int]] = []
    planned: dict[tuple[int, int, str], None] = {}
    applied: list[Finding] = []
    for finding in sorted(findings, key=lambda f: f.sort_key):
        spans = []
        for edit in finding.fix.edits:
            start, end = _offset(starts, edit.start), _offset(starts, edit.end)
            spans.append((start, end, edit.content))
        new = [s for s in spans if s not in planned]
        if any(_overlaps(s, t) for s in new for t in taken):
            continue
        candidate = _apply(text, [*planned, *new])
        if not accept(candidate):
            continue  # would break the file: dropped
        for span in new:
            planned[span] = None
            taken.append(span[:2])
        applied.append(finding)
    return _apply(text, list(planned)), applied


def _overlaps(a, b) -> bool:
    (a_start, a_end), (b_start, b_end) = a[:2], b
    if a_start == a_end or b_start == b_end:  # insertions only clash strictly inside a range
        return b_start < a_start < b_end or a_start < b_start < a_end
    return a_start < b_end and b_start < a_end


def _apply(text: str, spans) -> str:
    # From the end backwards, so earlier offsets stay valid; insertions at one point keep order.
    ordered = sorted(enumerate(spans), key=lambda item: (item[1][0], item[1][1], item[0]), reverse=True)
    for _, (start, end, content) in ordered:
        text = text[:start] + content + text[end:]
    return text


def edit_text(text: str, edit: Edit) -> str:
    starts = line_starts(text)
    return text[: _offset(starts, edit.start)] + edit.content + text[_offset(starts, edit.end) :]
