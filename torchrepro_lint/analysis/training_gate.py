"""Code that an nn.Module runs only in evaluation mode: where `self.training` is False.

Models often return their losses early in training and build the inference output only
otherwise (`if self.training: return losses` ... `else: return F.interpolate(logits, ...)`).
That output is never backpropagated, so a backward-only nondeterministic op there never runs
its backward. Only the plain test `self.training` counts: under `if self.training and x:` the
other branch also runs in training.
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.module_index import ModuleIndex


def is_training_test(test: cst.BaseExpression) -> bool:
    """`self.training`, exactly."""
    return (
        isinstance(test, cst.Attribute)
        and isinstance(test.value, cst.Name)
        and test.value.value == "self"
        and test.attr.value == "training"
    )


def _is_not_training_test(test: cst.BaseExpression) -> bool:
    return isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) and is_training_test(test.expression)


def _leaves(block: cst.BaseSuite) -> bool:
    """The block ends by leaving the function (`return` / `raise` as its last statement)."""
    body = block.body if isinstance(block, cst.IndentedBlock) else ()
    last = body[-1] if body else None
    if isinstance(block, cst.SimpleStatementSuite):
        last = block
    return isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and any(
        isinstance(small, (cst.Return, cst.Raise)) for small in last.body
    )


def runs_only_in_evaluation(index: ModuleIndex, node: cst.CSTNode) -> bool:
    """Whether `node` is in a method's code that runs only when `self.training` is False: the
    `else` (or `elif`) of `if self.training:`, the body of `if not self.training:`, or after an
    `if self.training: ... return` (whatever its `else`), in the same block or one around it."""
    child = node
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
        if isinstance(ancestor, cst.If):
            if child is ancestor.orelse and is_training_test(ancestor.test):  # `else:` or `elif`
                return True
            if child is ancestor.body and _is_not_training_test(ancestor.test):
                return True
        if isinstance(ancestor, cst.IndentedBlock) and _after_training_return(ancestor, child):
            return True
        child = ancestor
    return False


def _after_training_return(block: cst.IndentedBlock, statement: cst.CSTNode) -> bool:
    for earlier in block.body:
        if earlier is statement:
            return False
        if isinstance(earlier, cst.If) and is_training_test(earlier.test) and _leaves(earlier.body):
            return True
    return False
