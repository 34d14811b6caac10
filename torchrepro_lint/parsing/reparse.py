"""Parse an edited text again by parsing only the statements the edit touched.

The language server analyses a buffer again on every keystroke, and LibCST takes 0.1-0.2 s to
parse a 1,500-2,300 line file (pytorch-image-models' train.py and resnet.py), most of an edit's
time. A statement parses the same wherever it stands, given the indentation of its block: so the
statements an edit did not touch are kept as they are (the same node objects) and only the
touched ones are parsed, in the innermost block (a function's or class's body) holding the edit,
behind a synthetic `if 1:` that gives them their indentation.

What LibCST decides from the rest of the file is handled here, and anything uncertain parses
the touched statement one block further out, up to the whole text (`reparse` answers None):
- trivia at the edges: blank lines and comments before a statement are its `leading_lines`,
  but a parsed fragment makes its last ones a block's or the module's footer and, at the top
  level, its first ones the module's header. They are given to the statement that owns them in
  the whole file. An edit among a statement's leading lines, or on its first line, also parses
  the statement before it, which may own the lines (an indented comment, a line added to its
  body). At the end of a block, trailing trivia sends the parse one level out;
- the default indent (from the file's first indented block), the newline and the encoding
  (from its first lines) must lie before the parsed text, and the fragment must agree on them.

The result is the tree LibCST gives for the whole new text (`deep_equals`); the tests compare
them over many edits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from torchrepro_lint.parsing.source import parse_unvalidated
from torchrepro_lint.parsing.lines import physical_lines

# Statements whose body the edit may be looked for in. Clauses may follow the body (`else`,
# `except`, `finally`): their lines, counted, place the body's end.
_DESCEND = (cst.FunctionDef, cst.ClassDef, cst.With, cst.For, cst.While, cst.If, cst.Try, cst.TryStar)


@dataclass
class ParsedText:
    """A text and its LibCST tree, with the physical lines of each statement (leading lines
    included) of the blocks a reparse looked into, counted when first needed."""

    text: str
    module: cst.Module
    # id(module or IndentedBlock) -> (the node, lines of each of its statements)
    line_counts: dict = field(default_factory=dict, repr=False)
    # id(a clause after a body) -> (the clause, its lines)
    clause_line_counts: dict = field(default_factory=dict, repr=False)
    # ModuleIndex's record of its walk of this tree, for the next text's (analysis/walk_reuse.py)
    walk: object = field(default=None, repr=False)

    def counts(self, block) -> list[int]:
        found = self.line_counts.get(id(block))
        if found is None or found[0] is not block:
            found = self.line_counts[id(block)] = (block, [_lines(self.module.code_for_node(s)) for s in block.body])
        return found[1]

    def clause_lines(self, clause) -> int:
        """The physical lines of a clause after a body (`except`, `else`, `finally`), counted once
        while it is the same node: generating the code of the `except` and `finally` of the
        `try` around a 700-line `main()` again on every edit inside it was 1-2 ms."""
        found = self.clause_line_counts.get(id(clause))
        if found is None or found[0] is not clause:
            found = self.clause_line_counts[id(clause)] = (clause, _lines(self.module.code_for_node(clause)))
        return found[1]


def _lines(code: str) -> int:
    return len(physical_lines(code))


class _Whole(Exception):
    """Parse the whole text."""


@dataclass
class _Level:
    """A block being looked into: the module, or a statement's indented body."""

    block: cst.Module | cst.IndentedBlock
    start: int  # the 0-based line its first statement starts at
    counts: list[int]
    indent: str  # absolute indentation of its statements ("" at the top)

    @property
    def starts(self) -> list[int]:
        out = [self.start]
        for count in self.counts:
            out.append(out[-1] + count)
        return out  # statement k covers [out[k], out[k + 1]); out[-1] is where the block ends


class EditSpan:
    """The lines of two texts of a buffer and where they differ (`edited_lines`), for the last
    few pairs: the syntax gate (server/recompile.py) and the reparse ask the same of each edit,
    and the previous text's lines were split on the edit before."""

    kept = 4

    def __init__(self) -> None:
        self._lines: dict[str, tuple[str, ...]] = {}
        self._spans: dict[tuple[str, str], tuple[int, int, int]] = {}

    def lines(self, text: str) -> tuple[str, ...]:
        found = self._lines.get(text)
        if found is None:
            if len(self._lines) >= self.kept:
                del self._lines[next(iter(self._lines))]  # (the oldest)
            found = self._lines[text] = tuple(physical_lines(text))
        return found

    def __call__(self, old_text: str, new_text: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[int, int, int]]:
        """(old lines, new lines, (start, end, delta) as edited_lines gives them)."""
        old, new = self.lines(old_text), self.lines(new_text)
        key = (old_text, new_text)
        span = self._spans.get(key)
        if span is None:
            if len(self._spans) >= self.kept:
                del self._spans[next(iter(self._spans))]
            span = self._spans[key] = edited_lines(old, new)
        return old, new, span


