"""Check parsing/reparse.py against LibCST's whole parse on real files.

For each .py file under DIRECTORY (shuffled by --seed), make a chain of random edits (insert a
line from a small set, delete a line, add a comment to a line); for each edited text that
compiles, reparse it from the previous one and compare with a whole parse: the tree
(`deep_equals`), the generated code and every line count reparse keeps. Prints how many edits
were reparsed, how many fell back to a whole parse, and every difference (exit status 1).

With --compile, also check server/recompile.py: for every edited text, compiling only the
statements the edit touched must give CPython's verdict on the whole text, and the same first
and last line for every statement down `body` chains.

With --index, also check analysis/walk_reuse.py and project/extract/function_reuse.py: the
index of each reparsed text, built by taking the previous text's walk for every statement the
edit did not touch, must be the index a whole walk gives, and its lowering, with the IR of the
functions the edit did not change taken from the previous lowering, a whole lowering's IR.

With --ir, also check analysis/same_code.py: wherever it finds the edit left the code the same
(comments and blank lines between statements), the previous text's IR and its nodes' new
counterparts must be what lowering the new text gives.

    python benchmarks/reparse_fuzz.py /tmp/torchsrc/torch --files 300 --seed 1 [--ir]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import libcst as cst

from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.same_code import node_pairs
from torchrepro_lint.analysis.walk_reuse import index_shape
from torchrepro_lint.pipeline.cache import structural_digest
from torchrepro_lint.parsing.reparse import ParsedText, _lines, reparse
from torchrepro_lint.parsing.lines import physical_lines
from torchrepro_lint.parsing.source import ParseFailure, SourceFile
from torchrepro_lint.project.extract.function_reuse import function_reuse
from torchrepro_lint.project.extract.lowering import Lowering
from torchrepro_lint.server import recompile

INSERTED = [
    "x = 1\n", "    y = 2\n", "        z = 3\n", "# note\n", "    # indented note\n", "\n",
    "def g():\n    return 1\n", "class K:\n    pass\n", "if a:\n    b = 1\nelse:\n    b = 2\n", "@dec\n",
    # builtins bound in a module or a function: what the calls around them resolve to changes
    "len = print\n", "    print = len\n",
]


def edited(rng: random.Random, text: str) -> str:
    lines = physical_lines(text)
    at = rng.randrange(len(lines) + 1)
    choice = rng.random()
    if choice < 0.4:
        lines.insert(at, rng.choice(INSERTED))
    elif choice < 0.7 and at < len(lines):
        del lines[at]
    elif at < len(lines) and not lines[at].rstrip().endswith("\\"):
        lines[at] = lines[at].rstrip("\r\n") + "  # c\n"
    return "".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--edits", type=int, default=6, help="edits per file, each from the last")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ir", action="store_true", help="also check same_code.py's IR reuse")
    parser.add_argument("--compile", action="store_true", help="also check recompile.py")
    parser.add_argument("--index", action="store_true", help="also check walk_reuse.py and function_reuse.py")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    files = sorted(args.directory.rglob("*.py"))
    rng.shuffle(files)
    counts = {"edits": 0, "reparsed": 0, "whole": 0, "different": 0}
    if args.ir:
        counts.update({"same code": 0, "other code": 0, "IR different": 0})
    if args.compile:
        counts.update({"compiled in part": 0, "compile different": 0})
    if args.index:
        counts.update({"statements taken": 0, "index different": 0, "functions taken": 0, "statements of edited functions taken": 0, "top levels taken": 0, "top levels lowered again": 0, "lowering different": 0})
    for path in files[: args.files]:
        try:
            text = path.read_text(encoding="utf-8")
            previous = ParsedText(text, cst.parse_module(text))
        except (UnicodeDecodeError, cst.ParserSyntaxError, RecursionError):
            continue
        compiled = recompile.compile_text(path, previous.text) if args.compile else None
        for _ in range(args.edits):
            new_text = edited(rng, previous.text)
            if args.compile:
                compiled = _check_compile(path, compiled, new_text, counts)
            try:
                compile(new_text, str(path), "exec")
                whole = cst.parse_module(new_text)
            except (SyntaxError, ValueError, cst.ParserSyntaxError, RecursionError):
                continue
            counts["edits"] += 1
            got = reparse(previous, new_text)
            if got is None:
                counts["whole"] += 1
                got = ParsedText(new_text, whole)
                if args.ir and not _same_ir(path, previous, got, counts):
                    print(f"IR DIFFERENT: {path}", file=sys.stderr)
                previous = got
                continue
            counts["reparsed"] += 1
            # (LibCST itself does not give back every text: compare with its own code)
            same = got.module.deep_equals(whole) and got.module.code == whole.code and all(
                counts_ == [_lines(got.module.code_for_node(s)) for s in node.body]
                for node, counts_ in got.line_counts.values()
            )
            if not same:
                counts["different"] += 1
                print(f"DIFFERENT: {path}", file=sys.stderr)
                got = ParsedText(new_text, whole)
            elif args.index and not _same_index(path, previous, got, counts):
                print(f"INDEX DIFFERENT: {path}", file=sys.stderr)
            if args.ir and not _same_ir(path, previous, got, counts):
                print(f"IR DIFFERENT: {path}", file=sys.stderr)
            previous = got
    print(", ".join(f"{key} {value}" for key, value in counts.items()))
    different = ("different", "IR different", "compile different", "index different", "lowering different")
    return 1 if any(counts.get(key) for key in different) else 0


class _Edited(SourceFile):
    """A text whose tree shares statements with `before`'s (as the language server's buffers)."""

    keeps_walk = True

    def __init__(self, path: Path, parsed: ParsedText, before: ParsedText | None) -> None:
        super().__init__(path, parsed.text)
        self.__dict__["module"] = parsed.module
        self.parsed, self.before = parsed, before

    def walk_before(self):
        return self.before.walk if self.before is not None else None

    def keep_walk(self, walk) -> None:
        self.parsed.walk = walk


_LOWERED: dict = {}  # id(ParsedText) -> (the ParsedText, its Lowering, its IR)


def _same_index(path: Path, previous: ParsedText, got: ParsedText, counts: dict) -> bool:
    if previous.walk is None or id(previous) not in _LOWERED:  # (the file's first text: walked whole, and recorded)
        lowering = Lowering(ModuleIndex(_Edited(path, previous, None), "pkg"))
        _LOWERED.clear()
        _LOWERED[id(previous)] = (previous, lowering, lowering.build())
    taken = ModuleIndex(_Edited(path, got, previous), "pkg")
    counts["statements taken"] += got.walk.taken
    whole = SourceFile(path, got.text)
    whole.__dict__["module"] = got.module
    whole_index = ModuleIndex(whole, "pkg")
    same = index_shape(taken) == index_shape(whole_index)
    counts["index different"] += not same
    _, old_lowering, old_ir = _LOWERED.pop(id(previous))
    lowering = Lowering(taken)
    lowering.reuse = function_reuse(taken, previous.module, old_ir, old_lowering.nodes, old_lowering.layout, previous.text)
    module_ir = lowering.build()
    _LOWERED[id(got)] = (got, lowering, module_ir)
    counts["functions taken"] += len(lowering.reuse.paths) if lowering.reuse is not None else 0
    counts["statements of edited functions taken"] += lowering.statements_taken
    counts["top levels taken"] += lowering.reuse is not None and lowering.reuse.top
    counts["top levels lowered again"] += lowering.reuse is not None and not lowering.reuse.top
    whole_lowering = Lowering(whole_index)
    lowered_same = structural_digest(module_ir) == structural_digest(whole_lowering.build()) and list(
        map(id, lowering.nodes)
    ) == list(map(id, whole_lowering.nodes))
    counts["lowering different"] += not lowered_same
    return same and lowered_same


def _check_compile(path: Path, previous, text: str, counts: dict):
    """The next `previous` (the last text that compiled, as the session keeps it)."""
    whole = recompile.compile_text(path, text)
    got = recompile.compile_text(path, text, previous)
    if isinstance(whole, ParseFailure) or isinstance(got, ParseFailure):
        same = isinstance(whole, ParseFailure) and isinstance(got, ParseFailure) and (
            (whole.message, whole.row, whole.column) == (got.message, got.row, got.column)
        )
        found = previous
    else:
        counts["compiled in part"] += previous is not None and recompile._recompiled(path, previous, text) is not None
        firsts = [recompile._first_line(s) + o for s, o in zip(got.tree.body, got.offsets)]
        same = firsts == [recompile._first_line(s) for s in whole.tree.body] and [type(s) for s in got.tree.body] == [
            type(s) for s in whole.tree.body
        ] and recompile.statement_lines(got) == recompile.statement_lines(whole)
        found = got
    if not same:
        counts["compile different"] += 1
        print(f"COMPILE DIFFERENT: {path}", file=sys.stderr)
        return whole if not isinstance(whole, ParseFailure) else previous
    return found


def _lowered(path: Path, parsed: ParsedText):
    source = SourceFile(path, parsed.text)
    source.__dict__["module"] = parsed.module  # (the cached property: lower this tree)
    lowering = Lowering(ModuleIndex(source))
    return lowering.build(), lowering.nodes


def _same_ir(path: Path, old: ParsedText, new: ParsedText, counts: dict) -> bool:
    pairs = node_pairs(old.module, new.module)
    if pairs is None:
        counts["other code"] += 1
        return True
    counts["same code"] += 1
    old_ir, old_nodes = _lowered(path, old)
    new_ir, new_nodes = _lowered(path, new)
    mapped = [pairs.get(id(node), node) for node in old_nodes]
    same = structural_digest(old_ir) == structural_digest(new_ir) and len(mapped) == len(new_nodes) and all(
        a is b for a, b in zip(mapped, new_nodes)
    )
    counts["IR different"] += not same
    return same


if __name__ == "__main__":
    sys.exit(main())
