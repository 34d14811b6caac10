"""One module of the project (`ProjectModule`) and a name defined in one (`Symbol`).

A module's IR is always at hand (lowered now, or from the cache); its LibCST tree, index and IR
nodes are built on first use, so a module whose results are cached is never parsed. Every read
of a module is recorded (reads.py), for the cached results that depend on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.parsing.source import SourceFile
from torchrepro_lint.project import ir
from torchrepro_lint.project.extract.function_reuse import RefLayout
from torchrepro_lint.project.extract.lowering import ExpressionTexts, Lowering
from torchrepro_lint.project.reads import IR_CODE, IR_FUNCTION, IR_TOP, RECORDING


@dataclass(eq=False)
class ProjectModule:
    """One module of the project. Its IR is always there (lowered now, or from the cache);
    its LibCST tree, index and IR nodes are built on first use, so a module whose results are
    cached is never parsed."""

    path: Path  # resolved absolute path
    name: str  # dotted module name by package structure
    package: str | None
    search_root: Path  # the directory Python would have on sys.path for this module
    source: SourceFile
    _ir: ir.ModuleIR = field(repr=False)
    linted: bool  # among the files the user asked to lint (findings are reported only there)
    helpers: dict = field(default_factory=dict, repr=False)
    _index: ModuleIndex | None = field(default=None, repr=False)
    _nodes: list | None = field(default=None, repr=False)
    store: object | None = field(default=None, repr=False)  # the project's `lowered` (summaries.py)
    _table: ir.ModuleTable | None = field(default=None, repr=False)
    # The language server: texts its lowering generated, for the next edit's (ExpressionTexts),
    # and where the top level's and each function's refs are in `_nodes` (function_reuse.py)
    expression_texts: ExpressionTexts | None = field(default=None, repr=False)
    layout: RefLayout | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"<module {self.path}>"

    def __reduce__(self):
        raise TypeError("a ProjectModule is pickled by reference (see cache.py)")

    @property
    def ir(self) -> ir.ModuleIR:
        if RECORDING:
            RECORDING[-1].add(("ir", self.path))
        return self._ir

    @property
    def top(self) -> tuple[ir.Stmt, ...]:
        """The IR's top-level statements (a read of them alone)."""
        if RECORDING:
            RECORDING[-1].add((IR_TOP, self.path))
        return self._ir.top

    @property
    def table(self) -> ir.ModuleTable:
        """What the IR names: its functions (not their bodies), classes, aliases, imports (read
        with the top level: see IR_TOP)."""
        if RECORDING:
            RECORDING[-1].add((IR_TOP, self.path))
        if self._table is None:
            self._table = ir.ModuleTable.of(self._ir)
        return self._table

    def function(self, path: str) -> ir.FunctionIR | None:
        """The IR of one function (a read of it alone: of its absence where there is none)."""
        if RECORDING:
            RECORDING[-1].add((IR_FUNCTION, (self.path, path)))
        return self._ir.functions.get(path)

    def code(self, path: str) -> ir.FunctionIR | None:
        """The IR of one function, read without its refs (see IR_CODE): for what it does, never
        for where (no occurrence may be made of a ref of what this returns)."""
        if RECORDING:
            RECORDING[-1].add((IR_CODE, (self.path, path)))
        return self._ir.functions.get(path)

    @property
    def index(self) -> ModuleIndex:
        if RECORDING:
            RECORDING[-1].add(("content", self.path))
        if self._index is None:
            self._index = ModuleIndex(self.source, self.package)
        return self._index

    @property
    def nodes(self) -> list[cst.CSTNode]:
        """The CST nodes the IR's refs point at (lowering is deterministic, so the same list)."""
        if RECORDING:
            RECORDING[-1].add(("content", self.path))
        if self._nodes is None:
            lowering = Lowering(self.index, self.helpers)
            lowering.build()
            self._nodes = lowering.nodes
        elif self._index is None:
            self.index  # (dropped, drop_index): its parent map places findings at these nodes
        return self._nodes

    @property
    def has_tree(self) -> bool:
        return self._index is not None or self.source.has_tree

    def drop_index(self) -> None:
        """Keep the tree, forget its index (and what was derived from it): a tree kept for later
        rules is held with about a fifth less memory (77 of 347 MB for 9.3 MB of torch's
        source), and its index is built again from the same nodes on first use (about a sixth
        of the time of a parse). The IR's node table stays: it points into the same tree."""
        if self._index is not None:
            self._index.forget_derived()
            self._index = None
            self.source.forget_positions()

    def release_tree(self) -> None:
        if self._index is not None:
            self._index.forget_derived()
        self._index = self._nodes = None
        self.source.drop_tree()

    @property
    def text(self) -> str:
        if RECORDING:
            RECORDING[-1].add(("content", self.path))
        return self.source.text

    @property
    def is_dunder_main(self) -> bool:
        return self.path.name == "__main__.py"


@dataclass(frozen=True)
class Symbol:
    module: ProjectModule
    path: str  # "" for the module itself, "f", "C", "C.m"

    @property
    def function(self) -> ir.FunctionIR | None:
        return self.module.function(self.path)

    @property
    def is_function(self) -> bool:
        return self.path in self.module.table.functions

    @property
    def code(self) -> ir.FunctionIR | None:
        """The function's IR for what it does, not where (ProjectModule.code)."""
        return self.module.code(self.path)

    @property
    def klass(self) -> ir.ClassIR | None:
        return self.module.table.classes.get(self.path)
