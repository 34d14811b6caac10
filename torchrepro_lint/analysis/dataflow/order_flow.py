"""Where the order of an order-unstable collection (a directory listing, a set) goes next.

`OrderFlow` follows the collection through assignments, loops, calls and comprehensions to a
`Verdict`: sorted, an order-free use (safe), an order-sensitive sink (index, enumerate, zip,
first match, ...: hazard), or somewhere we cannot see (unknown). What a loop does with the
order is loop_order.py's part of the class.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.dataflow.loop_order import LoopOrder
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.names import dotted
from torchrepro_lint.analysis.syntax import assign_targets, int_value, method_name, self_attribute, string_value


HAZARD, SORTED, SAFE, UNKNOWN = "hazard", "sorted", "safe", "unknown"
# Augmented set operators: `acc |= more` keeps a set (`+=` copies into a list, in its order)
_SET_AUGMENTED = (cst.BitOrAssign, cst.BitAndAssign, cst.SubtractAssign, cst.BitXorAssign)


@dataclass(frozen=True)
class Verdict:
    kind: str  # HAZARD | SORTED | SAFE | UNKNOWN
    sink: str = ""  # what the order decides, for messages: "the numbers enumerate() assigns", ...
    node: cst.CSTNode | None = None  # where the order is consumed
    entry: cst.CSTNode | None = None  # the collection as it enters the first ordering construct
    materialized: bool = False  # the order was copied into a list on the way
    loop: cst.CSTNode | None = None  # the loop that accumulated it, for parallel lists


def combine(verdicts: list[Verdict]) -> Verdict:
    """Several uses of one variable: a sort anywhere wins (the order is fixed where it
    matters, the trap "sorted() later"), then the first hazard, then unknown, then safe."""
    for kind in (SORTED, HAZARD, UNKNOWN):
        for verdict in verdicts:
            if verdict.kind == kind:
                return verdict
    return verdicts[0] if verdicts else Verdict(SAFE)


INDEXING = "which element an index or slice picks"
FIRST_ENTRY = "which entry next() picks first"
_PICKING_ONE = (INDEXING, FIRST_ENTRY)  # sinks that pick one element: harmless when there is one
SORTING_CALLS = frozenset({"builtins.sorted", "heapq.nsmallest", "heapq.nlargest", "natsort.natsorted", "natsort.os_sorted"})
ORDER_FREE_CALLS = frozenset(
    "builtins.set builtins.frozenset builtins.len builtins.sum builtins.min builtins.max builtins.any "
    "builtins.all builtins.bool collections.Counter math.fsum builtins.print".split()
)
MATERIALIZING_CALLS = frozenset(
    "builtins.list builtins.tuple builtins.iter builtins.reversed builtins.filter numpy.array numpy.asarray "
    "torch.tensor torch.as_tensor torch.LongTensor torch.Tensor itertools.chain dict.fromkeys "
    "collections.OrderedDict.fromkeys".split()
)
SELECTING_CALLS = {
    "builtins.enumerate": "the numbers enumerate() assigns",
    "builtins.zip": "which elements zip() pairs",
    "builtins.next": FIRST_ENTRY,
    "random.shuffle": "what a seeded random.shuffle returns (it permutes by position)",
    "random.choice": "what a seeded random.choice picks (by position)",
    "random.sample": "what a seeded random.sample picks (by position)",
    "numpy.random.shuffle": "what a seeded np.random.shuffle returns (it permutes by position)",
    "numpy.random.choice": "what a seeded np.random.choice picks (by position)",
    "numpy.random.permutation": "what a seeded np.random.permutation returns (it permutes by position)",
}
NEUTRAL_METHODS = frozenset(
    "add update remove discard append extend insert clear issubset issuperset isdisjoint count "
    "__contains__ intersection_update difference_update".split()
)
SET_METHODS = frozenset("union intersection difference symmetric_difference copy".split())

# Calls whose arguments only become a message: printed, logged or warned (a list in hash order
# there changes the text, not what the program computes). Exception constructors in a `raise`
# and loggers' level methods are recognised in `_only_text`.
TEXT_CALLS = frozenset(
    "builtins.print warnings.warn logging.debug logging.info logging.warning logging.warn logging.error "
    "logging.exception logging.critical logging.fatal logging.log".split()
)
LOGGER_METHODS = frozenset("debug info warning warn error exception critical fatal log".split())
_LOGGER_NAME = re.compile(r"(?i)^_*(log|logging|.*logger)$")
TEXT = "text only"  # the SAFE verdict's sink when the order only reaches a message


class OrderFlow(LoopOrder):
    """Follows a collection whose order is not stable to where its order is used.

    `extra_sink(call, qualname, at)` lets a rule name more order-sensitive consumers (a
    Dataset constructor, an optimizer); it returns a sink description or None.
    """

    def __init__(self, index: ModuleIndex, extra_sink: Callable | None = None, *, sets: bool = True) -> None:
        self.index = index
        self.flow = flow(index)
        self.extra_sink = extra_sink
        # Following a set (TRP602/603), not a list in file-system order (TRP601): a set appended
        # to a list as one element keeps no order there, a listing keeps its own inside it.
        self.sets = sets
        self._active: set[tuple] = set()

    def of(self, node: cst.BaseExpression) -> Verdict:
        """Where the order of the collection `node` evaluates to goes."""
        return self._from(node, Verdict(UNKNOWN), 0)

    def of_binding(self, target: cst.BaseExpression, statement: cst.CSTNode) -> Verdict:
        """The same for a collection bound to `target` (a name or `self.x`) by `statement`."""
        return self._into(target, statement, Verdict(UNKNOWN), 0)

    def _step(self, state: Verdict, node: cst.CSTNode, ordering: bool = True, materialized: bool = False) -> Verdict:
        """Carry `state` past `node`; `ordering` marks a construct that consumes the order."""
        entry = state.entry if state.entry is not None or not ordering else node
        return replace(state, entry=entry, materialized=state.materialized or materialized)

    def _end(self, state: Verdict, kind: str, node: cst.CSTNode, sink: str = "") -> Verdict:
        entry = state.entry if state.entry is not None else node
        return replace(state, kind=kind, sink=sink, node=node, entry=entry)

    def _from(self, node: cst.CSTNode, state: Verdict, depth: int) -> Verdict:
        if depth > 12:
            return self._end(state, UNKNOWN, node)
        parents = self.flow.parents
        parent = parents.get(node)
        index = self.index

        if isinstance(parent, cst.Arg):
            call = parents.get(parent)
            if not isinstance(call, cst.Call):
                return self._end(state, UNKNOWN, node)
            return self._argument(node, parent, call, state, depth)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            call = parents.get(parent)
            if isinstance(call, cst.Call) and call.func is parent:
                method = parent.attr.value
                if method == "sort":
                    return self._end(state, SORTED, call)
                if method == "index":
                    return self._end(state, HAZARD, call, "the positions .index() finds")
                if method == "pop" and not call.args:
                    if self._drained(call, node):
                        return self._end(state, SAFE, call)
                    return self._end(state, HAZARD, call, "which element .pop() takes")
                if method in SET_METHODS:
                    return self._from(call, state, depth + 1)
                if method in NEUTRAL_METHODS:
                    return self._end(state, SAFE, call)
                if method == "join":
                    return self._end(state, UNKNOWN, call)
            return self._end(state, UNKNOWN, node)
        if isinstance(parent, cst.Attribute):  # `x.join(node)`-like forms arrive through Arg
            return self._end(state, UNKNOWN, node)
        if isinstance(parent, cst.Subscript) and parent.value is node:
            if self.flow._is_store(parent) or isinstance(parents.get(parent), cst.Del):
                return self._end(state, SAFE, parent)
            return self._end(state, HAZARD, parent, INDEXING)
        if isinstance(parent, cst.ComparisonTarget):
            if isinstance(parent.operator, (cst.In, cst.NotIn)):
                return self._end(state, SAFE, parent)
            return self._end(state, UNKNOWN, node)
        if isinstance(parent, cst.Comparison):
            first = parent.comparisons[0].operator if parent.comparisons else None
            return self._end(state, SAFE if isinstance(first, (cst.Is, cst.IsNot)) else UNKNOWN, node)
        if isinstance(parent, cst.CompFor) and parent.iter is node:
            comp = next(a for a in index.ancestors(parent) if not isinstance(a, cst.CompFor))
            if isinstance(comp, (cst.SetComp, cst.DictComp)):
                return self._end(state, SAFE, comp)
            if isinstance(comp, (cst.ListComp, cst.GeneratorExp)):
                first_match = self._comp_first_match(comp)
                step = self._step(state, node, materialized=True)
                if first_match:
                    return self._end(step, HAZARD, comp, first_match)
                return self._from(comp, step, depth + 1)
            return self._end(state, UNKNOWN, node)
        if isinstance(parent, cst.For) and parent.iter is node:
            return self._loop(parent, self._step(state, node), depth)
        if isinstance(parent, (cst.Assign, cst.AnnAssign, cst.NamedExpr)) and parent.value is node:
            return self._assigned(parent, node, state, depth)
        if isinstance(parent, cst.AugAssign) and parent.target is node:
            return self._end(state, SAFE, node)  # `acc += more`: the accumulator itself
        if isinstance(parent, cst.AugAssign) and parent.value is node:
            if isinstance(parent.operator, _SET_AUGMENTED):  # `acc |= more`: a set still, in hash order
                return self._into(parent.target, parent, state, depth)
            return self._into(parent.target, parent, self._step(state, node, materialized=True), depth)
        if isinstance(parent, cst.FormattedStringExpression) or _formatted_by_percent(node, parent, parents):
            return self._end(state, SAFE, node, TEXT)  # `f"{list(s)}"`, `"%s" % (list(s),)`
        if isinstance(parent, cst.BinaryOperation):
            if isinstance(parent.operator, (cst.BitOr, cst.BitAnd, cst.Subtract, cst.BitXor)):
                return self._from(parent, state, depth + 1)
            if isinstance(parent.operator, cst.Add):
                return self._from(parent, self._step(state, node, materialized=True), depth + 1)
            return self._end(state, UNKNOWN, node)
        if isinstance(parent, cst.StarredElement):
            container = parents.get(parent)
            if isinstance(container, (cst.List, cst.Tuple)):
                return self._from(container, self._step(state, node, materialized=True), depth + 1)
            if isinstance(container, cst.Set):
                return self._end(state, SAFE, container)
            return self._end(state, UNKNOWN, node)
        if isinstance(parent, cst.DictElement) and parent.value is node:
            key = string_value(parent.key)
            container = parents.get(parent)
            if key == "params" and isinstance(container, cst.Dict):
                return self._from(container, self._step(state, node), depth + 1)
            return self._end(state, UNKNOWN, node)
        if isinstance(parent, cst.Element):
            container = parents.get(parent)
            if isinstance(container, (cst.List, cst.Tuple)) and isinstance(node, cst.Dict):
                return self._from(container, state, depth + 1)  # a list of param groups
            return self._end(state, UNKNOWN, node)
        if isinstance(parent, cst.Expr):
            return self._end(state, SAFE, node)
        if isinstance(parent, (cst.If, cst.While, cst.Assert)) and getattr(parent, "test", None) is node:
            return self._end(state, SAFE, node)
        if isinstance(parent, (cst.BooleanOperation,)):
            return self._end(state, SAFE, node)
        if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
            return self._end(state, SAFE, node)
        if isinstance(parent, cst.IfExp):
            if parent.test is node:
                return self._end(state, SAFE, node)
            return self._from(parent, state, depth + 1)
        if isinstance(parent, cst.WithItem) and parent.item is node and parent.asname is not None:
            return self._into(parent.asname.name, parent, state, depth)
        return self._end(state, UNKNOWN, node)

    def _argument(self, node, arg_node: cst.Arg, call: cst.Call, state: Verdict, depth: int) -> Verdict:
        index = self.index
        qualname = index.resolve(call.func, call) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
        if self.extra_sink is not None:
            sink = self.extra_sink(call, qualname, arg_node)
            if sink:
                return self._end(self._step(state, node), HAZARD, call, sink)
        if self._only_text(call, qualname):
            return self._end(state, SAFE, call, TEXT)
        if arg_node.star == "*":
            return self._end(state, UNKNOWN, node)
        if arg_node.keyword is not None and arg_node.keyword.value not in ("iterable",):
            return self._end(state, UNKNOWN, node)
        if qualname in SORTING_CALLS:
            return self._end(state, SORTED, call)
        if qualname in ORDER_FREE_CALLS:
            return self._end(state, SAFE, call)
        if qualname in MATERIALIZING_CALLS:
            return self._from(call, self._step(state, node, materialized=True), depth + 1)
        if qualname == "builtins.map" and call.args and call.args[0] is not arg_node:
            return self._from(call, self._step(state, node, materialized=True), depth + 1)
        if qualname == "builtins.zip" and (self._parallel(call, arg_node, state) or self._zips_with_itself(call)):
            # Lists accumulated side by side in one loop, or one list zipped with a list
            # derived from it element by element, pair up the same in any order.
            return self._from(call, self._step(state, node, materialized=True), depth + 1)
        if qualname == "builtins.enumerate" and self._counter_only(call):
            return self._loop(self.flow.parents[call], self._step(state, node), depth)
        if qualname in SELECTING_CALLS:
            if qualname == "builtins.next" and call.args and call.args[0] is not arg_node:
                return self._end(state, UNKNOWN, node)  # the default of next()
            if qualname == "builtins.next" and self._tests_existence(call):
                return self._end(state, SAFE, call)
            return self._end(self._step(state, node), HAZARD, call, SELECTING_CALLS[qualname])
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("extend", "append", "insert"):
            if call.func.attr.value == "insert" and call.args and call.args[0] is arg_node:
                return self._end(state, SAFE, call)
            if self.sets and call.func.attr.value != "extend" and not isinstance(node, cst.Dict):
                # `out.append(s)` stores the set as one element: the list's order is not taken
                # from it, and what becomes of the element we cannot see. (A param group
                # `{"params": s}` appended to a list of groups is still followed; a listing
                # appended whole keeps its order inside, and is followed as before.)
                return self._end(state, UNKNOWN, call)
            return self._into(call.func.value, call, self._step(state, node, materialized=True), depth)
        method = method_name(call)
        if method in ("union", "intersection", "difference", "symmetric_difference"):
            return self._from(call, state, depth + 1)  # `a.union(node)`: still a set
        if method in ("update", "issubset", "issuperset", "isdisjoint"):
            return self._end(state, SAFE, call)
        return self._end(state, UNKNOWN, node)

    def _only_text(self, call: cst.Call, qualname: str | None) -> bool:
        """The arguments of `call` only become text: print, logging, `warnings.warn`, an
        exception constructed in a `raise`, `"...".format(...)` and `sep.join(...)` on a string."""
        if qualname in TEXT_CALLS:
            return True
        parent = self.flow.parents.get(call)
        if isinstance(parent, cst.Raise) and parent.exc is call:
            return True  # `raise ValueError("unknown keys", list(missing))`
        func = call.func
        if not isinstance(func, cst.Attribute):
            return False
        method = func.attr.value
        if method in ("format", "join"):
            return _is_text(func.value)
        return method in LOGGER_METHODS and self._is_logger(func.value)

    def _is_logger(self, receiver: cst.BaseExpression) -> bool:
        """`logger`, `self._logger`, `LOG`, `logging.getLogger(...)`, or a name bound to it."""
        if isinstance(receiver, cst.Name):
            value = self.flow.reaching_value(receiver)
            if isinstance(value, cst.Call):
                receiver = value
        if isinstance(receiver, cst.Call):
            callee = dotted(receiver.func) or ""
            return callee.rsplit(".", 1)[-1] in ("getLogger", "get_logger")
        name = dotted(receiver)
        return name is not None and bool(_LOGGER_NAME.match(name.rsplit(".", 1)[-1]))

    def _parallel(self, call: cst.Call, arg_node: cst.Arg, state: Verdict) -> bool:
        """Every other argument of zip() is a list appended to in the loop that built ours."""
        if state.loop is None:
            return False
        appended = set()
        for node in self._body_nodes(state.loop.body):
            if isinstance(node, cst.Call) and method_name(node) in ("append", "extend", "insert"):
                appended.add(dotted(node.func.value))
        others = [a for a in call.args if a is not arg_node]
        return bool(others) and all(a.keyword is None and not a.star and dotted(a.value) in appended for a in others)

    def _tests_existence(self, call: cst.Call) -> bool:
        """`next(...)`'s value is thrown away (only StopIteration matters), compared `is None` /
        `is not None`, or only tested for truth: it says whether there is an entry, not which."""
        parents = self.flow.parents
        parent = parents.get(call)
        if isinstance(parent, cst.Expr):
            return True
        if isinstance(parent, (cst.If, cst.While, cst.Assert, cst.IfExp)) and parent.test is call:
            return True
        if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
            return True
        if isinstance(parent, cst.Arg) and parent.keyword is None:
            holder = parents.get(parent)
            return isinstance(holder, cst.Call) and self.index.resolve(holder.func, holder) == "builtins.bool"
        comparison = parents.get(parent) if isinstance(parent, cst.ComparisonTarget) else parent
        if not (isinstance(comparison, cst.Comparison) and len(comparison.comparisons) == 1):
            return False
        (target,) = comparison.comparisons
        other = target.comparator if comparison.left is call else comparison.left
        return isinstance(target.operator, (cst.Is, cst.IsNot)) and isinstance(other, cst.Name) and other.value == "None"

    def _zips_with_itself(self, call: cst.Call) -> bool:
        """`zip(xs, [f(x) for x in xs])`, `zip(xs, map(f, xs))`, or `ys = [f(x) for x in xs]`
        then `zip(xs, ys)`: every argument is one list, or one element per element of it, so
        the i-th elements belong together in any order."""
        if len(call.args) < 2 or any(a.keyword is not None or a.star for a in call.args):
            return False
        sources = {self._elementwise_source(a.value, call) for a in call.args}
        return len(sources) == 1 and None not in sources

    def _elementwise_source(self, expr: cst.BaseExpression, at: cst.Call) -> tuple | None:
        """The list `expr` is, or is derived from element by element, as a (name, binding) key."""
        source = _mapped_over(self.index, expr)
        if source is not None:
            return self._list_key(source)
        if isinstance(expr, cst.Name):
            value = self.flow.reaching_value(expr)
            source = _mapped_over(self.index, value) if value is not None else None
            # Through a variable only when both lists stay as they were up to the zip (no
            # `.reverse()`, no rebinding in between) and the binding of the source is known.
            if isinstance(source, cst.Name) and self.flow.reaching_value(source) is not None:
                statement = self.flow.statement(value)
                if self._left_alone(expr.value, statement, at) and self._left_alone(source.value, statement, at):
                    return self._list_key(source)
        return self._list_key(expr)

    def _list_key(self, expr: cst.BaseExpression) -> tuple | None:
        name = dotted(expr)
        if name is None:
            return None
        binding = self.flow.reaching_value(expr) if isinstance(expr, cst.Name) else None
        return name, id(binding)

    def _left_alone(self, name: str, statement: cst.CSTNode, at: cst.CSTNode) -> bool:
        """Between `statement` and `at`, `name` is only read in ways that cannot reorder it."""
        end = self.flow.pos(at)
        for use in self.flow.name_uses(name, self.flow.owner(statement), statement):
            if self.flow.pos(use) >= end:
                continue
            parent = self.flow.parents.get(use)
            if isinstance(parent, cst.Arg):
                holder = self.flow.parents.get(parent)
                if isinstance(holder, cst.Call) and self.index.resolve(holder.func, holder) in ORDER_FREE_CALLS | SORTING_CALLS:
                    continue
            if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is use:
                continue
            if isinstance(parent, cst.ComparisonTarget) and isinstance(parent.operator, (cst.In, cst.NotIn)):
                continue
            return False
        return True

    def _assigned(self, statement, node, state: Verdict, depth: int) -> Verdict:
        targets = assign_targets(statement)
        verdicts = []
        for target in targets:
            verdicts.append(self._into(target, statement, state, depth))
        return combine(verdicts) if verdicts else self._end(state, UNKNOWN, node)

    def _into(self, target: cst.BaseExpression, statement: cst.CSTNode, state: Verdict, depth: int) -> Verdict:
        """The collection now lives in a variable: combine what happens at each of its uses."""
        attr = self_attribute(target)
        if isinstance(target, cst.Name):
            owner = self.flow.owner(statement)
            # Per binding: `words = list(words)` rebinds the name from itself, and what the new
            # binding's uses do with the order still counts (a cycle needs the same statement).
            key = ("name", id(owner), target.value, id(statement))
            if key in self._active:
                return self._end(state, SAFE, target)
            self._active.add(key)
            try:
                after = statement if not self._accumulating(statement) else None
                uses = self.flow.name_uses(target.value, owner, after)
                uses = [u for u in uses if not self._rebound_before(target.value, owner, statement, u)]
                return self._uses(uses, owner, state, depth, target)
            finally:
                self._active.discard(key)
        if attr is not None:
            klass = self.flow.enclosing_class(statement)
            if klass is None:
                return self._end(state, UNKNOWN, target)
            key = ("attr", id(klass), attr)
            if key in self._active:
                return self._end(state, SAFE, target)
            self._active.add(key)
            try:
                return self._uses(self.flow.self_attr_uses(klass, attr), klass, state, depth, target)
            finally:
                self._active.discard(key)
        return self._end(state, UNKNOWN, target)

    def _accumulating(self, statement: cst.CSTNode) -> bool:
        return isinstance(statement, (cst.Call, cst.AugAssign))

    def _rebound_before(self, name: str, owner, statement, use) -> bool:
        """Another plain assignment to `name` between the binding and this use."""
        start, end = self.flow.pos(statement), self.flow.pos(use)
        for other, value in self.flow.bindings(name, owner):
            if other is statement or not isinstance(other, (cst.Assign, cst.AnnAssign)):
                continue
            if start < self.flow.pos(other) < end and not self.flow.inside(use, other):
                return True
        return False

    def _uses(self, uses, scope, state: Verdict, depth: int, target) -> Verdict:
        if not uses:
            return self._end(state, UNKNOWN, target)
        verdicts = [self._from(use, state, depth + 1) for use in uses]
        picks_one = [v.kind == HAZARD and v.sink in _PICKING_ONE for v in verdicts]
        if any(picks_one) and self._single_asserted(uses):
            # Of a single element, every index and next() pick the same one.
            verdicts = [v for v, picks in zip(verdicts, picks_one) if not picks] or [Verdict(SAFE)]
        return combine(verdicts)

    def _single_asserted(self, uses) -> bool:
        """`len(x) == 1` (or != 1, > 1, ...) checked somewhere: a single, asserted result."""
        for use in uses:
            arg_node = self.flow.parents.get(use)
            call = self.flow.parents.get(arg_node)
            if not (isinstance(call, cst.Call) and self.index.resolve(call.func, call) == "builtins.len"):
                continue
            comparison = self.flow.parents.get(call)
            if isinstance(comparison, cst.Comparison) and any(int_value(t.comparator) == 1 for t in comparison.comparisons):
                return True
            if isinstance(comparison, cst.ComparisonTarget) and int_value(self.flow.parents[comparison].left) == 1:
                return True
            if isinstance(comparison, cst.Arg) and _asserts_equal_to_one(self.flow.parents.get(comparison)):
                return True  # `self.assertEqual(len(x), 1, ...)`
        return False

    def _loop(self, loop: cst.For, state: Verdict, depth: int) -> Verdict:
        """`for x in <collection>:` — what the body does with the order."""
        first_match = self._loop_first_match(loop)
        if first_match:
            return self._end(state, HAZARD, loop.iter, first_match)
        verdicts = []
        for node in self._body_nodes(loop.body):
            if isinstance(node, (cst.Yield,)):
                return self._end(state, UNKNOWN, node)
            accumulated = replace(self._step(state, loop.iter, materialized=True), loop=loop)
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                if node.func.attr.value in ("append", "extend", "insert") and self._outer_target(node.func.value, loop):
                    verdicts.append(self._into(node.func.value, node, accumulated, depth + 1))
            elif isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign):
                if self._outer_target(node.target, loop) and isinstance(node.value, (cst.List, cst.ListComp, cst.Tuple)):
                    verdicts.append(self._into(node.target, node, accumulated, depth + 1))
            elif isinstance(node, cst.Assign) and self._counter_index(node, loop):
                return self._end(state, HAZARD, node, "an index map built in iteration order")
        if not verdicts:
            return self._end(state, SAFE, loop)
        return combine(verdicts)

    def _comp_first_match(self, comp) -> str | None:
        parent = self.flow.parents.get(comp)
        if isinstance(comp, cst.GeneratorExp) and isinstance(parent, cst.Arg):
            call = self.flow.parents.get(parent)
            if isinstance(call, cst.Call) and self.index.resolve(call.func, call) == "builtins.next" and call.args[0] is parent:
                return None if self._tests_existence(call) else FIRST_ENTRY
        return None


def _is_text(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))


def _formatted_by_percent(node, parent, parents) -> bool:
    """`"%s" % node`, or `node` an item of the tuple or dict on the right of `"..." %`."""
    if isinstance(parent, (cst.Element, cst.DictElement)) and getattr(parent, "value", None) is node:
        node = parents.get(parent)
        if not isinstance(node, (cst.Tuple, cst.Dict)):
            return False
        parent = parents.get(node)
    return (
        isinstance(parent, cst.BinaryOperation)
        and isinstance(parent.operator, cst.Modulo)
        and parent.right is node
        and _is_text(parent.left)
    )


def _mapped_over(index: ModuleIndex, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """What a list comprehension, generator or `map(f, xs)` goes over one to one (no filter,
    no nested loop), else None."""
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        loop = expr.for_in
        if loop.inner_for_in is None and not loop.ifs and loop.asynchronous is None:
            return loop.iter
    if isinstance(expr, cst.Call) and len(expr.args) == 2 and index.resolve(expr.func, expr) == "builtins.map":
        mapped = expr.args[1]
        if mapped.keyword is None and not mapped.star:
            return mapped.value
    return None


def _asserts_equal_to_one(call) -> bool:
    """unittest's `assertEqual(len(x), 1)` / `assertEqual(1, len(x))`: a single, asserted result."""
    return (
        isinstance(call, cst.Call)
        and isinstance(call.func, cst.Attribute)
        and call.func.attr.value in ("assertEqual", "assertEquals")
        and any(int_value(a.value) == 1 for a in call.args[:2])
    )
