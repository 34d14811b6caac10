"""Code that runs only while a condition holds, by the code's own `if` on it.

One walk serves each gate: `runs_only_when(index, node, decides)` where `decides(test)` says
whether an `if` test holds exactly when the condition does (True), exactly when it does not
(False), or neither (None). `node` is gated when it is in the arm that runs only with the
condition, or after an `if` whose other arm leaves the function (`return` / `raise`), in the
same block or one around it, within its function.

- **Evaluation mode** (`self.training` False): models return their losses early in training and
  build the inference output only otherwise (`if self.training: return losses` ... `else:
  return F.interpolate(logits, ...)`); that output is never backpropagated. Only the plain test
  `self.training` counts: under `if self.training and x:` the other arm also runs in training.
- **Deterministic mode on**: libraries pick a kernel by the mode (`if
  torch.are_deterministic_algorithms_enabled(): out.index_add_(...)` / `else:
  out.scatter_add_(...)`); the first arm runs the op's deterministic implementation.
"""

from __future__ import annotations

from typing import Callable

import libcst as cst

from torchrepro_lint.analysis.module_index import ModuleIndex

Decides = Callable[[cst.BaseExpression], "bool | None"]
MODE_QUERY = "torch.are_deterministic_algorithms_enabled"


def runs_only_when(index: ModuleIndex, node: cst.CSTNode, decides: Decides) -> bool:
    child = node
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
        if isinstance(ancestor, cst.If):
            holds = _decided(decides, ancestor.test)
            if holds is True and child is ancestor.body:
                return True
            if holds is False and child is ancestor.orelse:  # `else:` or `elif`
                return True
        if isinstance(ancestor, cst.IndentedBlock) and _after_leaving_arm(ancestor, child, decides):
            return True
        child = ancestor
    return False


def runs_only_in_evaluation(index: ModuleIndex, node: cst.CSTNode) -> bool:
    """In a method's code that runs only when `self.training` is False."""
    return runs_only_when(index, node, lambda test: False if _is_training_test(test) else None)


def runs_only_in_deterministic_mode(index: ModuleIndex, node: cst.CSTNode) -> bool:
    """In code that runs only with deterministic mode on, by the code's own test of it."""
    return runs_only_when(index, node, lambda test: True if _asks_mode(index, test) else None)


def _decided(decides: Decides, test: cst.BaseExpression) -> bool | None:
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _decided(decides, test.expression)
        return None if inner is None else not inner
    return decides(test)


def _after_leaving_arm(block: cst.IndentedBlock, statement: cst.CSTNode, decides: Decides) -> bool:
    """An earlier `if` of the block leaves the function in the arm where the condition fails:
    `if self.training: return losses` (evaluation), `if not <mode query>: return` (mode on)."""
    for earlier in block.body:
        if earlier is statement:
            return False
        if isinstance(earlier, cst.If):
            holds = _decided(decides, earlier.test)
            if holds is False and _leaves(earlier.body):
                return True
    return False


def _leaves(block: cst.BaseSuite) -> bool:
    """The block ends by leaving the function (`return` / `raise` as its last statement)."""
    last = block.body[-1] if isinstance(block, cst.IndentedBlock) and block.body else block
    return isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and any(
        isinstance(small, (cst.Return, cst.Raise)) for small in last.body
    )


def _is_training_test(test: cst.BaseExpression) -> bool:
    """`self.training`, exactly."""
    return (
        isinstance(test, cst.Attribute)
        and isinstance(test.value, cst.Name)
        and test.value.value == "self"
        and test.attr.value == "training"
    )


def _asks_mode(index: ModuleIndex, test: cst.BaseExpression) -> bool:
    return (
        isinstance(test, cst.Call)
        and not test.args
        and isinstance(test.func, (cst.Name, cst.Attribute))
        and index.resolve(test.func, test) == MODE_QUERY
    )
