"""One Python source file: read and decoded once, parsed once, positions on demand."""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from array import array
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from torchrepro_lint import memory
from torchrepro_lint.parsing import data_literals
from torchrepro_lint.parsing.lines import physical_lines

if TYPE_CHECKING:  # LibCST is imported when a file is parsed: a cached run never needs it
    import libcst as cst

    from torchrepro_lint.parsing.positions import StatementSpans


class SourceError(Exception):
    """A file that cannot be linted: unreadable, undecodable. The message names the problem."""


class ParseFailure(Exception):
    """A file that does not parse (reported as TRP000): CPython's message and 1-based position."""

    def __init__(self, message: str, row: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message, self.row, self.column = message, row, column


def read_source(path: Path) -> str:
    """Read a file honouring its PEP 263 coding cookie, with universal newlines kept as-is."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SourceError(f"cannot read file: {exc.strerror or exc}") from None
    return decode_source(raw)


def source_encoding(path: Path) -> str:
    """The encoding a file declares (PEP 263), for writing it back the way it was."""
    try:
        with path.open("rb") as handle:
            return tokenize.detect_encoding(handle.readline)[0]
    except (OSError, SyntaxError):
        return "utf-8"


def decode_source(raw: bytes) -> str:
    if b"\x00" in raw[:8192]:
        raise SourceError("not a text file (contains NUL bytes)")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        if "missing encoding declaration" in str(exc):
            encoding = "utf-8"  # no cookie, and not UTF-8: the decode below says where it fails
        else:
            raise SourceError(f"bad encoding declaration: {exc}") from None
    try:
        return raw.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise SourceError(f"cannot decode as {encoding}: {exc}") from None


NOQA_COMMENT = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]*(?:\s*,\s*[A-Z]+[0-9]*)*))?", re.IGNORECASE)
_FILE_NOQA = re.compile(
    r"^\s*#\s*torchrepro-lint:\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]*(?:\s*,\s*[A-Z]+[0-9]*)*))?\s*$",
    re.IGNORECASE | re.MULTILINE,
)

PARSES = [0]  # LibCST parses in this process (reported by --statistics)

ALL_CODES = ()  # marker: a bare noqa suppresses every code
UNSUPPRESSIBLE = frozenset({"TRP000"})  # a file that does not parse is not linted: no noqa reaches it


def noqa_codes(match: re.Match) -> tuple[str, ...]:
    codes = match.group("codes")
    if not codes:
        return ALL_CODES
    return tuple(c.strip().upper() for c in codes.split(","))


def suppresses(code: str, codes: tuple[str, ...]) -> bool:
    # A listed code suppresses itself and every code it prefixes (`TRP2` covers TRP201..TRP206).
    return codes == ALL_CODES or any(code.startswith(c) for c in codes)


def string_last_rows(text: str) -> dict[int, int]:
    """Row -> the last row of the multi-line string that row is part of (all rows but the last).

    A comment cannot go on a line that ends inside a string, so a noqa for a finding there is
    read on the string's last line, as flake8 reads it."""
    last_rows: dict[int, int] = {}
    opened: list[int] = []  # f-strings are tokenized in pieces from Python 3.12
    fstring_start, fstring_end = getattr(tokenize, "FSTRING_START", None), getattr(tokenize, "FSTRING_END", None)
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == fstring_start:
                opened.append(token.start[0])
                continue
            if token.type == tokenize.STRING:
                first = token.start[0]
            elif token.type == fstring_end and opened:
                first = opened.pop()
            else:
                continue
            for row in range(first, token.end[0]):
                last_rows[row] = token.end[0]
    except (tokenize.TokenError, SyntaxError):
        pass  # code that does not tokenize: the rows read so far
    return last_rows


# CPython's messages for text that no Python version accepts and LibCST's grammar lets through
# (checked against LibCST 1.9 and CPython 3.9-3.13): limits of CPython's tokenizer, which LibCST
# has not (its native parser overflows its stack on 5,000 nested parentheses), string literals
# that do not decode, and one grammar rule LibCST does not have.
NEVER_VALID = (
    "too many nested parentheses",
    "too many levels of indentation",
    "(unicode error)",
    "bytes can only contain ASCII",
    "iterable unpacking cannot be used in comprehension",
)


def newer_syntax(text: str, error: SyntaxError) -> cst.Module | None:
    """LibCST's tree of a text CPython refused with `error`, or None where no Python accepts it.

    LibCST's grammar follows the newest Python whichever runs the linter: its native parser reads
    3.12's `type` aliases and generics (PEP 695) and f-strings (PEP 701), 3.13's type parameter
    defaults and 3.14's `except A, B:` (PEP 758) under 3.9, and refuses what no version accepts
    but for NEVER_VALID (its `PartialParserConfig(python_version=...)` changes nothing there). So
    its acceptance is the verdict on code newer than the running Python: a project's code is
    linted the same under its own Python and under the older one pre-commit or CI runs.
    Asked only of CPython's failures."""
    if error.msg.startswith(NEVER_VALID):
        return None
    try:
        return parse_unvalidated(text)
    except Exception:  # (LibCST's ParserSyntaxError, anything its native parser raises, RecursionError)
        return None


def parse_unvalidated(text: str) -> cst.Module:
    """`libcst.parse_module` without validating each node as it is built.

    LibCST validates every node in its constructor (`CSTNode.__post_init__`), which guards
    trees built by hand; the parser's own nodes come from code that CPython has just compiled,
    and the checks cost about 13% of the parse. LibCST's own comment there suggests skipping
    them when parsing. Fixes build nodes outside this call, so they are still validated.
    """
    import libcst as cst
    from libcst._nodes.base import CSTNode

    from torchrepro_lint.parsing.node_hash import use_identity_hash

    use_identity_hash()
    validate = CSTNode.__dict__["__post_init__"]
    CSTNode.__post_init__ = _no_validation
    try:
        return cst.parse_module(text)
    finally:
        CSTNode.__post_init__ = validate


def _no_validation(node) -> None:
    pass


# Resolved paths, remembered for the process: resolving costs a stat per path component, and
# the language server resolved every file of the project several times per edit (2,207 calls,
# about a tenth of an edit's time on pytorch-image-models). Cleared when full.
_RESOLVED: dict = {}
_RESOLVED_KEPT = 65536


def resolved(path: Path) -> Path:
    """`path.resolve()`; a relative path is remembered with the working directory it was in."""
    key = (path, None if path.is_absolute() else os.getcwd())
    found = _RESOLVED.get(key)
    if found is None:
        if len(_RESOLVED) >= _RESOLVED_KEPT:
            _RESOLVED.clear()
        found = _RESOLVED[key] = path.resolve()
    return found


@dataclass
class SourceFile:
    path: Path  # as given or discovered; used for display
    text: str
    # CPython's tree (statement lines for spans): the language server's, or made when a finding
    # is placed in a text parsed without `_statement_bounds`; and, set by ModuleIndex, the
    # child -> parent map of the LibCST tree.
    syntax_tree: ast.Module | None = field(default=None, repr=False)
    # Lines to add to each top-level statement's line numbers in `syntax_tree` (None: none), for
    # a tree the language server compiled in part (server/recompile.py)
    syntax_offsets: tuple[int, ...] | None = field(default=None, repr=False)
    parents: dict | None = field(default=None, repr=False)
    _spans: StatementSpans | None = field(default=None, repr=False)
    _compiles: bool = field(default=False, repr=False)  # CPython's parser accepted it (or LibCST, below)
    # CPython refused the text and LibCST parsed it (newer syntax than the running Python's,
    # `newer_syntax`): LibCST's tree gives the statements' lines that place findings
    _newer_syntax: bool = field(default=False, repr=False)
    # Where each top-level statement is (positions.statement_bounds), kept from the first parse
    _statement_bounds: array | None = field(default=None, repr=False)
    # The insides of large constant tables, which LibCST reads as blanks (data_literals.py):
    # found once, from CPython's tree, so every parse of this text gives the same tree
    _blanks: tuple | None = field(default=None, repr=False)

    # Whether ModuleIndex records its walk of this text's tree for the next text's index to
    # take from (the language server's edited buffers: analysis/walk_reuse.py)
    keeps_walk = False

    def walk_before(self):
        """The walk record of an earlier tree whose untouched statements this tree shares."""
        return None

    def keep_walk(self, walk) -> None:
        """Keep this tree's walk record for the next text (where `keeps_walk`)."""

    @cached_property
    def resolved_path(self) -> Path:
        """The absolute path with symlinks resolved, which identifies the module."""
        return resolved(self.path)

    @cached_property
    def module(self) -> cst.Module:
        """Parse with LibCST, the first time behind CPython's own parser (about 10% of LibCST's
        cost on torch's source; a tree dropped within budget is parsed again without it).

        CPython gives precise syntax-error positions, and it refuses pathologically deep code
        (an 8000-term expression) that would crash LibCST's native parser outright. Code it
        refuses that LibCST reads (newer syntax than the running Python's) is linted all the same.
        Raises ParseFailure.
        """
        if not self._compiles:
            # Not kept: of CPython's tree, placing findings needs only where each top-level
            # statement is (positions.py compiles one alone to go into its block). With the one
            # future import that changes parsing, the whole text is compiled then instead.
            from torchrepro_lint.parsing.positions import statement_bounds

            tree = self._compile()
            if tree is None:  # newer syntax: LibCST parsed it to say so (`_compile`)
                return self.__dict__["module"]
            if "barry_as_FLUFL" not in self.text:
                self._statement_bounds = statement_bounds(tree)
            if self._blanks is None:
                self._blanks = data_literals.blanks(self.text, tree)
            del tree
            self._compiles = True
        return self._parse()

    def _parse(self) -> cst.Module:
        import libcst as cst

        PARSES[0] += 1
        memory.churned(len(self.text))
        if self._blanks is None:  # (compiled elsewhere: the language server's buffers)
            self._blanks = data_literals.blanks(self.text, self._numbered_syntax_tree())
        try:
            return parse_unvalidated(data_literals.blanked_text(self.text, self._blanks))
        except cst.ParserSyntaxError as error:
            first = error.message.strip().splitlines()[0] if error.message.strip() else "parser error"
            raise ParseFailure(
                f"LibCST cannot parse this file ({first}); it was not checked", error.raw_line, error.raw_column + 1
            ) from None
        except RecursionError:
            raise ParseFailure("file is too deeply nested to parse") from None
        finally:
            memory.parsed(len(self.text))

    def _numbered_syntax_tree(self) -> ast.Module | None:
        """CPython's tree of the text where its line numbers are the text's: compiled whole, or
        in part (server/recompile.py) with no statement moved."""
        offsets = self.syntax_offsets
        top, nested = getattr(offsets, "top", offsets), getattr(offsets, "nested", None)
        return self.syntax_tree if not any(top or ()) and not nested else None

    def _compile(self) -> ast.Module | None:
        """CPython's tree of the text; None where CPython refuses it and LibCST parses it (newer
        syntax than the running Python's: `newer_syntax`), whose tree is then this file's
        `module`. Raises ParseFailure, with CPython's message and position, where neither does."""
        try:
            return compile(self.text, str(self.path), "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError as error:
            failure = ParseFailure(f"file does not parse: {error.msg}", error.lineno or 1, max(error.offset or 1, 1))
            if error.msg.startswith(NEVER_VALID):
                raise failure from None
            memory.churned(len(self.text))
            try:
                module = newer_syntax(self.text, error)
            finally:
                memory.parsed(len(self.text))
            if module is None:
                raise failure from None
            PARSES[0] += 1  # (a file parsed; a failed try is not counted, as before)
        except (RecursionError, MemoryError, ValueError):
            raise ParseFailure("file is too deeply nested to parse") from None
        self.__dict__["module"] = module  # (the cached property's place: not parsed again)
        self._compiles = self._newer_syntax = True
        return None

    @property
    def has_tree(self) -> bool:
        """Whether LibCST's tree is parsed (and held)."""
        return "module" in self.__dict__

    def drop_tree(self) -> None:
        """Forget the parsed tree (memory stays bounded on large projects); parsed again on use."""
        self.__dict__.pop("module", None)
        self.forget_positions()

    def forget_positions(self) -> None:
        """Forget what places findings (CPython's tree, the parent map): made again on use."""
        self.syntax_tree = self.syntax_offsets = self.parents = self._spans = None

    def holds_blank(self, first_row: int, last_row: int) -> bool:
        """Whether these rows meet a constant table LibCST read as a blank: generated code of a
        node there would lose the table (a fix must not rewrite it)."""
        rows = data_literals.rows_of(self.text, self._blanks or ())
        return any(first <= last_row and first_row <= last for first, last in rows)

    @cached_property
    def lines(self) -> list[str]:
        """The physical lines, without their endings (row N is `lines[N - 1]`)."""
        return [line.rstrip("\r\n") for line in physical_lines(self.text)]

    def span(self, node: cst.CSTNode | None) -> tuple[int, int, int, int]:
        """1-based (row, column, end_row, end_column) of a node; line 1 for the whole file."""
        if node is None:
            return (1, 1, 1, 1)
        if self._spans is None:
            from torchrepro_lint.parsing.positions import StatementSpans

            tree = self.module
            if self._newer_syntax:  # no CPython tree: LibCST's lines place findings
                self._spans = StatementSpans(self.text, tree, None, self.parents, tree_lines=True)
                return self._spans.span(node)
            if self.syntax_tree is None and self._statement_bounds is None:
                self.syntax_tree, self.syntax_offsets = self._compile(), None
            bounds = self._statement_bounds
            self._spans = StatementSpans(self.text, tree, self.syntax_tree, self.parents, self.syntax_offsets, bounds)
        return self._spans.span(node)

    def is_suppressed(self, code: str, row: int) -> bool:
        """`# noqa[: CODES]` on the reported line (or, for a line inside a multi-line string, on the
        string's last line), or `# torchrepro-lint: noqa[: CODES]` anywhere."""
        if "noqa" not in self.text:
            return False
        for match in _FILE_NOQA.finditer(self.text):
            if suppresses(code, noqa_codes(match)):
                return True
        if not any(suppresses(code, codes) for codes in self._noqa_codes):
            return False  # (no tokenizing for the string rows: 160 ms an edit of torch's functional.py)
        for noqa_row in (row, self._string_last_rows.get(row)):
            if noqa_row is not None and 1 <= noqa_row <= len(self.lines):
                match = NOQA_COMMENT.search(self.lines[noqa_row - 1])
                if match and suppresses(code, noqa_codes(match)):
                    return True
        return False

    @cached_property
    def _noqa_codes(self) -> frozenset[tuple[str, ...]]:
        """The codes of every `# noqa` in the text (some may sit in strings: a superset)."""
        return frozenset(noqa_codes(match) for match in NOQA_COMMENT.finditer(self.text))

    @cached_property
    def _string_last_rows(self) -> dict[int, int]:
        if self._newer_syntax:  # (this Python's tokens are not the strings LibCST read)
            from torchrepro_lint.parsing.positions import string_last_rows_of

            return string_last_rows_of(self.module)
        return string_last_rows(self.text)
