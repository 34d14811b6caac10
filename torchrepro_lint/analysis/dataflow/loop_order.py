"""What a loop does with the order of what it iterates, for OrderFlow (order_flow.py).

The questions a `for` or `while` loop raises when an order-unstable collection reaches it: does
it keep the first match (a `return` or `break` on an element), build an index map in iteration
order (`d[x] = len(d)`), drain a worklist whole (`while todo: todo.pop()`), fill a list that is
fresh each turn, or use enumerate's counter only in log messages?
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import Flow
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.names import dotted
from torchrepro_lint.analysis.syntax import method_name, self_attribute, subtree

LOG_CALLS = frozenset(
    "print debug info warning warn error exception critical log write set_description set_postfix".split()
)


class LoopOrder:
    """OrderFlow's questions about loops (order_flow.OrderFlow derives from this class): they read
    the module's index and flow."""

    index: ModuleIndex
    flow: Flow

    def _counter_only(self, call: cst.Call) -> bool:
        """`for i, x in enumerate(c):` where `i` only feeds log messages (or nothing)."""
        loop = self.flow.parents.get(call)
        if not (isinstance(loop, cst.For) and loop.iter is call and isinstance(loop.target, cst.Tuple)):
            return False
        first = loop.target.elements[0].value if loop.target.elements else None
        if not isinstance(first, cst.Name):
            return False
        for node in self._body_nodes(loop.body):
            if isinstance(node, cst.Name) and node.value == first.value and self.flow.is_load(node):
                if not self._in_log_call(node, loop):
                    return False
        return True

    def _in_log_call(self, node: cst.CSTNode, stop: cst.CSTNode) -> bool:
        for ancestor in self.index.ancestors(node):
            if ancestor is stop:
                return False
            if isinstance(ancestor, cst.Call):
                func = ancestor.func
                name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
                if name in LOG_CALLS:
                    return True
        return False

    def _drained(self, call: cst.Call, worklist: cst.CSTNode) -> bool:
        """`while todo: handle(todo.pop())`: a worklist emptied whole, each item handled by a body
        that keeps no order of its own (nothing appended but more work, no break or return):
        every order handles the same items, as a `for` loop over them would."""
        if not isinstance(worklist, cst.Name):
            return False
        loop = self._innermost_loop(call)
        if not isinstance(loop, cst.While) or not _tests_nonempty(loop.test, worklist.value):
            return False
        for node in self._body_nodes(loop.body):
            if isinstance(node, (cst.Break, cst.Return, cst.Yield)) and self._innermost_loop(node) is loop:
                return False
            if isinstance(node, cst.Call) and method_name(node) in ("append", "extend", "insert"):
                if dotted(node.func.value) != worklist.value:
                    return False
            if isinstance(node, cst.AugAssign) or isinstance(node, cst.Assign) and self._counter_index(node, loop):
                return False
        return True

    def _body_nodes(self, body: cst.CSTNode) -> list[cst.CSTNode]:
        """Nodes of a loop body in source order, nested functions and classes left out."""
        return list(subtree(body, skip=(cst.FunctionDef, cst.ClassDef, cst.Lambda)))[1:]

    def _outer_target(self, target: cst.BaseExpression, loop: cst.For) -> bool:
        if isinstance(target, cst.Name):
            return not self._fresh_each_turn(target, loop)
        return self_attribute(target) is not None

    def _fresh_each_turn(self, target: cst.Name, loop: cst.For) -> bool:
        """`lines = []` in the loop's own body before `target`: each turn fills its own list, in
        its own turn's order; unless the name is read after the loop (the last turn's stays)."""
        body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ()
        here = self.flow.pos(target)
        fresh = any(
            isinstance(small, cst.Assign) and self.flow.pos(small) < here
            and any(isinstance(t.target, cst.Name) and t.target.value == target.value for t in small.targets)
            for statement in body if isinstance(statement, cst.SimpleStatementLine)
            for small in statement.body
        )  # fmt: skip
        return fresh and not self.flow.name_uses(target.value, self.flow.owner(loop), after=loop)

    def _loop_variables(self, loop: cst.For | cst.CompFor) -> set[str]:
        names = set()
        stack = [loop.target]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Name):
                names.add(node.value)
            elif isinstance(node, (cst.Tuple, cst.List)):
                stack.extend(e.value for e in node.elements)
        return names

    def _loop_first_match(self, loop: cst.For) -> str | None:
        """`for x in c: ... return x` or `... y = x; break`: the first match in an unstable order."""
        variables = self._loop_variables(loop)
        for node in self._body_nodes(loop.body):
            if isinstance(node, cst.Return) and node.value is not None and _mentions(node.value, variables):
                if self._innermost_loop(node) is loop:
                    return "which entry the loop returns first"
            if isinstance(node, cst.Break) and self._innermost_loop(node) is loop:
                block = self.flow.parents.get(self.flow.parents.get(node))
                siblings = getattr(block, "body", ())
                for statement in siblings:
                    for small in getattr(statement, "body", ()) if isinstance(statement, cst.SimpleStatementLine) else ():
                        if isinstance(small, cst.Assign) and _mentions(small.value, variables):
                            return "which entry the loop keeps before it breaks"
        return None

    def _innermost_loop(self, node) -> cst.CSTNode | None:
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.For, cst.While)):
                return ancestor
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                return None
        return None

    def _counter_index(self, statement: cst.Assign, loop: cst.For) -> bool:
        """`d[x] = len(d)` or `d[x] = i` with `i += 1` in the loop: indices in iteration order."""
        for target in statement.targets:
            sub = target.target
            if not isinstance(sub, cst.Subscript):
                continue
            value = statement.value
            if isinstance(value, cst.Call) and self.index.resolve(value.func, value) == "builtins.len" and value.args:
                if dotted(value.args[0].value) == dotted(sub.value) and dotted(sub.value):
                    return True
            if isinstance(value, cst.Name):
                for node in self._body_nodes(loop.body):
                    if isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name) and node.target.value == value.value:
                        return True
        return False


def _tests_nonempty(test: cst.BaseExpression, name: str) -> bool:
    """`while todo:`, `while len(todo):`, `while len(todo) > 0:` (or `!= 0`)."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if not (isinstance(target.operator, (cst.GreaterThan, cst.NotEqual)) and isinstance(target.comparator, cst.Integer)):
            return False
        if target.comparator.value != "0":
            return False
        test = test.left
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "len" and len(test.args) == 1:
        test = test.args[0].value
    return isinstance(test, cst.Name) and test.value == name


def _mentions(expr: cst.CSTNode, names: set[str]) -> bool:
    if isinstance(expr, cst.Name):
        return expr.value in names
    return any(_mentions(child, names) for child in expr.children)
