"""What a collection holds, for hash order: hash-randomized strings (STR) or parameters and
modules, hashed by identity (PARAM), from local evidence (`Elements`).
"""

from __future__ import annotations

import libcst as cst

from torchrepro_lint.analysis.dataflow.core import flow
from torchrepro_lint.analysis.dataflow.order_flow import SET_METHODS
from torchrepro_lint.analysis.dataflow.text_sources import json_document, opened_file, reads_text
from torchrepro_lint.analysis.module_index import ModuleIndex
from torchrepro_lint.analysis.names import dotted
from torchrepro_lint.analysis.syntax import arg, assign_targets, method_name, self_attribute, string_value


STR, PARAM = "str", "param"  # hash-randomized strings; parameters/modules (hashed by identity)
MODULE_ITERATORS = frozenset(
    "parameters named_parameters modules named_modules children named_children buffers named_buffers".split()
)
_STR_METHODS = frozenset(
    "lower upper strip lstrip rstrip replace format title casefold capitalize removeprefix removesuffix "
    "zfill ljust rjust center join decode swapcase expandtabs format_map".split()
)
_SPLITTING = frozenset("split rsplit splitlines partition rpartition readlines".split())
_STR_PATH_FUNCS = frozenset(
    "os.path.basename os.path.dirname os.path.join os.path.abspath os.path.normpath os.path.relpath "
    "os.path.expanduser os.path.realpath builtins.str builtins.repr".split()
)
_STR_ITERABLES = frozenset({"builtins.open", "os.listdir", "glob.glob", "glob.iglob", "io.open", "codecs.open"})
_PASSING = frozenset(
    "builtins.sorted builtins.list builtins.tuple builtins.set builtins.frozenset builtins.reversed "
    "itertools.chain builtins.iter".split()
)
_COUNTERS = frozenset({"collections.Counter", "typing.Counter"})
_REGEX_STRINGS = frozenset({"re.findall", "re.split"})  # lists of str (tuples of str with groups)
_FLATTENING = frozenset({"itertools.chain.from_iterable"})
_CSV_READERS = frozenset({"csv.reader", "csv.DictReader"})
_CONTAINER_ANNOTATIONS = frozenset(
    "list List set Set frozenset FrozenSet Sequence Iterable Collection tuple Tuple Iterator".split()
)
SET_CALLS = frozenset({"builtins.set", "builtins.frozenset"})
SET_OPERATORS = (cst.BitOr, cst.BitAnd, cst.Subtract, cst.BitXor)