edit_span = EditSpan()


def edited_lines(old: list[str], new: list[str]) -> tuple[int, int, int]:
    """(start, end, delta): the lines `old[start:end]` became `new[start:end + delta]`, and the
    lines before and after are the same in both."""
    shortest = min(len(old), len(new))
    start = 0
    while start < shortest and old[start] == new[start]:
        start += 1
    same_end = 0
    while same_end < shortest - start and old[-1 - same_end] == new[-1 - same_end]:
        same_end += 1
    return start, len(old) - same_end, len(new) - len(old)


def reparse(previous: ParsedText, text: str) -> ParsedText | None:
    """`text` parsed by reusing `previous`'s statements outside the edit, or None where the
    whole text must be parsed (the caller has checked that the whole text compiles)."""
    if text == previous.text:
        return previous
    try:
        return _Reparse(previous, text).run()
    except (_Whole, cst.ParserSyntaxError, RecursionError):
        return None


class _Reparse:
    def __init__(self, previous: ParsedText, text: str) -> None:
        self.previous, self.text = previous, text
        self.module = previous.module
        # old lines [same_start, changed_end) were replaced
        self.old, self.new, (self.same_start, self.changed_end, self.delta) = edit_span(previous.text, text)

    def run(self) -> ParsedText:
        module = self.module
        if not module.body or self.same_start < len(module.header):
            raise _Whole  # the edit touches the module's header
        top = _Level(module, len(module.header), self.previous.counts(module), "")
        chain = [(top, None)]  # (level, index of the statement of the level above it holds)
        while True:
            inner = self._inner_level(chain[-1][0])
            if inner is None:
                break
            chain.append(inner)
        for depth in range(len(chain) - 1, -1, -1):
            level = chain[depth][0]
            if depth + 1 < len(chain):  # the statement that held the block that failed
                index = chain[depth + 1][1]
                replaced = self._parse(level, index, index)
            else:
                replaced = self._parse(level, *self._touched(level))
            if replaced is not None:
                return self._splice(chain[: depth + 1], replaced)
        raise _Whole

    def _touched(self, level: _Level) -> tuple[int, int]:
        starts = level.starts
        first = _statement_at(starts, self.same_start)
        last = _statement_at(starts, max(self.changed_end - 1, self.same_start))
        statements = level.block.body
        if first < len(statements) and self.same_start <= starts[first] + len(statements[first].leading_lines):
            first -= 1  # the lines may belong to the statement before
        return min(max(first, 0), len(statements) - 1), min(last, len(statements) - 1)

    def _inner_level(self, level: _Level):
        """The body holding the whole edit, of a statement of `level` that holds it alone."""
        starts = level.starts
        index = _statement_at(starts, self.same_start)
        if index >= len(level.counts) or _statement_at(starts, max(self.changed_end - 1, self.same_start)) != index:
            return None
        statement = level.block.body[index]
        block = getattr(statement, "body", None)
        if not isinstance(statement, _DESCEND) or not isinstance(block, cst.IndentedBlock) or not block.body:
            return None
        counts = self.previous.counts(block)
        after = sum(self.previous.clause_lines(clause) for clause in _clauses_after_body(statement))
        body_start = starts[index + 1] - after - len(block.footer) - sum(counts)
        body_end = body_start + sum(counts)
        if not (body_start <= self.same_start < body_end and self.changed_end <= body_end):
            return None  # the edit touches the statement's own lines or its block's footer
        indent = level.indent + (block.indent if block.indent is not None else self.module.default_indent)
        return _Level(block, body_start, counts, indent), index

    def _parse(self, level: _Level, first: int, last: int):
        """The statements [first, last] of `level` parsed from the new text, with their line
        counts and the block's statements after them; None where the parse must go out."""
        module, block = self.module, level.block
        statements = block.body
        at_top = block is module
        starts = level.starts
        at_end = last == len(statements) - 1
        if at_top and (first < 1 or not _indents_before(module, first)):
            raise _Whole
        if not at_top and at_end and block.footer:
            return None
        begin = starts[first]
        end = len(self.old) if at_top and at_end else starts[last + 1]
        if not at_top and end + self.delta >= len(self.new):
            return None  # the file's last line: whether it ends with a newline is the module's
        fragment_text = "".join(self.new[begin : end + self.delta])
        newline = module.default_newline
        if at_top:
            fragment = parse_unvalidated(fragment_text)
            holder = fragment
        else:  # the default indent first, then a block as indented as this one
            fragment = parse_unvalidated(f"if 1:{newline}{module.default_indent}pass{newline}if 1:{newline}" + fragment_text)
            if len(fragment.body) != 2 or fragment.footer or fragment.header:
                return None
            holder = fragment.body[1].body
            if not isinstance(holder, cst.IndentedBlock) or holder.indent != (level.indent if level.indent != module.default_indent else None):
                return None
        if (fragment.default_indent, fragment.default_newline, fragment.encoding) != (
            module.default_indent, module.default_newline, module.encoding
        ) or not holder.body:
            return None

        parsed = list(holder.body)
        parsed_counts = [_lines(fragment.code_for_node(s)) for s in parsed]
        header = fragment.header if at_top else ()
        if header:  # the first statement's leading lines in the whole file
            parsed[0] = parsed[0].with_changes(leading_lines=(*header, *parsed[0].leading_lines))
            parsed_counts[0] += len(header)
        after = list(statements[last + 1 :])
        after_counts = level.counts[last + 1 :]
        trailing = holder.footer
        footer = None
        if at_top and at_end:
            footer = (fragment.footer, fragment.has_trailing_newline)
        elif at_end:  # the end of an indented block: trailing trivia depends on what follows
            if trailing:
                return None
        else:
            if not fragment.has_trailing_newline:
                return None
            if trailing:  # trailing blank lines and comments: the next statement's
                after[0] = after[0].with_changes(leading_lines=(*trailing, *after[0].leading_lines))
                after_counts = [after_counts[0] + len(trailing), *after_counts[1:]]
        body = (*statements[:first], *parsed, *after)
        counts = [*level.counts[:first], *parsed_counts, *after_counts]
        expected = (starts[-1] - level.start) + self.delta
        if at_top:
            expected = len(self.new) - level.start - len(footer[0] if footer else module.footer)
        if sum(counts) != expected:
            return None  # not the lines we expected: parse further out
        return body, counts, footer

    def _splice(self, chain: list, replaced) -> ParsedText:
        body, counts, footer = replaced
        line_counts = dict(self.previous.line_counts)
        for level, _ in chain:
            line_counts.pop(id(level.block), None)
        node = None
        for depth in range(len(chain) - 1, -1, -1):
            level = chain[depth][0]
            block = level.block
            if node is not None:  # the statement holding the block below, with its new body
                index = chain[depth + 1][1]
                body = (*block.body[:index], node, *block.body[index + 1 :])
                counts = list(level.counts)
                counts[index] += self.delta
            if block is self.module:
                changes = {"body": body}
                if footer is not None:
                    changes.update(footer=footer[0], has_trailing_newline=footer[1])
                new_block = block.with_changes(**changes)
            else:
                new_block = block.with_changes(body=body)
            line_counts[id(new_block)] = (new_block, counts)
            if depth > 0:
                index = chain[depth][1]
                node = chain[depth - 1][0].block.body[index].with_changes(body=new_block)
            else:
                node = new_block
        if len(line_counts) > 256:  # blocks of trees long gone: keep only this tree's chain
            line_counts = {key: value for key, value in line_counts.items() if key not in self.previous.line_counts}
        clauses = self.previous.clause_line_counts  # (the clauses outside the edit are the same nodes)
        clauses = dict(clauses) if len(clauses) <= 256 else {}
        return ParsedText(self.text, node, line_counts, clauses)


def _clauses_after_body(statement: cst.CSTNode) -> list[cst.CSTNode]:
    """What follows a compound statement's body: its `except` clauses, `else` (or `elif`) and
    `finally`, each starting on a line of its own (with the comments before it)."""
    clauses = list(getattr(statement, "handlers", ()))
    for name in ("orelse", "finalbody"):
        clause = getattr(statement, name, None)
        if clause is not None:
            clauses.append(clause)
    return clauses


def _statement_at(starts: list[int], line: int) -> int:
    """The index of the statement holding 0-based `line` (the statement count past the end)."""
    low, high = 0, len(starts) - 1
    while low < high:
        middle = (low + high) // 2
        if starts[middle + 1] <= line:
            low = middle + 1
        else:
            high = middle
    return low


def _indents_before(module: cst.Module, index: int) -> bool:
    """Whether an indented block comes before statement `index`: the file's first one decides
    its default indent, and it must not be in the text parsed again."""
    return any(isinstance(getattr(s, "body", None), cst.IndentedBlock) for s in module.body[:index])
