"""Code that runs only while deterministic mode is on, by the program's own test of it.

Libraries that pick a kernel by the mode (`if torch.are_deterministic_algorithms_enabled():
out.index_add_(...)` / `else: out.scatter_add_(...)`) run the first branch only with the mode
on, where the op's deterministic implementation is used: nothing there varies run to run. The
other branch is the one that runs without the mode, and stays reported.
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.module_index import ModuleIndex

MODE_QUERY = "torch.are_deterministic_algorithms_enabled"


def _asks_mode(index: ModuleIndex, test: cst.BaseExpression) -> bool | None:
    """True: the test holds exactly when the mode is on; False: exactly when it is off; None: neither."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        found = _asks_mode(index, test.expression)
        return None if found is None else not found
    if isinstance(test, cst.Call) and not test.args and isinstance(test.func, (cst.Name, cst.Attribute)):
        if index.resolve(test.func, test) == MODE_QUERY:
            return True
    return None


def runs_only_in_deterministic_mode(index: ModuleIndex, node: cst.CSTNode) -> bool:
    """`node` is in the branch of an `if` on the mode query that runs only with the mode on."""
    child = node
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
        if isinstance(ancestor, cst.If):
            on = _asks_mode(index, ancestor.test)
            if on is True and child is ancestor.body:
                return True
            if on is False and child is ancestor.orelse:
                return True
        child = ancestor
    return False