class Elements:
    """The kind of elements a collection holds, from local evidence: STR, PARAM or None."""

    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.flow = flow(index)
        self._active: set[int] = set()

    def _guard(self, node, compute):
        if id(node) in self._active or len(self._active) > 24:
            return None
        self._active.add(id(node))
        try:
            return compute()
        finally:
            self._active.discard(id(node))

    def _q(self, call: cst.Call) -> str | None:
        return self.index.resolve(call.func, call) if isinstance(call.func, (cst.Name, cst.Attribute)) else None

    qualname = _q

    # -- sets ---------------------------------------------------------------------------------
    def is_set(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, (cst.Set, cst.SetComp)):
            return True
        if isinstance(expr, cst.Call):
            if self._q(expr) in SET_CALLS:
                return True
            method = method_name(expr)
            return bool(method in SET_METHODS and self.is_set(expr.func.value))
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, SET_OPERATORS):
            return self._guard(expr, lambda: self.is_set(expr.left) or self.is_set(expr.right)) or False
        if isinstance(expr, cst.Name):
            value = self.flow.reaching_value(expr)
            return value is not None and (self._guard(expr, lambda: self.is_set(value)) or False)
        return False

    def of_set(self, expr: cst.BaseExpression) -> str | None:
        """What a set-valued expression holds, including what `.add`/`.update` put in later."""
        return self._guard(expr, lambda: self._of_set(expr))

    def _of_set(self, expr) -> str | None:
        kinds: list[str | None] = []
        if isinstance(expr, cst.Set):
            kinds = [self.element(e.value) for e in expr.elements]
        elif isinstance(expr, cst.SetComp):
            kinds = [self.element(expr.elt)]
        elif isinstance(expr, cst.Call):
            method = method_name(expr)
            if method in SET_METHODS:
                kinds = [self.of_set(expr.func.value)] + [self._argument_items(a) for a in expr.args]
            else:
                kinds = [self.iterable(a.value) for a in expr.args if not a.keyword]
                kinds += self._later_additions(expr)
        elif isinstance(expr, cst.BinaryOperation):
            kinds = [self.of_set(expr.left) if self.is_set(expr.left) else self.iterable(expr.left),
                     self.of_set(expr.right) if self.is_set(expr.right) else self.iterable(expr.right)]
        elif isinstance(expr, cst.Name):
            value = self.flow.reaching_value(expr)
            kinds = [self.of_set(value)] if value is not None else []
        return combine_kinds(kinds)

    def _later_additions(self, expr: cst.CSTNode, keys: bool = False) -> list[str | None]:
        """`s = set()` then `s.add(x)` / `s.update(xs)` / `s |= xs` (`.append`/`.extend` for a list)
        in the same function; with `keys`, also `counts[x] += 1` (a Counter's keys)."""
        parent = self.flow.parents.get(expr)
        targets = assign_targets(parent) if isinstance(parent, (cst.Assign, cst.AnnAssign)) else []
        kinds: list[str | None] = []
        for target in targets:
            if isinstance(target, cst.Name):
                owner = self.flow.owner(parent)
                uses = self.flow.name_uses(target.value, owner) + self._closure_uses(target.value, owner)
            elif self_attribute(target) is not None and self.flow.enclosing_class(parent) is not None:
                uses = self.flow.self_attr_uses(self.flow.enclosing_class(parent), self_attribute(target))
            else:
                continue
            for use in uses:
                holder = self.flow.parents.get(use)
                call = self.flow.parents.get(holder)
                if isinstance(holder, cst.Attribute) and isinstance(call, cst.Call) and call.func is holder and call.args:
                    if holder.attr.value in ("add", "append"):
                        kinds.append(self.element(call.args[0].value))
                    elif holder.attr.value in ("update", "extend"):
                        kinds.extend(self.iterable(a.value) for a in call.args if not a.keyword)
                elif isinstance(holder, cst.Subscript) and keys and holder.value is use and _is_key_store(self.flow, holder):
                    kinds.append(self.element(holder.slice[0].slice.value))  # `counts[word] += 1`
                elif isinstance(holder, cst.AugAssign) and holder.target is use:
                    kinds.append(self.iterable(holder.value))
        return kinds

    def _closure_uses(self, name: str, owner) -> list[cst.Name]:
        """Reads of `name` in functions nested in `owner` that do not bind it themselves: a
        callback that fills the collection (`def add(example): vocab.update(...)`)."""
        flow = self.flow
        if not flow.used_in_nested(name, owner):
            return []
        out = []
        for node in flow.names_called(name):
            inner = flow.owner(node)
            if inner is owner or not flow.inside(inner, owner) or not flow.is_load(node):
                continue
            if not flow.bindings(name, inner):
                out.append(node)
        return out

    # -- iterables and their elements ---------------------------------------------------------
    def iterable(self, expr: cst.BaseExpression | None) -> str | None:
        """What iterating `expr` yields."""
        if expr is None:
            return None
        return self._guard(expr, lambda: self._iterable(expr))

    def _iterable(self, expr) -> str | None:
        if isinstance(expr, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
            return STR
        if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
            kinds = [self.element(e.value) for e in expr.elements if isinstance(e, cst.Element)]
            if isinstance(expr, cst.List):
                kinds += self._later_additions(expr)  # `labels = []` then `labels.append(row[1])`
            return combine_kinds(kinds)
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return self.element(expr.elt)
        if isinstance(expr, cst.Call):
            method = method_name(expr)
            if method in MODULE_ITERATORS:
                return PARAM
            if method in _SPLITTING:
                return STR
            if method == "keys" and not expr.args:  # a Counter's (or dict's) keys
                return STR if json_document(self, expr.func.value) else self.iterable(expr.func.value)
            qualname = self._q(expr)
            if qualname in _STR_ITERABLES:
                return STR
            if qualname in _COUNTERS:  # iterating a Counter yields what it counted
                kinds = [self.iterable(a.value) for a in expr.args[:1] if not a.keyword]
                return combine_kinds(kinds + self._later_additions(expr, keys=True))
            if qualname == "builtins.next" and expr.args and self._csv_rows(expr.args[0].value):
                return STR  # a csv header row
            if qualname in _PASSING:
                return combine_kinds([self._argument_items(a) for a in expr.args if not a.keyword])
            if qualname in _FLATTENING and expr.args:
                return self._flattened(expr.args[0].value)
            if qualname in _REGEX_STRINGS:
                return STR
            if qualname == "builtins.map" and len(expr.args) >= 2:
                return self._mapped(expr.args[0].value)
            if qualname == "builtins.filter" and len(expr.args) == 2:
                return self.iterable(expr.args[1].value)
            if _str_dtype(self.index, expr):
                return STR
            if self.is_set(expr):
                return self.of_set(expr)
            return STR if self._element(expr) == STR else None  # a string yields its characters
        if isinstance(expr, cst.Subscript):
            return self.iterable(expr.value) if not _str_dtype_name(self, expr.value) else STR
        if isinstance(expr, cst.BinaryOperation):
            if isinstance(expr.operator, cst.Add) or isinstance(expr.operator, SET_OPERATORS):
                return combine_kinds([self.iterable(expr.left), self.iterable(expr.right)])
            return None
        if isinstance(expr, cst.Name):
            param = self.flow.parameter(expr)
            if param is not None:
                return _annotation_elements(self.index, param) or self._from_callers(param)
            loop = self._loop_binding(expr)
            if loop is not None:
                if isinstance(loop.target, cst.Name) and self._csv_rows(loop.iter):
                    return STR  # a csv row: its cells (or a DictReader row's keys)
                return self._loop_element(expr, loop)
            value = self.flow.reaching_value(expr)
            if value is None:
                if opened_file(self, expr) is not None:
                    return STR  # the lines of a file (str, or bytes: salted the same way)
                accumulated = self._accumulated(expr)
                if accumulated is not None:
                    return self.iterable(accumulated)
                return self._unpacked(expr, as_element=False)
            return self.iterable(value)
        return None

    def _argument_items(self, argument: cst.Arg) -> str | None:
        """What iterating a positional argument yields; for `*xs`, what each of `xs` yields."""
        return self._flattened(argument.value) if argument.star == "*" else self.iterable(argument.value)

    def _flattened(self, expr: cst.BaseExpression) -> str | None:
        """What the iterables inside `expr` yield: `[line.split() for line in f]` -> STR."""
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
            return self.iterable(expr.elt)
        if isinstance(expr, (cst.List, cst.Tuple)):
            return combine_kinds([self.iterable(e.value) for e in expr.elements if isinstance(e, cst.Element)])
        return None

    def _mapped(self, function: cst.BaseExpression) -> str | None:
        """What `map(function, xs)` yields when `function` makes strings: `str`, `str.strip`,
        `lambda line: line.strip()`."""
        if isinstance(function, cst.Lambda):
            return self.element(function.body)
        if isinstance(function, cst.Name) and self.index.resolve(function, function) == "builtins.str":
            return STR
        if isinstance(function, cst.Attribute) and isinstance(function.value, cst.Name):
            if self.index.resolve(function.value, function) == "builtins.str" and function.attr.value in _STR_METHODS:
                return STR  # (not `str.split`: lists)
        return None

    def _accumulated(self, name: cst.Name) -> cst.BaseExpression | None:
        """`tokens = []` then `tokens += line.split()`: the display a name started from when
        only `+=` rebinds it after (what `+=` adds, `_later_additions` collects)."""
        here = self.flow.pos(name)
        start = None
        for statement, value in self.flow.bindings(name.value, self.flow.owner(name)):
            if self.flow.pos(statement) >= here or self.flow.inside(name, statement):
                break
            if not isinstance(statement, cst.AugAssign):
                start = value if isinstance(value, (cst.List, cst.ListComp)) else None
            elif not isinstance(statement.operator, cst.AddAssign):
                start = None
        return start

    def _csv_rows(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether iterating `expr` yields csv rows (lists or dicts of strings)."""
        if depth > 6:
            return False
        if isinstance(expr, cst.Call):
            qualname = self._q(expr)
            if qualname in _CSV_READERS:
                return True
            if qualname in _PASSING and expr.args and not expr.args[0].keyword:
                return self._csv_rows(expr.args[0].value, depth + 1)
            return False
        if isinstance(expr, cst.Name):
            value = self.flow.reaching_value(expr)
            return value is not None and self._csv_rows(value, depth + 1)
        return False

    def _csv_row(self, expr: cst.BaseExpression) -> bool:
        """Whether `expr` is one csv row: a loop variable over a reader, or `next(reader)`."""
        if isinstance(expr, cst.Call):
            return self._q(expr) == "builtins.next" and bool(expr.args) and self._csv_rows(expr.args[0].value)
        if isinstance(expr, cst.Name):
            loop = self._loop_binding(expr)
            if loop is not None:
                return isinstance(loop.target, cst.Name) and self._csv_rows(loop.iter)
            value = self.flow.reaching_value(expr)
            return value is not None and isinstance(value, cst.Call) and self._csv_row(value)
        return False

    def _unpacked(self, name: cst.Name, as_element: bool) -> str | None:
        """`a, b = line.split(",")`: what `name` holds when the nearest binding before it unpacks
        a value; a display unpacks position by position, anything else yields its elements."""
        here = self.flow.pos(name)
        best = None
        for statement, _ in self.flow.bindings(name.value, self.flow.owner(name)):
            if self.flow.pos(statement) < here and not self.flow.inside(name, statement):
                best = statement
        if not isinstance(best, cst.Assign) or len(best.targets) != 1:
            return None
        target = best.targets[0].target
        if not isinstance(target, (cst.Tuple, cst.List)):
            return None
        names = [e.value for e in target.elements]
        position = next((i for i, n in enumerate(names) if isinstance(n, cst.Name) and n.value == name.value), None)
        if position is None or any(isinstance(e, cst.StarredElement) for e in target.elements):
            return None
        value = best.value
        if isinstance(value, (cst.Tuple, cst.List)):
            elements = value.elements
            if len(elements) != len(names) or any(isinstance(e, cst.StarredElement) for e in elements):
                return None
            return self.element(elements[position].value) if as_element else self.iterable(elements[position].value)
        return self.iterable(value) if as_element else None

    def _from_callers(self, param: cst.Param) -> str | None:
        """A module-level function's parameter: what every call of it in this module passes."""
        function = self.flow.parents.get(self.flow.parents.get(param))
        if not isinstance(function, cst.FunctionDef) or self.flow.owner(function) is not self.index.module:
            return None
        if self.flow.enclosing_class(function) is not None:
            return None
        params = function.params
        if param not in params.params:
            return None
        position = list(params.params).index(param)
        kinds = []
        for site in self.index.calls_to("@." + function.name.value):
            passed = arg(site.node, position, param.name.value)
            if passed is None or any(a.star for a in site.node.args):
                return None
            kinds.append(self.iterable(passed))
        if kinds and all(k == kinds[0] for k in kinds):
            return kinds[0]
        return None

    def element(self, expr: cst.BaseExpression) -> str | None:
        """What kind of value `expr` is, as an element of a collection."""
        return self._guard(expr, lambda: self._element(expr))

    def _element(self, expr) -> str | None:
        if isinstance(expr, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
            return STR
        if isinstance(expr, cst.Tuple):
            return combine_kinds([self.element(e.value) for e in expr.elements])
        if isinstance(expr, cst.Call):
            method = method_name(expr)
            if method in _STR_METHODS:
                return STR
            if self._q(expr) in _STR_PATH_FUNCS or reads_text(self, expr):
                return STR
            return None
        if isinstance(expr, cst.Subscript):
            inner = expr.value
            splits = isinstance(inner, cst.Call) and (
                method_name(inner) in _SPLITTING or self._q(inner) in ("os.path.splitext", "os.path.split")
            )
            if splits:
                return STR
            if _str_dtype_name(self, inner):
                return STR
            if self._csv_row(inner):
                return STR  # `row[1]`, `row["label"]`
            return None
        if isinstance(expr, cst.Name):
            param = self.flow.parameter(expr)
            if param is not None:
                annotation = param.annotation.annotation if param.annotation is not None else None
                return STR if annotation is not None and self.index.resolve(annotation, param) in ("builtins.str",) else None
            loop = self._loop_binding(expr)
            if loop is not None:
                return self._loop_element(expr, loop)
            value = self.flow.reaching_value(expr)
            if value is None:
                return self._unpacked(expr, as_element=True)
            return self.element(value)
        return None

    def _loop_binding(self, name: cst.Name) -> cst.For | cst.CompFor | None:
        """The `for` (statement or comprehension) that binds `name` where it is read."""
        for ancestor in self.index.ancestors(name):
            if isinstance(ancestor, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
                comp_for = ancestor.for_in
                while comp_for is not None:
                    if _binds(comp_for.target, name.value):
                        return comp_for
                    comp_for = comp_for.inner_for_in
            if isinstance(ancestor, cst.For) and _binds(ancestor.target, name.value):
                return ancestor
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                return None
        return None

    def _loop_element(self, name: cst.Name, loop) -> str | None:
        target = loop.target
        if isinstance(target, cst.Name):
            return self.iterable(loop.iter)
        if isinstance(target, cst.Tuple):
            position = next(
                (i for i, e in enumerate(target.elements) if isinstance(e.value, cst.Name) and e.value.value == name.value), None
            )
            source = loop.iter
            if position is None or not isinstance(source, cst.Call):
                return None
            method = method_name(source)
            if method in MODULE_ITERATORS and method.startswith("named_"):
                return STR if position == 0 else PARAM
            if method in ("most_common", "items") and position == 0 and len(target.elements) == 2:
                if method == "items" and json_document(self, source.func.value):
                    return STR  # the keys of a JSON object
                return self.iterable(source.func.value)  # `for word, n in counts.most_common()`
            qualname = self._q(source)
            if qualname == "builtins.enumerate" and position == 1 and source.args:
                return self.iterable(source.args[0].value)
            if qualname == "builtins.zip" and position < len(source.args):
                return self.iterable(source.args[position].value)
        return None


def _is_key_store(flow, subscript: cst.Subscript) -> bool:
    """`d[key] = ...` or `d[key] += ...`: a key put into a mapping (one plain index)."""
    parent = flow.parents.get(subscript)
    stored = isinstance(parent, cst.AssignTarget) or (isinstance(parent, cst.AugAssign) and parent.target is subscript)
    return stored and len(subscript.slice) == 1 and isinstance(subscript.slice[0].slice, cst.Index)


def combine_kinds(kinds) -> str | None:
    kinds = [k for k in kinds if k]
    if PARAM in kinds:
        return PARAM
    return STR if STR in kinds else None


def _binds(target: cst.BaseExpression, name: str) -> bool:
    if isinstance(target, cst.Name):
        return target.value == name
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_binds(e.value, name) for e in target.elements)
    return False


def _str_dtype(index: ModuleIndex, call: cst.Call) -> bool:
    """`np.genfromtxt(..., dtype=str)`, `np.array(x, dtype="U10")`: an array of strings."""
    dtype = arg(call, None, "dtype")
    if dtype is None:
        return False
    text = string_value(dtype)
    if text is not None:
        return text.lstrip("<>=|").startswith(("U", "str"))
    if isinstance(dtype, cst.Call) and dtype.args:
        return _str_dtype_value(index, dtype.args[0].value)
    return _str_dtype_value(index, dtype)


def _str_dtype_value(index: ModuleIndex, expr: cst.BaseExpression) -> bool:
    if isinstance(expr, (cst.Name, cst.Attribute)):
        return index.resolve(expr, expr) in ("builtins.str", "numpy.str_", "numpy.unicode_")
    return False


def _str_dtype_name(elements: Elements, expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Call):
        return _str_dtype(elements.index, expr)
    if isinstance(expr, cst.Subscript):
        return _str_dtype_name(elements, expr.value)
    if isinstance(expr, cst.Name):
        value = elements.flow.reaching_value(expr)
        return value is not None and _str_dtype_name(elements, value)
    return False


def _annotation_elements(index: ModuleIndex, param: cst.Param) -> str | None:
    """`names: list[str]` -> STR; `text: str` -> STR (its characters)."""
    if param.annotation is None:
        return None
    annotation = param.annotation.annotation
    if isinstance(annotation, cst.Name) and annotation.value == "str":
        return STR
    if isinstance(annotation, cst.Subscript):
        base = dotted(annotation.value) or ""
        if base.rsplit(".", 1)[-1] in _CONTAINER_ANNOTATIONS and annotation.slice:
            inner = annotation.slice[0].slice
            if isinstance(inner, cst.Index) and isinstance(inner.value, cst.Name) and inner.value.value == "str":
                return STR
    return None
